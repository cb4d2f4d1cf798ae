"""Experiment (kept in the commit that used it, then removed): tiles and block sizes of the two-step
Gray-Scott kernel at 4096^2 float32, % of the 2 GiB copy per step, each checked bitwise against two
single steps. CUDA events, median of 15 repeats of 10 launches."""

from __future__ import annotations

import json
import sys

import cupy as cp
import numpy as np

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.printers import cuda_pair

sys.path.insert(0, "benchmarks")
from equations_bench import copy_gbps, problem, timed  # noqa: E402


def main():
    backend = CudaBackend()
    ceiling = copy_gbps()
    p = problem()
    sim, ref = sf.Simulation(p, backend), sf.Simulation(p, backend)
    ref.step(2)
    want = [cp.asnumpy(ref.fields[f]) for f in ("u", "v")]
    sim._fill_before(0.0)
    arrays, lat = sim.arrays(), sim.lattice
    (pss,) = p.analysis.passes
    walls = ("Periodic", "Periodic")
    images = {"u_next": walls, "v_next": walls}
    T = np.float32
    geometry = []
    for a in range(2):
        geometry += [np.float64(lat.lower[a]), np.float64(lat.spacing[a]), np.int32(lat.shape[a])]
    args = tuple([arrays[n] for n in ("u_next", "v_next", "u", "v")] + [T(sim.params[c.name]) for c in p.constants]
                 + [T(0.0), T(sim.dt)] + geometry + [np.int32(lat.ghost)])
    nbytes = 16 * 4096 * 4096
    rows = {}
    for tile in ((16, 64), (32, 64), (32, 32), (64, 64), (16, 128), (32, 128), (8, 256)):
        for threads in (128, 256, 512):
            src, names = cuda_pair.pair_source(pss, "float32", p.constants, walls, 1, tile=tile, threads=threads, images=images)
            assert names == ("u_next", "v_next", "u", "v")
            fn = backend._generated(src, "pair experiment", "sf_pair", cuda_pair.OPTIONS)
            grid, block = cuda_pair.launch_grid(lat.shape, tile, threads)
            for n in ("u_next", "v_next"):
                arrays[n][...] = cp.nan
            fn(grid, block, args)
            same = all(np.array_equal(cp.asnumpy(arrays[f"{f}_next"][lat.interior]), w) for f, w in zip("uv", want))
            s = timed(lambda fn=fn, grid=grid, block=block: fn(grid, block, args)) / 2
            rows[f"tile {tile[0]}x{tile[1]} threads {threads}"] = {"ms_per_step": s * 1e3, "pct_copy": 100 * nbytes / s / 1e9 / ceiling,
                                                                    "bitwise_two_steps": same}
    out = {"device": backend.device_name, "copy_gbps": ceiling, "rows": rows}
    json.dump(out, open(sys.argv[1], "w"), indent=1)
    for k, v in sorted(rows.items(), key=lambda kv: -kv[1]["pct_copy"]):
        print(f"{k:28s} {v['pct_copy']:6.1f}% eq={v['bitwise_two_steps']}")


if __name__ == "__main__":
    main()
