"""One-off: the time loop's gather of periodic ghost cells on Numba, NumPy's indexing against the backend's
parallel kernel, measured inside `sf.run` of Gray-Scott 2048² (one call per step, both fields), in alternating
runs of 200 steps. Usage: python benchmarks/gather_in_loop.py OUT.json
"""

import json
import statistics
import sys
import time

import numpy as np

import stencilforge as sf
from stencilforge.backends.numba_cpu import NumbaBackend
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.bench.loop import gray_scott


def main(out_path: str) -> None:
    problem = gray_scott((2048, 2048))
    kernel_copy = NumbaBackend.copy_cells
    calls: list[float] = []

    def timed(copy):
        def run(self, arrays, dst, src):
            t0 = time.perf_counter()
            copy(self, arrays, dst, src) if copy is kernel_copy else copy(arrays, dst, src)
            calls.append(time.perf_counter() - t0)
        return run

    variants = {"numpy indexing": timed(NumpyBackend.copy_cells), "numba parallel kernel": timed(kernel_copy)}
    for copy in variants.values():  # compiles, and waits for the gather's compile
        NumbaBackend.copy_cells = copy
        sf.run(problem, steps=200, backend="numba")
    rows: dict[str, dict[str, list[float]]] = {k: {"gather_ms": [], "loop_ms_per_step": []} for k in variants}
    for _ in range(7):
        for name, copy in variants.items():
            NumbaBackend.copy_cells = copy
            calls.clear()
            s = sf.run(problem, steps=200, backend="numba").summary
            rows[name]["gather_ms"].append(float(np.median(calls)) * 1e3)
            rows[name]["loop_ms_per_step"].append(s["wall_s"] / s["steps"] * 1e3)
    result = {"workload": "gray_scott 2048^2 float32, periodic walls, sf.run of 200 steps, numba", "rows": rows,
              "medians": {k: {m: statistics.median(v) for m, v in r.items()} for k, r in rows.items()}}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    for k, r in result["medians"].items():
        print(f"{k:24s} gather {r['gather_ms']:.4f} ms a step, loop {r['loop_ms_per_step']:.3f} ms a step")


if __name__ == "__main__":
    main(sys.argv[1])
