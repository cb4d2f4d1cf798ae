"""Experiment (kept in the commit that used it, then removed): 3D generated passes marching along z
against one thread per cell. heat3d 512^3 float32 (the equation API's, static Dirichlet walls) and a
3D Gray-Scott (periodic, two fields) at 256^3 and 512^3 float32; % of the 2 GiB copy, each variant
checked bitwise against the one-thread-per-cell pass. CUDA events, median of 15 repeats of 10 launches."""

from __future__ import annotations

import json
import sys

import cupy as cp
import numpy as np

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.printers import cuda_march

sys.path.insert(0, "benchmarks")
from equations_bench import copy_gbps, heat3d, timed  # noqa: E402


def gray_scott3d(n):
    grid = sf.Grid((n, n, n), spacing=1.0, dtype="float32")
    u, v = sf.Field("u", grid), sf.Field("v", grid)
    uvv = u * v * v
    return sf.Problem([sf.Eq(u.next, u + 0.16 * sf.laplacian(u) - uvv + 0.035 * (1 - u)),
                       sf.Eq(v.next, v + 0.08 * sf.laplacian(v) + uvv - 0.1 * v)],
                      initial={u: 1 - 0.5 * sf.sin(0.1 * grid.x) * sf.cos(0.1 * grid.y), v: 0.25 + 0.1 * sf.sin(0.05 * grid.z)},
                      boundary={u: sf.Periodic(), v: sf.Periodic()}, dt=1.0)


def study(p, backend, ceiling):
    nbytes = p.analysis.bytes_per_cell() * int(np.prod(p.grid.shape))
    sim = sf.Simulation(p, backend)
    sim.step(1)
    arrays, lat = sim.arrays(), sim.lattice
    (pss,) = p.analysis.passes
    outs = [slot for slot in arrays if slot.endswith("_next")]
    rows, want = {}, None
    variants = [("cells", {}), *[("march", {"block": b, "planes": z}) for b in ((32, 8), (64, 4), (128, 2), (32, 4), (64, 8))
                                 for z in (16, 32, 64)]]
    for schedule, kw in variants:
        if schedule == "cells":
            run = backend.equation_pass(pss, lat, p.constants, schedule="cells")
        else:
            src, names = cuda_march.march_source(pss, lat.dtype, p.constants, wide_index=False, **kw)
            fn = backend._generated(src, "march experiment", "sf_pass", cuda_march.OPTIONS)
            grid, block = cuda_march.launch_grid(lat.shape, kw["block"], kw["planes"])
            geometry = []
            for a in range(3):
                geometry += [np.float64(lat.lower[a]), np.float64(lat.spacing[a]), np.int64(lat.shape[a])]
            tail = [np.float32(0.0)] + geometry + [np.int32(lat.ghost)]
            consts = [np.float32(sim.params[c.name]) for c in p.constants]

            def run(arrays, params, t, fn=fn, grid=grid, block=block, names=names, tail=tail, consts=consts):
                fn(grid, block, tuple([arrays[n] for n in names] + consts + tail))
        for o in outs:
            arrays[o][lat.interior] = cp.nan
        run(arrays, sim.params, 0.0)
        got = [cp.asnumpy(arrays[o]) for o in outs]
        want = got if want is None else want
        same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want))
        s = timed(lambda run=run: run(arrays, sim.params, 0.0))
        rows[f"{schedule} {kw}"] = {"pct_copy": 100 * nbytes / s / 1e9 / ceiling, "bitwise_as_cells": same}
    return rows


def main():
    backend = CudaBackend()
    ceiling = copy_gbps()
    out = {"device": backend.device_name, "copy_gbps": ceiling}
    for name, p in (("heat3d 512^3 float32", heat3d()), ("gray_scott3d 256^3 float32", gray_scott3d(256)),
                    ("gray_scott3d 512^3 float32", gray_scott3d(512))):
        out[name] = study(p, backend, ceiling)
        cells = out[name]["cells {}"]["pct_copy"]
        print(f"{name}: cells {cells:.1f}%")
        for k, v in sorted(out[name].items(), key=lambda kv: -kv[1]["pct_copy"])[:5]:
            print(f"  {k:50s} {v['pct_copy']:6.1f}% {v['bitwise_as_cells']}")
    json.dump(out, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
