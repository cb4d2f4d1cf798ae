"""One-off: numba's wide 3D kernel compiled for the grid's shape, every field read through one view at constant
offsets (`_constant_offsets`), against the kernel for any shape (a view per offset, whose 51 pointers LLVM kept
on the stack), wave3d r8 float32, interleaved in one process on the same fields, with and without the loop's
walls. Checked first: the same bits. python benchmarks/constant_offsets.py ROUNDS OUT.json N"""

import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import numba_cpu as nc

rounds, n = int(sys.argv[1]), int(sys.argv[3])
setup = problems.build("wave3d", shape=(n, n, n), dtype="float32", radius=8)
grid, sweep = setup.grid, setup.sweep
be = nc.NumbaBackend()
runs = {label: be._bound(nc.sweep_source(sweep, False, padded), sweep, grid, sweep.out, walls=nc.wall_args(3))[0]
        for label, padded in (("any shape", None), ("constant offsets", grid.padded_shape))}
rng = np.random.default_rng(3)
base = {k: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for k in sweep.inputs}
g, (n0, n1, n2) = grid.ghost, grid.shape
walls = (rng.uniform(-1, 1, (n0, n1, 2 * g)), rng.uniform(-1, 1, (n0, 2 * g, n2 + 2 * g)), 0.7)
got = {}
for label, run in runs.items():
    f = {k: be.field(v, g) for k, v in base.items()}
    run(f, walls)
    got[label] = f[sweep.out].copy()
same = bool(np.array_equal(got["any shape"], got["constant offsets"]))
rows = []
for with_walls in (False, True):
    fields = {label: {k: be.field(v, g) for k, v in base.items()} for label in runs}
    samples = {label: [] for label in runs}
    for r in range(rounds):
        for label in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            t = time.perf_counter()
            for _ in range(3):
                runs[label](fields[label], walls if with_walls else None)
            samples[label].append((time.perf_counter() - t) / 3 * 1e3)
    row = {"walls": with_walls, **{f"ms {k}": st.median(v) for k, v in samples.items()}, "samples": samples}
    row["speedup"] = row["ms any shape"] / row["ms constant offsets"]
    rows.append(row)
    print(f"wave3d {n}^3 walls={with_walls}: any shape {row['ms any shape']:.3f}  constant offsets {row['ms constant offsets']:.3f}"
          f"  x{row['speedup']:.3f}  same bits {same}", flush=True)
json.dump({"case": f"wave3d r8 {n}^3 float32", "threads": __import__("numba").get_num_threads(), "same_bits": same, "rows": rows},
          open(sys.argv[2], "w"), indent=1)
