"""A/B of the initial values on the device, each mode in a fresh process: CuPy array operations in float64
(the path before the generated kernel) against `tabulated`'s kernel. heat3d's exact solution at 512³ float32
with ghost cells; times the first call (kernel loads included) and a second one, and the memory pool's peak.

    python3 benchmarks/init_ab.py ops|kernel
"""

from __future__ import annotations

import json
import sys
import time

import cupy as cp
import numpy as np

from stencilforge.grid import Grid
from stencilforge.printers.numpy import evaluate, float64_coordinates
from stencilforge.problems import heat
from stencilforge.simulation import tabulated


def main(mode: str) -> None:
    cp.zeros(1)
    cp.cuda.Device().synchronize()
    problem = heat.problem(3, (512, 512, 512))
    expr = problem.exact[next(iter(problem.exact))]
    lattice = Grid((512,) * 3, (1 / 513,) * 3, np.dtype("float32"), 1, (1 / 513,) * 3)
    pool = cp.get_default_memory_pool()

    def ops():
        coordinate = float64_coordinates(lattice, cp, ghosts=True)
        value = evaluate(expr, dtype=np.float64, xp=cp, coordinate=coordinate, params={"alpha": 1.0}, t=0.0)
        out = cp.zeros(lattice.padded_shape, dtype=np.float32)
        out[...] = value
        return out

    def kernel():
        return tabulated(expr, lattice, np.float32, {"alpha": 1.0}, 0.0, cp, ghosts=True)

    fn = {"ops": ops, "kernel": kernel}[mode]
    times = []
    for _ in range(2):
        start = time.perf_counter()
        out = fn()
        cp.cuda.Device().synchronize()
        times.append(time.perf_counter() - start)
        del out
    print(json.dumps({"mode": mode, "first_s": times[0], "second_s": times[1], "pool_peak_bytes": pool.total_bytes()}))


if __name__ == "__main__":
    main(sys.argv[1])
