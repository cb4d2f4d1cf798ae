"""Host exact sums (`stencilforge.reductions`): NumPy's array code against the compiled loop, per array size, median of
repeats; and what loading the loop costs a fresh process (Numba's import, then its cached compile), which the loop
must earn back before `reductions.LOOP_VALUES` values make it the choice.

usage: python benchmarks/exact_sums_bench.py [--repeats 5] [--json OUT]
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
    parser.add_argument("--json")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
