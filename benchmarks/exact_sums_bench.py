"""Exact sums (`stencilforge.reductions`). On the host: NumPy's array code against the compiled loop, per array size,
median of repeats; and what loading the loop costs a fresh process (Numba's import, then its cached compile), which
the loop must earn back before `reductions.LOOP_VALUES` values make it the choice. With --device: the exact sum of
squares of a field's interior on the GPU (`squares_part`, CUDA events) against the time to read the same bytes
(a device copy of them, halved), per size and dtype.

usage: python benchmarks/exact_sums_bench.py [--repeats 5] [--device] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

LOAD = """
import time, numpy as np
t = time.perf_counter(); import numba; imported = time.perf_counter() - t
from stencilforge import reductions
t = time.perf_counter(); reductions.loop_bins(np.ones(4), False); print(imported, time.perf_counter() - t)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", action="store_true", help="time the GPU's exact sums instead")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.device:
        return device(args)
    from stencilforge.reductions import array_bins, loop_bins

    loop_bins(np.ones(4), False)  # loaded here before timing
    rng = np.random.default_rng(0)
    rows = []
    for exponent in range(14, 25, 2):
        v = rng.standard_normal(1 << exponent)
        times = {"array_ms": [], "loop_ms": []}
        for _ in range(args.repeats):
            for key, fn in (("array_ms", array_bins), ("loop_ms", loop_bins)):
                start = time.perf_counter()
                fn(v, True)
                times[key].append(1e3 * (time.perf_counter() - start))
        row = {"values": v.size, **{k: statistics.median(s) for k, s in times.items()}, "samples": times}
        rows.append(row)
        print(f"2^{exponent} values: array code {row['array_ms']:.2f} ms, loop {row['loop_ms']:.2f} ms")
    loads = [tuple(map(float, subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, check=True).stdout.split()))
             for _ in range(3)]
    print("fresh process: numba import " + ", ".join(f"{a:.2f}" for a, _ in loads) + " s; the loop's load " +
          ", ".join(f"{b:.2f}" for _, b in loads) + " s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "fresh_process_s": [{"numba_import": a, "loop_load": b} for a, b in loads]}, f, indent=1)


def device(args) -> None:
    import cupy as cp

    from stencilforge.reductions import squares_part

    def timed(fn, *operands) -> float:
        fn(*operands)
        times = []
        for _ in range(args.repeats):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fn(*operands)
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop))
        return statistics.median(times)

    rng = np.random.default_rng(0)
    rows = []
    for n, dtype in ((2048, "float64"), (4096, "float64"), (8192, "float32"), (16384, "float32"), (16384, "float64")):
        padded = cp.asarray(rng.standard_normal((n + 2, n + 2)).astype(dtype))
        interior = padded[1:-1, 1:-1]  # a field's interior: rows a padded row apart
        copy = cp.empty_like(padded)
        read_ms = timed(cp.copyto, copy, padded) / 2  # a copy reads and writes the bytes
        sum_ms = timed(squares_part, interior)
        row = {"shape": [n, n], "dtype": dtype, "squares_sum_ms": sum_ms, "read_ms": read_ms, "of_read": read_ms / sum_ms}
        rows.append(row)
        print(f"{n}^2 {dtype}: exact sum of squares {sum_ms:.3f} ms, reading the bytes {read_ms:.3f} ms "
              f"({100 * row['of_read']:.0f}% of the read rate)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
