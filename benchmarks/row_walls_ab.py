"""One-off: what a step's walls cost on the CPU, kernels writing x and y walls (Launch.walls) against the
fill of every face apart from the kernel. heat3d 256^3 and wave3d r8 192^3, float32, numba, median of
repeats, alternating within each round. Usage: python benchmarks/row_walls_ab.py OUT.json"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends.numba_cpu import NumbaBackend
from stencilforge.boundary import bind


def timed(fn, calls=10) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def measure(name: str, shape, rounds: int = 15) -> dict:
    setup = problems.build(name, shape=shape, dtype="float32")
    sweep, grid = setup.sweep, setup.grid
    (u,) = sweep.stencil_inputs
    be = NumbaBackend()
    rows = setup.boundaries[u].row_walls(grid, be.wall_scaler)
    whole = bind(setup.boundaries[u], grid, be)
    launch = be.sweep(sweep, grid)
    fields = {k: v.copy() for k, v in setup.fields.items()}
    walls = rows.at(0.1)
    paths = {
        "kernel, no walls": lambda: launch(fields),
        "kernel writing x and y walls": lambda: launch(fields, walls),
        "z planes filled apart (rest)": lambda: rows.rest(fields[u], 0.1),
        "every face filled apart (before)": lambda: whole(fields[u], 0.1),
    }
    for fn in paths.values():  # compiles, the walls' writer in the background included
        fn()
    time.sleep(5)
    for fn in paths.values():
        fn()
    samples: dict[str, list[float]] = {k: [] for k in paths}
    for _ in range(rounds):
        for key, fn in paths.items():
            samples[key].append(timed(fn))
    return {k: {"median_ms": statistics.median(v), "min_ms": min(v)} for k, v in samples.items()}


if __name__ == "__main__":
    out = {"cases": {f"{n} {'x'.join(map(str, s))} float32": measure(n, s) for n, s in (("heat3d", (256,) * 3), ("wave3d", (192,) * 3))}}
    import numba
    out["numba_threads"] = numba.get_num_threads()
    out["note"] = "times per call, ms; 'before' is what the loop ran per step before the kernels wrote walls"
    json.dump(out, open(sys.argv[1], "w"), indent=1)
    for case, rows in out["cases"].items():
        print(case)
        for key, v in rows.items():
            print(f"  {key:36s} median {v['median_ms']:.3f}  min {v['min_ms']:.3f}")
