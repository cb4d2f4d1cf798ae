"""A/B: 3D float16 passes, 4-byte words with planes or rows per thread against the 2-byte schedule (PASS_HALF),
heat3d 512^3 and a radius-8 wave at 512^3, pass alone, CUDA events."""

from __future__ import annotations

import argparse
import json
import math

from equations_bench import copy_gbps, timed
from half_storage_bench import wave

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.backends.cuda.tune import PASS_HALF
from stencilforge.problems import heat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    gbps = copy_gbps()
    backend = CudaBackend()
    out = {"copy_gbps": gbps, "rows": []}
    variants = [PASS_HALF[3]] + [dict(block=b, planes_per_thread=k, words=True) for b in ((32, 8), (64, 4), (128, 2)) for k in (2, 4)] \
        + [dict(block=b, rows=4, words=True) for b in ((32, 8), (64, 4))]
    for name, p in (("heat3d", heat.problem(3, (512, 512, 512), storage="float16")), ("wave3d", wave(512, "float16"))):
        sim = sf.Simulation(p, backend)
        (pas,) = p.analysis.passes
        arrays, nbytes = sim.arrays(), p.analysis.bytes_per_cell()
        for v in variants:
            run = backend.equation_pass(pas, sim.lattice, p.constants, **v)
            ms = timed(lambda run=run, arrays=arrays, params=sim.params: run(arrays, params, 0.0)) * 1e3
            pct = nbytes * math.prod(p.grid.shape) / (ms / 1e3) / 1e9 / gbps * 100
            out["rows"].append({"workload": name, "variant": {k: list(x) if isinstance(x, tuple) else x for k, x in v.items()},
                                "ms": ms, "pct_copy": pct})
            print(name, v, f"{ms:.4f} ms {pct:.1f}%", flush=True)
        del sim, arrays
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
