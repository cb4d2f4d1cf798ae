"""One-off: numba's march (several steps a pass) where the walls stay put (`with_walls`: the carriers are the
input), each middle plane copying its ghost cells from the plane of the state before (in cache), against the kernel
before, which read them from out's and the carriers' planes; interleaved in one process on the same fields, out's
ghost cells equal to the input's, as the time loop keeps static walls. Checked first: the same bits. The kernel
before comes from
git show HEAD~1:src/stencilforge/backends/numba_cpu.py > src/stencilforge/backends/_previous_march.py
then python benchmarks/march_still.py ROUNDS OUT.json PROBLEM N0,N1[,N2]."""

import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import _previous_march as old, numba_cpu as new

rounds, problem = int(sys.argv[1]), sys.argv[3]
shape = tuple(int(v) for v in sys.argv[4].split(","))
setup = problems.build(problem, shape=shape, dtype="float32")
grid, sweep = setup.grid, setup.sweep
(u,) = sweep.stencil_inputs
be = new.NumbaBackend()
steps = new.FUSED_STEPS_3D if grid.ndim == 3 else new.FUSED_STEPS_2D
carriers = tuple(new.fused_walls(s, sweep.out) for s in range(2, steps))
walls = new.fused_wall_args(steps, grid.ndim) if new.writes_walls(sweep) else ()
runs = {label: be._bound(mod.fused_source(sweep, steps), sweep, grid, sweep.out, walls=walls, carriers=carriers)[0]
        for label, mod in (("before", old), ("still", new))}
rng = np.random.default_rng(3)
base = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in sweep.inputs}
fields = {}
for label in runs:
    f = {n: be.field(v, grid.ghost) for n, v in base.items()}
    f[sweep.out] = be.field(base[u], grid.ghost)  # static walls: out's ghost cells are the input's
    fields[label] = {**f, **{c: f[u] for c in carriers}}
    runs[label](fields[label])
same = bool(np.array_equal(fields["before"][sweep.out], fields["still"][sweep.out]))
samples = {label: [] for label in runs}
for r in range(rounds):
    for label in (("before", "still") if r % 2 == 0 else ("still", "before")):
        t = time.perf_counter()
        for _ in range(2):
            runs[label](fields[label])
        samples[label].append((time.perf_counter() - t) / 2 / steps * 1e3)
row = {"case": f"{problem} {'x'.join(map(str, shape))} float32, {steps} steps a pass", "threads": __import__("numba").get_num_threads(),
       "same_bits": same, **{f"ms_per_step_{k}": st.median(v) for k, v in samples.items()},
       **{f"min_ms_per_step_{k}": min(v) for k, v in samples.items()}, "samples": samples}
row["speedup_median"] = row["ms_per_step_before"] / row["ms_per_step_still"]
row["speedup_min"] = row["min_ms_per_step_before"] / row["min_ms_per_step_still"]
print(f"{row['case']}: before {row['ms_per_step_before']:.3f} still {row['ms_per_step_still']:.3f} ms/step (x{row['speedup_median']:.3f}; "
      f"min x{row['speedup_min']:.3f}) same bits {same}", flush=True)
try:
    rows = json.load(open(sys.argv[2]))
except FileNotFoundError:
    rows = []
json.dump(rows + [row], open(sys.argv[2], "w"), indent=1)
