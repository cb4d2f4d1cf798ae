"""Experiment (kept in the commit that used it, then removed): two steps per pass for 3D generated passes.
heat3d 512^3 float32 (static Dirichlet walls) and a 3D Gray-Scott 256^3 float32 (periodic), one step per
pass against two, and tiles of the two-step kernel; % of the 2 GiB copy per step, each pair checked
bitwise against two single steps. CUDA events, median of 15 repeats of 10 launches."""

from __future__ import annotations

import json
import sys

import cupy as cp
import numpy as np

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.printers import cuda_pair

sys.path.insert(0, "benchmarks")
from equations_bench import copy_gbps, heat3d, timed  # noqa: E402


def gray_scott3d(n=256):
    grid = sf.Grid((n, n, n), spacing=1.0, dtype="float32")
    u, v = sf.Field("u", grid), sf.Field("v", grid)
    uvv = u * v * v
    return sf.Problem([sf.Eq(u.next, u + 0.16 * sf.laplacian(u) - uvv + 0.035 * (1 - u)),
                       sf.Eq(v.next, v + 0.08 * sf.laplacian(v) + uvv - 0.1 * v)],
                      initial={u: 1 - 0.5 * sf.sin(0.1 * grid.x) * sf.cos(0.1 * grid.y), v: 0.25 + 0.1 * sf.sin(0.05 * grid.z)},
                      boundary={u: sf.Periodic(), v: sf.Periodic()}, dt=1.0)


def study(name, p, backend, ceiling, tiles):
    n = p.grid.shape
    nbytes = p.analysis.bytes_per_cell() * int(np.prod(n))
    sim, ref = sf.Simulation(p, backend), sf.Simulation(p, backend)
    ref.step(2)
    want = {f: cp.asnumpy(ref.fields[f]) for f in p.analysis.written}
    single = timed(lambda: sim.step())
    rows = {"one step per pass": {"pct_copy": 100 * nbytes / single / 1e9 / ceiling}}
    plan = sim.pair_plan()
    (pss,) = p.analysis.passes
    images = {f"{f}_next": plan[0] for f in p.analysis.written} if plan[0] is not None else None
    lat = sim.lattice
    for tile in tiles:
        for threads in (256, 512):
            fresh = sf.Simulation(p, backend)
            fresh._fill_before(0.0)
            arrays = fresh.arrays()
            src, names = cuda_pair.pair3_source(pss, "float32", p.constants, plan[0], plan[1], tile=tile, threads=threads, images=images)
            fn = backend._generated(src, "pair experiment", "sf_pair", cuda_pair.OPTIONS)
            grid, block = cuda_pair.launch_grid(lat.shape, tile, threads)
            geometry = []
            for a in range(3):
                geometry += [np.float64(lat.lower[a]), np.float64(lat.spacing[a]), np.int32(lat.shape[a])]
            args = tuple([arrays[k] for k in names] + [np.float32(fresh.params[c.name]) for c in p.constants]
                         + [np.float32(0.0), np.float32(fresh.dt)] + geometry + [np.int32(lat.ghost)])
            fn(grid, block, args)
            same = all(np.array_equal(cp.asnumpy(arrays[f"{f}_next"][lat.interior]), w) for f, w in want.items())
            s = timed(lambda fn=fn, grid=grid, block=block, args=args: fn(grid, block, args)) / 2
            rows[f"two steps, tile {tile} threads {threads}"] = {"pct_copy": 100 * nbytes / s / 1e9 / ceiling, "bitwise_two_steps": same}
    return rows


def main():
    backend = CudaBackend()
    ceiling = copy_gbps()
    tiles = [(32, 16, 64), (16, 16, 64), (64, 16, 64), (32, 8, 64), (32, 16, 32), (32, 8, 128), (64, 8, 64)]
    out = {"device": backend.device_name, "copy_gbps": ceiling,
           "heat3d 512^3 float32": study("heat3d", heat3d(), backend, ceiling, tiles),
           "gray_scott3d 256^3 float32": study("gs3d", gray_scott3d(), backend, ceiling, tiles)}
    json.dump(out, open(sys.argv[1], "w"), indent=1)
    for key in ("heat3d 512^3 float32", "gray_scott3d 256^3 float32"):
        print(key)
        for k, v in sorted(out[key].items(), key=lambda kv: -kv[1]["pct_copy"])[:6]:
            print(f"  {k:40s} {v['pct_copy']:6.1f}% {v.get('bitwise_two_steps', '')}")


if __name__ == "__main__":
    main()
