"""Numba's 2D two-step kernel at several block heights (PAIR_BLOCK: output rows per task): ms per step of jacobi2d,
heat2d and poisson2d 4096² float32 in interleaved rounds, each block first checked bit for bit against two single
steps, the single step alongside. Usage: python benchmarks/cpu_pair_block.py OUT.json"""

from __future__ import annotations

import json
import sys
import time

import numba
import numpy as np

from stencilforge.backends import numba_cpu
from stencilforge.backends.base import with_walls
from stencilforge.backends.numba_cpu import NumbaBackend
from stencilforge.bench.workloads import Workload, build_case

BLOCKS = (8, 16, 32, 64, 128)


def main() -> None:
    be = NumbaBackend()
    report: dict = {"cpu": next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), None),
                    "numba_threads": numba.get_num_threads(), "note": "ms per step, 9 interleaved rounds of 12 steps; block 0 is "
                    "the single-step kernel", "workloads": {}}
    for name in ("jacobi2d", "heat2d", "poisson2d"):
        case = build_case(Workload(name, (4096, 4096), "float32"))
        a, b = case.swap
        base = {k: be.field(v.copy(), case.grid.ghost) for k, v in case.fields.items()}
        single = be.sweep(case.plan, case.grid)
        ref = {k: v.copy() for k, v in base.items()}
        for _ in range(2):
            single(ref)
            ref[a], ref[b] = ref[b], ref[a]
        kernels = {0: single}
        for block in BLOCKS:
            numba_cpu.PAIR_BLOCK = block
            kernels[block] = be.sweep_fused(case.plan, case.grid)
            kernels[block].wait()
            got = {k: v.copy() for k, v in base.items()}
            kernels[block](with_walls(got, case.plan, 2))
            assert np.array_equal(got[b], ref[a]), f"{name}: block {block} differs from two single steps"
        fields = {block: {k: v.copy() for k, v in base.items()} for block in kernels}
        times: dict[int, list[float]] = {block: [] for block in kernels}
        for _ in range(9):
            for block, kernel in kernels.items():
                f = fields[block]
                t0 = time.perf_counter()
                for _ in range(12 if block == 0 else 6):
                    kernel(f if block == 0 else with_walls(f, case.plan, 2))
                    f[a], f[b] = f[b], f[a]
                times[block].append((time.perf_counter() - t0) / 12 * 1e3)
        report["workloads"][name] = {str(k): {"median_ms": float(np.median(v)), "min_ms": float(min(v))} for k, v in times.items()}
        for k, v in report["workloads"][name].items():
            print(f"{name} block {k:>3}: median {v['median_ms']:.3f} ms/step, min {v['min_ms']:.3f}")
    with open(sys.argv[1], "w") as fh:
        json.dump(report, fh, indent=1)


if __name__ == "__main__":
    main()
