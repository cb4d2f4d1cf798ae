"""Experiment (kept in the commit that used it, then removed): 3D generated passes with each thread computing
consecutive planes (z) of its cell instead of consecutive rows (y). heat3d 512^3 float32 (static Dirichlet)
and a 3D Gray-Scott (periodic, two fields) at 256^3 and 512^3 float32; % of the 2 GiB copy, each variant
checked bitwise against today's schedule. CUDA events, median of 15 repeats of 10 launches."""

from __future__ import annotations

import json
import sys

import cupy as cp
import numpy as np

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.printers import cuda as printer

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
    images = {o: sim._images[(o[:-5], 1)] for o in outs if (o[:-5], 1) in sim._images}
    variants = [("rows 4 along y, block (128, 2)", dict(block=(128, 2)))]
    variants += [(f"planes {z}, block {b}, vector {v}", dict(block=b, planes_per_thread=z, vector=v))
                 for z in (2, 4, 8) for b in ((128, 2), (64, 4), (32, 8), (256, 1), (128, 4)) for v in (1, 2)]
    rows, want = {}, None
    consts = [np.float32(sim.params[c.name]) for c in p.constants]
    geometry = []
    for a in range(3):
        geometry += [np.float64(lat.lower[a]), np.float64(lat.spacing[a]), np.int64(lat.shape[a])]
    for key, kw in variants:
        block = kw.pop("block")
        src, names = printer.pass_source(pss, 3, "float32", p.constants, wide_index=False, images=images or None, **kw)
        fn = backend._generated(src, "planes experiment", "sf_pass", printer.OPTIONS)
        grid, threads = printer.launch_grid(lat.shape, block, None, kw.get("vector", 1), kw.get("planes_per_thread"))
        args = tuple([arrays[n] for n in names] + consts + [np.float32(0.0)] + geometry + [np.int32(lat.ghost)])
        for o in outs:
            arrays[o][...] = cp.nan
        fn(grid, threads, args)
        got = [cp.asnumpy(arrays[o]) for o in outs]
        want = got if want is None else want
        same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, want))
        s = timed(lambda fn=fn, grid=grid, threads=threads, args=args: fn(grid, threads, args))
        rows[key] = {"pct_copy": 100 * nbytes / s / 1e9 / ceiling, "bitwise_as_rows": same}
    return rows


def main():
    backend = CudaBackend()
    ceiling = copy_gbps()
    out = {"device": backend.device_name, "copy_gbps": ceiling}
    for name, p in (("heat3d 512^3 float32", heat3d()), ("gray_scott3d 256^3 float32", gray_scott3d(256)),
                    ("gray_scott3d 512^3 float32", gray_scott3d(512))):
        out[name] = study(p, backend, ceiling)
        base = out[name]["rows 4 along y, block (128, 2)"]["pct_copy"]
        print(f"{name}: rows along y {base:.1f}%")
        for k, v in sorted(out[name].items(), key=lambda kv: -kv[1]["pct_copy"])[:6]:
            print(f"  {k:40s} {v['pct_copy']:6.1f}% {v['bitwise_as_rows']}")
    json.dump(out, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
