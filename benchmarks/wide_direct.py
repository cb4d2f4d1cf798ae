"""One-off: numba's wide 3D kernel storing its flat range straight into out (the view of out read at the cell
where there is one, the scratch ghost columns kept and put back) against the kernel before, which stored into a
tile buffer and copied its rows into out; wave3d r8 float32, interleaved in one process on the same fields, with
and without the loop's walls. Checked first: the same bits. The kernel before comes from
git show HEAD~1:src/stencilforge/backends/numba_cpu.py > src/stencilforge/backends/_previous_wide.py
then python benchmarks/wide_direct.py ROUNDS OUT.json N."""

import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import _previous_wide as old, numba_cpu as new

rounds, n = int(sys.argv[1]), int(sys.argv[3])
setup = problems.build("wave3d", shape=(n, n, n), dtype="float32", radius=8)
grid, sweep = setup.grid, setup.sweep
be = new.NumbaBackend()
runs = {label: be._bound(mod.sweep_source(sweep, False), sweep, grid, sweep.out, walls=mod.wall_args(3))[0]
        for label, mod in (("buffer", old), ("direct", new))}
rng = np.random.default_rng(3)
base = {k: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for k in sweep.inputs}
g, (n0, n1, n2) = grid.ghost, grid.shape
walls = (rng.uniform(-1, 1, (n0, n1, 2 * g)).astype(grid.dtype), rng.uniform(-1, 1, (n0, 2 * g, n2 + 2 * g)).astype(grid.dtype), 0.7)
got = {}
for label, run in runs.items():
    f = {k: be.field(v, grid.ghost) for k, v in base.items()}
    run(f, walls)
    got[label] = f[sweep.out].copy()
same = bool(np.array_equal(got["buffer"], got["direct"]))  # ghost cells included: out's are put back
rows = []
for with_walls in (False, True):
    fields = {label: {k: be.field(v, grid.ghost) for k, v in base.items()} for label in runs}
    samples = {label: [] for label in runs}
    for r in range(rounds):
        for label in (("buffer", "direct") if r % 2 == 0 else ("direct", "buffer")):
            t = time.perf_counter()
            for _ in range(3):
                runs[label](fields[label], walls if with_walls else None)
            samples[label].append((time.perf_counter() - t) / 3 * 1e3)
    row = {"walls": with_walls, **{f"ms_{k}": st.median(v) for k, v in samples.items()}, "samples": samples}
    row["speedup"] = row["ms_buffer"] / row["ms_direct"]
    rows.append(row)
    print(f"wave3d {n}^3 walls={with_walls}: buffer {row['ms_buffer']:.3f}  direct {row['ms_direct']:.3f}  x{row['speedup']:.3f}  same bits {same}", flush=True)
json.dump({"case": f"wave3d r8 {n}^3 float32", "threads": __import__("numba").get_num_threads(), "same_bits": same, "rows": rows},
          open(sys.argv[2], "w"), indent=1)
