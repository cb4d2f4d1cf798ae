"""A/B: rows per thread of a 2D generated pass (float32), one field (heat) against two (Gray-Scott), at 4096^2
and 16384^2: is the measured best a matter of the field count or of the grid size? Pass kernel alone, CUDA
events; prints % of copy. --out FILE writes the JSON."""

from __future__ import annotations

import argparse
import json
import math

import cupy as cp
from equations_bench import problem as gray_scott
from half_storage_bench import copy_gbps, timed

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.problems import heat

CASES = {"heat2d": lambda n: heat.problem(2, (n, n)), "gray_scott": lambda n: gray_scott(n)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    gbps = copy_gbps()
    backend = CudaBackend()
    rows_out = []
    for name, build in CASES.items():
        for n in (4096, 16384):
            p = build(n)
            sim = sf.Simulation(p, backend)
            (pas,) = p.analysis.passes
            arrays, nbytes = sim.arrays(), p.analysis.bytes_per_cell()
            for block in ((128, 2), (256, 1)):
                for rows in (1, 2, 4, 8):
                    run = backend.equation_pass(pas, sim.lattice, p.constants, block=block, rows=rows)
                    ms = timed(lambda run=run, arrays=arrays, params=sim.params: run(arrays, params, 0.0)) * 1e3
                    pct = nbytes * math.prod(p.grid.shape) / (ms / 1e3) / 1e9 / gbps * 100
                    rows_out.append({"workload": name, "n": n, "block": list(block), "rows": rows, "ms": ms, "pct_copy": pct})
                    print(f"{name} {n} {block} rows {rows}: {ms:.4f} ms {pct:.1f}%", flush=True)
            cp.get_default_memory_pool().free_all_blocks()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"copy_gbps": gbps, "rows": rows_out}, f, indent=1)


if __name__ == "__main__":
    main()
