"""Gray-Scott 4096^2 float32 written with the equation API, against the copy bandwidth and peers.

One step reads u and v and writes u.next and v.next: 16 bytes per cell in one
pass. The two-steps-per-pass row counts the same 16 bytes per step, so past
100% it moves fewer bytes than the steps it takes would. Each row: median of CUDA-event-timed repeats, outputs checked against
ours before the time counts. Also times a cold and a warm start of a new
problem (kernel compile, first step). Usage: python3 benchmarks/equations_bench.py [--out FILE]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import cupy as cp
import numpy as np

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend

N = 4096
PARAMS = dict(Du=0.16, Dv=0.08, F=0.035, k=0.065, dt=1.0)


def timed(fn, warmup=3, repeats=15, inner=10) -> float:
    for _ in range(warmup):
        fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record()
        for _ in range(inner):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / inner)
    return statistics.median(times)


def problem(n=N, dtype="float32"):
    grid = sf.Grid((n, n), spacing=1.0, dtype=dtype)
    u, v = sf.Field("u", grid), sf.Field("v", grid)
    c = {k: sf.Constant(k, val) for k, val in PARAMS.items()}
    uvv = u * v * v
    eqs = [
        sf.Eq(u.next, u + c["dt"] * (c["Du"] * sf.laplacian(u) - uvv + c["F"] * (1 - u))),
        sf.Eq(v.next, v + c["dt"] * (c["Dv"] * sf.laplacian(v) + uvv - (c["F"] + c["k"]) * v)),
    ]
    rng = np.random.default_rng(0)
    return sf.Problem(eqs, initial={u: rng.random((n, n)), v: 0.3 * rng.random((n, n))},
                      boundary={u: sf.Periodic(), v: sf.Periodic()}, dt=c["dt"])


def heat3d(n=512):
    grid = sf.Grid((n, n, n), extent=1.0, dtype="float32")
    u = sf.Field("u", grid)
    a = sf.Constant("a", 0.1)
    return sf.Problem([sf.Eq(u.next, u + a * grid.spacing[0] ** 2 * sf.laplacian(u))],
                      initial={u: sf.sin(3.0 * grid.x) * grid.y + grid.z}, boundary={u: sf.Dirichlet(0.0)})


def copy_gbps(nbytes=2 << 30) -> float:
    src = cp.random.random(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    s = timed(lambda: cp.copyto(dst, src))
    return 2 * nbytes / s / 1e9


def peers(u, v):
    """Each peer's one step on interior arrays (periodic by roll, as a user of that library writes it)."""
    P = PARAMS
    out = {}

    def cupy_step():
        def lap(a):
            return cp.roll(a, 1, 0) + cp.roll(a, -1, 0) + cp.roll(a, 1, 1) + cp.roll(a, -1, 1) - 4 * a

        uvv = u * v * v
        return u + P["dt"] * (P["Du"] * lap(u) - uvv + P["F"] * (1 - u)), v + P["dt"] * (P["Dv"] * lap(v) + uvv - (P["F"] + P["k"]) * v)

    out["cupy (roll)"] = cupy_step
    try:
        import torch

        tu, tv = torch.as_tensor(u, device="cuda"), torch.as_tensor(v, device="cuda")

        def torch_step(a=tu, b=tv):
            def lap(x):
                return torch.roll(x, 1, 0) + torch.roll(x, -1, 0) + torch.roll(x, 1, 1) + torch.roll(x, -1, 1) - 4 * x

            uvv = a * b * b
            return a + P["dt"] * (P["Du"] * lap(a) - uvv + P["F"] * (1 - a)), b + P["dt"] * (P["Dv"] * lap(b) + uvv - (P["F"] + P["k"]) * b)

        out["torch eager"] = lambda: torch_step()
        compiled = torch.compile(torch_step)
        out["torch.compile"] = lambda: compiled()
    except ImportError:
        pass
    try:
        import jax
        import jax.numpy as jnp

        ju, jv = jnp.asarray(cp.asnumpy(u)), jnp.asarray(cp.asnumpy(v))

        @jax.jit
        def jax_step(a, b):
            def lap(x):
                return jnp.roll(x, 1, 0) + jnp.roll(x, -1, 0) + jnp.roll(x, 1, 1) + jnp.roll(x, -1, 1) - 4 * x

            uvv = a * b * b
            return a + P["dt"] * (P["Du"] * lap(a) - uvv + P["F"] * (1 - a)), b + P["dt"] * (P["Dv"] * lap(b) + uvv - (P["F"] + P["k"]) * b)

        out["jax.jit"] = lambda: jax.block_until_ready(jax_step(ju, jv))
    except ImportError:
        pass
    return out


def start_times() -> dict:
    """A fresh process running 1 step of a new problem: empty cache (cold) and again (warm)."""
    code = ("import time; t0=time.perf_counter(); import sys; sys.path.insert(0, 'benchmarks'); import equations_bench as b; "
            "import stencilforge as sf; r = sf.run(b.problem(512), steps=1, backend='cuda'); "
            "print(time.perf_counter() - t0)")
    cache = tempfile.mkdtemp()
    env = dict(os.environ, STENCILFORGE_CACHE_DIR=cache)
    res = {}
    for label in ("cold", "warm"):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
        res[f"{label}_process_s"] = time.perf_counter() - t0
    return res


