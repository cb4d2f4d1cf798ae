"""What a GPU time loop does beside its kernels, piece by piece, for the bench's time-loop workloads: a step's passes
alone, a whole single step, the wall fill before a step, the finite test (CuPy's array code against the backend's),
a fused pass with and without its wall fills, and the residual check with its scale computed or held. Device time
from CUDA events, ms a call, median of repeats of back-to-back calls (a call that is host-bound reports its host time).

usage: python benchmarks/loop_pieces.py [--repeats 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics

WORKLOADS = (("heat2d", (16384, 16384)), ("heat3d", (512, 512, 512)), ("poisson2d", (16384, 16384)), ("gray_scott", (4096, 4096)))


def timed(cp, fn, repeats: int, calls: int = 10) -> float:
    out = []
    for _ in range(repeats):
        fn()
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b) / calls)
    return statistics.median(out)


def pieces(name: str, shape, repeats: int) -> dict:
    import cupy as cp

    from stencilforge import problems
    from stencilforge.backends.cuda import CudaBackend
    from stencilforge.bench.loop import gray_scott
    from stencilforge.simulation import Simulation

    problem = gray_scott(shape) if name == "gray_scott" else problems.problem(name, shape, "float32")[0]
    backend = CudaBackend()
    sim = Simulation(problem, backend)
    sim.build_fused()
    if sim.fused is not None:
        sim.fused.wait()
    sim.step(1)
    arrays, params, interior = sim.arrays(), sim.params, sim.lattice.interior

    def views():
        return [sim._slot((n, 0))[interior] for n in problem.analysis.written]

    row = {"passes": timed(cp, lambda: [run(arrays, params, 0.0) for _, run in sim.passes], repeats),
           "single_step": timed(cp, lambda: sim.step(1), repeats),
           "fill_before": timed(cp, lambda: sim._fill_before(sim.t), repeats),
           "finite_cupy": timed(cp, lambda: all(bool(cp.isfinite(v).all()) for v in views()), repeats),
           "finite_backend": timed(cp, lambda: backend.all_finite(views()), repeats)}
    if sim.fused is not None:
        k = sim.fused.steps
        times = [s * sim.dt for s in range(k)]
        row.update(fused_steps=k, fused_kernel_per_step=timed(cp, lambda: sim.fused(sim.arrays(), times), repeats) / k,
                   fused_pass_per_step=timed(cp, sim.step_fused, repeats) / k)
    if problem.residual is not None:
        scale = sim.steady_scale()
        row.update(residual=timed(cp, sim.residual, repeats, 3), residual_scale_held=timed(cp, lambda: sim.residual(scale), repeats, 3))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    import cupy as cp

    rows = {}
    for name, shape in WORKLOADS:
        rows[name] = pieces(name, shape, args.repeats)
        cp.get_default_memory_pool().free_all_blocks()
        print(f"{name:10s} " + "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in rows[name].items()), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
