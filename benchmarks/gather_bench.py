"""Numba's ghost-cell gather (`copy_cells`) on one thread against its parallel loop, per number of ghost cells: the
basis of `backends.numba.backend.SERIAL_GATHER`. Median of repeats of 2000 calls, µs a call.

usage: python benchmarks/gather_bench.py [--repeats 7] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from stencilforge.backends.numba.backend import GATHER_CELLS, GATHER_CELLS_SERIAL, load_kernel

CALLS = 2000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json")
    args = parser.parse_args()
    kernels = {"parallel": load_kernel(GATHER_CELLS), "serial": load_kernel(GATHER_CELLS_SERIAL)}
    rows = []
    for cells in (256, 1024, 4096, 8192, 16384, 65536):
        flat = np.zeros(4 * cells + 64, np.float32)
        dst = np.arange(cells, dtype=np.int64) * 2
        src = dst + 1
        row = {"cells": cells}
        for name, kernel in kernels.items():
            kernel(flat, dst, src)
            samples = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                for _ in range(CALLS):
                    kernel(flat, dst, src)
                samples.append((time.perf_counter() - start) / CALLS * 1e6)
            row[f"{name}_us"] = statistics.median(samples)
        rows.append(row)
        print(f"{cells:6d} cells: parallel {row['parallel_us']:.2f} us, serial {row['serial_us']:.2f} us", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"calls": CALLS, "repeats": args.repeats, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