def paired_step(p, backend):
    """Seconds per step of the two-steps-per-pass kernel, once its fields equal two single steps'."""
    paired, single = sf.Simulation(p, backend), sf.Simulation(p, backend)
    assert paired.build_fused() is None
    paired.step_fused()
    single.step(2)
    if not all(bool((paired.fields[f] == single.fields[f]).all()) for f in ("u", "v")):
        return "DIFFERENT from two single steps"
    return timed(paired.step_fused) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    backend = CudaBackend()
    ceiling = copy_gbps()
    p = problem()
    sim = sf.Simulation(p, backend)
    nbytes = p.analysis.bytes_per_cell() * N * N
    ours = timed(lambda: sim.step())
    passes = sim.passes
    arrays = sim.arrays()
    params = sim.params
    kernel_only = timed(lambda: passes[0][1](arrays, params, 0.0))
    rows = {"stencilforge (step)": ours, "stencilforge (kernel)": kernel_only}
    rows["stencilforge (two steps per pass, per step)"] = paired_step(p, backend)
    # check peers against ours on the same state
    sim.step()
    u0 = cp.ascontiguousarray(sim.fields["u"])
    v0 = cp.ascontiguousarray(sim.fields["v"])
    sim.step()
    want = cp.asnumpy(sim.fields["u"])
    for name, fn in peers(u0, v0).items():
        got = fn()[0]
        got = np.asarray(got.cpu() if hasattr(got, "cpu") else cp.asnumpy(got) if isinstance(got, cp.ndarray) else got)
        err = float(np.abs(got - want).max())
        if err > 1e-4:
            rows[name] = f"DIFFERENT ({err:.2e})"
            continue
        rows[name] = timed(fn)
    result = {"device": backend.device_name, "copy_gbps": ceiling, "shape": [N, N], "dtype": "float32",
              "bytes_per_cell": p.analysis.bytes_per_cell(), "rows": {}}
    print(f"{backend.device_name}: copy {ceiling:.0f} GB/s; Gray-Scott {N}^2 float32, {p.analysis.bytes_per_cell()} B/cell")
    for name, s in rows.items():
        if isinstance(s, str):
            print(f"{name:24s} {s}")
            result["rows"][name] = s
            continue
        gbps = nbytes / s / 1e9
        result["rows"][name] = {"ms": s * 1e3, "gbps": gbps, "pct_copy": 100 * gbps / ceiling}
        print(f"{name:24s} {s * 1e3:8.3f} ms  {gbps:7.0f} GB/s  {100 * gbps / ceiling:5.1f}% of copy")
    variants = {}
    for block in ((128, 2), (64, 4), (256, 1)):
        for rows_per_thread in (1, 2, 4):
            for vector in (1, 2):
                for wide in (True, False):
                    run = backend.equation_pass(passes[0][0], sim.lattice, p.constants, block=block, rows=rows_per_thread,
                                                vector=vector, wide_index=wide)
                    for level in (arrays["u_next"], arrays["v_next"]):
                        level[sim.lattice.interior] = cp.nan
                    run(arrays, params, 0.0)
                    ok = bool(cp.isfinite(arrays["u_next"][sim.lattice.interior]).all())
                    s = timed(functools.partial(run, arrays, params, 0.0))
                    key = f"block {block[0]}x{block[1]} rows {rows_per_thread} vector {vector} {'64' if wide else '32'}-bit"
                    variants[key] = {"ms": s * 1e3, "pct_copy": 100 * nbytes / s / 1e9 / ceiling, "all_written": ok}
    result["kernel_variants"] = variants
    print(
        "kernel variants (% of copy), best 8: "
        + ", ".join(
            f"{k}: {v['pct_copy']:.1f}{'' if v['all_written'] else ' UNWRITTEN'}"
            for k, v in sorted(variants.items(), key=lambda kv: -kv[1]["pct_copy"])[:8]
        )
    )
    heat = heat3d()
    hsim = sf.Simulation(heat, backend)
    hbytes = heat.analysis.bytes_per_cell() * 512**3
    harr = hsim.arrays()
    hvar = {}
    for block in ((128, 2), (256, 1)):
        for rows_per_thread in (2, 4):
            for vector in (1, 2):
                for wide in (True, False):
                    run = backend.equation_pass(
                        hsim.passes[0][0], hsim.lattice, heat.constants, block=block, rows=rows_per_thread, vector=vector, wide_index=wide
                    )
                    s = timed(functools.partial(run, harr, hsim.params, 0.0))
                    key = f"block {block[0]}x{block[1]} rows {rows_per_thread} vector {vector} {'64' if wide else '32'}-bit"
                    hvar[key] = {"ms": s * 1e3, "pct_copy": 100 * hbytes / s / 1e9 / ceiling}
    hstep = timed(lambda: hsim.step())
    result["heat3d_512_float32"] = {"kernel_variants": hvar, "step_pct_copy": 100 * hbytes / hstep / 1e9 / ceiling}
    print(
        "heat3d 512^3 float32 (IR, Dirichlet walls) step: %.1f%% of copy; kernel variants: " % result["heat3d_512_float32"]["step_pct_copy"]
        + ", ".join(f"{k}: {v['pct_copy']:.1f}" for k, v in sorted(hvar.items(), key=lambda kv: -kv[1]["pct_copy"])[:6])
    )
    result.update(start_times())
    print(f"new problem, fresh process to first step: cold {result['cold_process_s']:.2f} s, warm {result['warm_process_s']:.2f} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
