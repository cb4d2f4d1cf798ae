"""A/B: threads and rows per thread of 2D float16 word passes (heat2d 16384^2), pass alone, CUDA events."""

from __future__ import annotations

import argparse
import json
import math

from equations_bench import copy_gbps, timed

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.problems import heat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    gbps = copy_gbps()
    backend = CudaBackend()
    out = {"copy_gbps": gbps, "rows": []}
    for storage in ("float32", "float16"):
        p = heat.problem(2, (16384, 16384), storage=storage)
        sim = sf.Simulation(p, backend)
        (pas,) = p.analysis.passes
        arrays, nbytes = sim.arrays(), p.analysis.bytes_per_cell()
        variants = ([dict(block=b, rows=r, words=True) for b in ((128, 2), (256, 1), (64, 4), (32, 8)) for r in (2, 4, 8)]
                    if storage == "float16" else [dict(rows=4)])
        for v in variants:
            run = backend.equation_pass(pas, sim.lattice, p.constants, **v)
            ms = timed(lambda run=run, arrays=arrays, params=sim.params: run(arrays, params, 0.0)) * 1e3
            pct = nbytes * math.prod(p.grid.shape) / (ms / 1e3) / 1e9 / gbps * 100
            out["rows"].append({"storage": storage, "variant": {k: list(x) if isinstance(x, tuple) else x for k, x in v.items()},
                                "ms": ms, "pct_copy": pct})
            print(storage, v, f"{ms:.4f} ms {pct:.1f}%", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
