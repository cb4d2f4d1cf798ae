"""A/B of generated-pass schedules for float16 and float32 storage: the pass kernel alone, CUDA events.

Variants: threads per block, rows per thread, columns per thread (a block's width apart), and in 3D
planes per thread. Prints ms and % of copy at each storage's bytes; --out FILE writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import math

import cupy as cp
from half_storage_bench import copy_gbps, timed, wave

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.problems import heat

CASES = {"heat2d": (lambda st: heat.problem(2, (16384, 16384), storage=st)),
         "heat3d": (lambda st: heat.problem(3, (512, 512, 512), storage=st)),
         "wave3d": (lambda st: wave(512, st))}
VARIANTS = {
    2: [dict(block=b, rows=r, vector=v) for b in ((128, 2), (256, 1), (64, 4), (32, 8)) for r in (1, 2, 4, 8) for v in (1, 2, 4)],
    3: [dict(block=b, rows=r, vector=v) for b in ((128, 2), (32, 8), (64, 4)) for r in (1, 2, 4) for v in (1, 2)]
    + [dict(block=b, planes_per_thread=k, vector=v) for b in ((32, 8), (64, 4), (128, 2)) for k in (1, 2, 4) for v in (1, 2)],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--only", nargs="*", default=list(CASES))
    args = ap.parse_args()
    gbps = copy_gbps()
    backend = CudaBackend()
    report = {"copy_gbps": gbps, "rows": []}
    for name in args.only:
        for storage in ("float32", "float16"):
            p = CASES[name](storage)
            sim = sf.Simulation(p, backend)
            (pas,) = p.analysis.passes
            arrays = sim.arrays()
            cells, nbytes = math.prod(p.grid.shape), p.analysis.bytes_per_cell()
            for v in VARIANTS[p.grid.ndim]:
                run = backend.equation_pass(pas, sim.lattice, p.constants, **v)
                ms = timed(lambda run=run, arrays=arrays, params=sim.params: run(arrays, params, 0.0)) * 1e3
                pct = nbytes * cells / (ms / 1e3) / 1e9 / gbps * 100
                variant = {k: list(x) if isinstance(x, tuple) else x for k, x in v.items()}
                report["rows"].append({"workload": name, "storage": storage, "variant": variant, "ms": ms, "pct_copy": pct})
                print(f"{name} {storage} {v} {ms:.3f} ms {pct:.1f}%", flush=True)
            cp.get_default_memory_pool().free_all_blocks()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    print("\nbest per workload and storage:")
    for name in args.only:
        for storage in ("float32", "float16"):
            rows = [r for r in report["rows"] if r["workload"] == name and r["storage"] == storage]
            best = min(rows, key=lambda r: r["ms"])
            default = rows[0]
            print(f"{name} {storage}: best {best['ms']:.3f} ms {best['pct_copy']:.1f}% {best['variant']}; first {default['ms']:.3f}")


if __name__ == "__main__":
    main()
