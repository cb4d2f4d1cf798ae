"""Experiment (kept in the commit that used it, then removed): Gray-Scott 4096^2 float32 whole step with the
passes writing ghost images against a gather after them, and kernel variants of the generated pass, each
checked bitwise against the baseline kernel. CUDA events, median of 15 repeats of 10 launches."""

from __future__ import annotations

import json
import statistics
import sys

import cupy as cp
import numpy as np

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.backends.cuda.compile import options
from stencilforge.printers import cuda as printer

sys.path.insert(0, "benchmarks")
from equations_bench import problem  # noqa: E402

N = 4096


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


def copy_gbps(nbytes) -> float:
    src = cp.random.random(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    return 2 * nbytes / timed(lambda: cp.copyto(dst, src)) / 1e9


class Gather(CudaBackend):
    writes_ghost_images = False


def main():  # noqa: C901 (an experiment script, removed after its commit)
    out = sys.argv[1]
    backend = CudaBackend()
    result = {"device": backend.device_name, "copy_gbps_2GiB": copy_gbps(2 << 30), "copy_gbps_128MiB": copy_gbps(128 << 20)}
    ceiling = result["copy_gbps_2GiB"]
    p = problem()
    nbytes = p.analysis.bytes_per_cell() * N * N
    steps = {}
    for name, b in (("gather", Gather()), ("images", backend)):
        sim = sf.Simulation(p, b)
        steps[name] = timed(lambda sim=sim: sim.step())
    sims = {name: sf.Simulation(p, b) for name, b in (("gather", Gather()), ("images", backend))}
    for sim in sims.values():
        sim.step(5)
    g = sims["gather"]
    for name in ("u", "v"):  # the gather leaves the last step's ghosts stale; the passes wrote them
        g._fill(name, g._slot((name, 0)), g.t)
    same = all(bool((g.arrays()[k] == sims["images"].arrays()[k]).all()) for k in g.arrays())
    result["step"] = {k: {"ms": s * 1e3, "pct_copy": 100 * nbytes / s / 1e9 / ceiling} for k, s in steps.items()}
    result["step_bitwise_equal_ghosts_included"] = same

    sim = sf.Simulation(p, backend)
    sim.step(2)
    arrays, lat = sim.arrays(), sim.lattice
    (pss, _), = sim.passes
    base_src, names = printer.pass_source(pss, 2, "float32", p.constants, rows=2, wide_index=False)
    img_src, _ = printer.pass_source(pss, 2, "float32", p.constants, rows=2, wide_index=False,
                                     images={"u_next": ("Periodic", "Periodic"), "v_next": ("Periodic", "Periodic")})
    T = np.float32
    geometry = []
    for a in range(2):
        geometry += [np.float64(lat.lower[a]), np.float64(lat.spacing[a]), np.int64(lat.shape[a])]
    args = [arrays[n] for n in names] + [T(sim.params[c.name]) for c in p.constants] + [T(0.0)] + geometry + [np.int32(lat.ghost)]

    variants = {"baseline 128x2": (base_src, (128, 2), None), "images 128x2": (img_src, (128, 2), None)}
    ref = None
    rows = {}
    for key, (src, block, gy) in variants.items():
        fn = cp.RawKernel(src, "sf_pass", options=options(backend.arch, printer.OPTIONS)[1:])
        grid, threads = printer.launch_grid(lat.shape, block, 2)
        if gy is not None:
            grid = (grid[0], gy, 1)
        for n in ("u_next", "v_next"):
            arrays[n][lat.interior] = cp.nan
        fn(grid, threads, tuple(args))
        outs = [cp.asnumpy(arrays[n][lat.interior]) for n in ("u_next", "v_next")]
        if ref is None:
            ref = outs
        equal = all(np.array_equal(a, b) for a, b in zip(outs, ref))
        s = timed(lambda fn=fn, grid=grid, threads=threads: fn(grid, threads, tuple(args)))
        rows[key] = {"ms": s * 1e3, "pct_copy": 100 * nbytes / s / 1e9 / ceiling, "bitwise_equal": equal,
                     "regs": fn.num_regs}
    result["kernels"] = rows
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{result['device']}: copy 2GiB {ceiling:.0f} GB/s, 128MiB {result['copy_gbps_128MiB']:.0f} GB/s")
    for k, v in result["step"].items():
        print(f"step {k:10s} {v['ms']:.4f} ms {v['pct_copy']:.1f}%")
    print("step bitwise equal, ghosts included:", same)
    for k, v in rows.items():
        print(f"{k:32s} {v['ms']:.4f} ms {v['pct_copy']:5.1f}% eq={v['bitwise_equal']} regs={v['regs']}")


if __name__ == "__main__":
    main()
