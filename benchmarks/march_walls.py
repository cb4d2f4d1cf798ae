"""One-off: numba's 3D march with moving walls (the time loop's x and y walls from their values, carriers of their own)
where a plane has several tiles of rows: the first parallel loop writing only the ghost rows and the rows within reach
of two tiles, each tile its other rows in the march, against the kernel before, whose first loop wrote every plane's
walls; heat3d 256^3 float32, four steps a pass, interleaved in one process on the same fields. Checked first: the same
bits (out, and u's walls). The kernel before comes from
git show HEAD~1:src/stencilforge/backends/numba_cpu.py > src/stencilforge/backends/_previous_march.py
then python benchmarks/march_walls.py ROUNDS OUT.json N0,N1,N2."""

import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import _previous_march as old, numba_cpu as new

rounds = int(sys.argv[1])
shape = tuple(int(v) for v in sys.argv[3].split(","))
setup = problems.build("heat3d", shape=shape, dtype="float32")
grid, sweep = setup.grid, setup.sweep
(u,) = sweep.stencil_inputs
be = new.NumbaBackend()
steps = new.FUSED_STEPS_3D
carriers = tuple(new.fused_walls(s, sweep.out) for s in range(2, steps))
walls = new.fused_wall_args(steps, 3)
runs = {label: be._bound(mod.fused_source(sweep, steps), sweep, grid, sweep.out, walls=walls, carriers=carriers)[0]
        for label, mod in (("before", old), ("bands", new))}
rng = np.random.default_rng(3)
base = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in (*sweep.inputs, sweep.out, *carriers)}
g, (n0, n1, n2) = grid.ghost, grid.shape
args = (rng.uniform(-1, 1, (n0, n1, 2 * g)), rng.uniform(-1, 1, (n0, 2 * g, n2 + 2 * g)), *[0.5 + 0.1 * s for s in range(steps)])
fields = {label: {n: be.field(v, g) for n, v in base.items()} for label in runs}
for label in runs:
    runs[label](fields[label], args)
same = all(np.array_equal(fields["before"][n], fields["bands"][n]) for n in (u, sweep.out))
samples = {label: [] for label in runs}
for r in range(rounds):
    for label in (("before", "bands") if r % 2 == 0 else ("bands", "before")):
        t = time.perf_counter()
        for _ in range(2):
            runs[label](fields[label], args)
        samples[label].append((time.perf_counter() - t) / 2 / steps * 1e3)
row = {"case": f"heat3d {'x'.join(map(str, shape))} float32, {steps} steps a pass, moving walls", "threads": __import__("numba").get_num_threads(),
       "tile_rows": new.MARCH_TILE_CELLS // grid.padded_shape[2], "same_bits": same,
       **{f"ms_per_step_{k}": st.median(v) for k, v in samples.items()}, **{f"min_ms_per_step_{k}": min(v) for k, v in samples.items()},
       "samples": samples}
row["speedup_median"] = row["ms_per_step_before"] / row["ms_per_step_bands"]
row["speedup_min"] = row["min_ms_per_step_before"] / row["min_ms_per_step_bands"]
print(f"{row['case']}: before {row['ms_per_step_before']:.3f} bands {row['ms_per_step_bands']:.3f} ms/step (x{row['speedup_median']:.3f}; "
      f"min x{row['speedup_min']:.3f}) same bits {same}", flush=True)
try:
    rows = json.load(open(sys.argv[2]))
except FileNotFoundError:
    rows = []
json.dump(rows + [row], open(sys.argv[2], "w"), indent=1)
