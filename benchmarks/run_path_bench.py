"""sf.run (and sf.solve for named problems) in one process on a GPU, per workload: GCell/s from the run's own
summary (median of repeats after a warm-up run that compiles and caches the kernels), the strategy or sweeps
that ran, and a digest of the final fields, with the device's copy bandwidth measured in the same process
(CUDA events).

Run it once per source tree to compare two commits side by side on one machine:

    PYTHONPATH=src python benchmarks/run_path_bench.py --label new > new.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import runpy
import statistics
from pathlib import Path

import stencilforge as sf
from stencilforge.problems import heat, wave3d

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example(name: str, shape, dtype: str = "float64"):
    return lambda: runpy.run_path(str(EXAMPLES / f"{name}.py"))["build"](shape=shape, dtype=dtype)


WORKLOADS = {  # name -> (problem builder, steps)
    "heat2d 8192^2 f32": (lambda: heat.problem(2, (8192, 8192), "float32"), 1000),
    "heat3d 512^3 f32": (lambda: heat.problem(3, (512, 512, 512), "float32"), 200),
    "wave3d r8 512^3 f32": (lambda: wave3d.problem((512, 512, 512), "float32", radius=8)[0], 100),
    "heat9 8192^2 f64": (example("heat9", (8192, 8192)), 500),
    "wave2d_sponge 8192^2 f64": (example("wave2d_sponge", (8192, 8192)), 500),
    "gray_scott 4096^2 f64": (example("gray_scott", (4096, 4096)), 1000),
}
SOLVED = {  # name -> (sf.solve's arguments, steps): the named problems as sf.solve runs them, in any tree
    "derivatives x 10000^2 f64": (dict(problem="derivatives", shape=(10000, 10000), axis=1), 50),
    "derivatives y 10000^2 f64 acc4": (dict(problem="derivatives", shape=(10000, 10000), axis=0, accuracy=4), 50),
    "poisson3d 256^3 multigrid": (dict(problem="poisson3d", shape=(256, 256, 256), tol=1e-10), None),
}


def copy_gbps(repeats: int = 20) -> float:
    """Device-to-device copy of 1 GiB, read plus write bytes over the median CUDA-event time."""
    import cupy as cp

    a = cp.ones(2**27, dtype=cp.float64)
    b = cp.empty_like(a)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(repeats):
        start.record()
        b[...] = a
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return 2 * a.nbytes / statistics.median(times) / 1e9


def digest(fields) -> str:
    import cupy as cp

    h = hashlib.sha256()
    for name in sorted(fields):
        h.update(cp.asnumpy(fields[name]).tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    rows = {}
    for name, (build, steps) in WORKLOADS.items():
        if args.only and not any(o in name for o in args.only):
            continue
        problem = build()
        runs = [sf.run(problem, steps=steps, backend="cuda", check_every=steps) for _ in range(args.repeats + 1)]
        s = runs[-1].summary
        rows[name] = {
            "steps": steps,
            "gcells_per_s": statistics.median(r.summary["gcells_per_s"] for r in runs[1:]),
            "teff_gbps": statistics.median(r.summary["teff_gbps"] for r in runs[1:]),
            "bytes_per_cell": s["bytes_per_cell"],
            "ran": s.get("sweeps", s.get("strategy")),
            "steps_per_pass": s.get("steps_per_pass"),
            "digest": digest(runs[-1].fields),
        }
    for name, (kwargs, steps) in SOLVED.items():
        if args.only and not any(o in name for o in args.only):
            continue
        runs = [sf.solve(**kwargs, steps=steps, backend="cuda") for _ in range(args.repeats + 1)]
        s = runs[-1].summary
        rows[name] = {
            "steps": s["steps"],
            "gcells_per_s": statistics.median(r.summary["gcells_per_s"] for r in runs[1:]),
            "wall_s": statistics.median(r.summary["wall_s"] for r in runs[1:]),
            "ran": s.get("sweeps", s.get("strategy")),
            "digest": digest(runs[-1].fields),
        }
    print(json.dumps({"label": args.label, "copy_gbps": copy_gbps(), "workloads": rows}))


if __name__ == "__main__":
    main()
