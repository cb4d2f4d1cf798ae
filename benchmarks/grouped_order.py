"""One-off: numba's sweep kernels with the entries of equal weight summed first (`Stencil.weight_groups`) against
the same kernels adding c * v entry by entry (the order before), interleaved in one process on the same fields.
Checked first: the new kernels' bits equal NumPy's oracle's. The kernels before come from a copy of numba_cpu.py at the
commit before this one's: git show HEAD~1:src/stencilforge/backends/numba_cpu.py > src/stencilforge/backends/_previous_order.py
then python benchmarks/grouped_order.py ROUNDS OUT.json (NUMBA_NUM_THREADS=1 for one thread)."""

import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import _previous_order as old, numba_cpu as new
from stencilforge.backends.numpy_ref import evaluate_sweep

CASES = [("wave3d", (192, 192, 192), 1), ("heat3d", (256, 256, 256), 1), ("heat3d", (256, 256, 256), 4),
         ("heat2d", (4096, 4096), 1), ("heat2d", (4096, 4096), 6), ("poisson2d", (4096, 4096), 6)]
rounds = int(sys.argv[1])
rows = []
for name, shape, steps in CASES:
    kw = {"radius": 8} if name == "wave3d" else {}
    setup = problems.build(name, shape=shape, dtype="float32", **kw)
    grid, sweep = setup.grid, setup.sweep
    runs = {}
    for label, mod in (("entry", old), ("grouped", new)):
        be = mod.NumbaBackend()
        src = mod.sweep_source(sweep, False) if steps == 1 else mod.fused_source(sweep, steps)
        carriers = tuple(mod.fused_walls(s, sweep.out) for s in range(2, steps)) if steps > 1 else ()
        walls = (mod.wall_args(grid.ndim) if steps == 1 else mod.fused_wall_args(steps, grid.ndim)) if mod.writes_walls(sweep) else ()
        runs[label] = (be, be._bound(src, sweep, grid, sweep.out, walls=walls, carriers=carriers)[0], carriers)
    rng = np.random.default_rng(3)
    carriers = runs["grouped"][2]
    base = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in (*sweep.inputs, *carriers)}
    base.setdefault(sweep.out, rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype))
    got = {}
    for label, (be, run, _) in runs.items():
        f = {n: be.field(v, grid.ghost) for n, v in base.items()}
        run(f)
        got[label] = f[sweep.out][grid.interior].copy()
    oracle = None
    if steps == 1:
        oracle = bool(np.array_equal(got["grouped"], evaluate_sweep(sweep, grid, base)))
    diff = float(np.abs(got["grouped"] - got["entry"]).max() / np.abs(got["entry"]).max())
    fields = {label: {n: be.field(v, grid.ghost) for n, v in base.items()} for label, (be, _, _) in runs.items()}
    samples = {label: [] for label in runs}
    for r in range(rounds):
        for label in (("entry", "grouped") if r % 2 == 0 else ("grouped", "entry")):
            run, f = runs[label][1], fields[label]
            t = time.perf_counter()
            for _ in range(3):
                run(f)
            samples[label].append((time.perf_counter() - t) / 3 / steps * 1e3)
    row = {"case": f"{name} {'x'.join(map(str, shape))} float32", "steps_per_pass": steps, "grouped_equals_oracle": oracle,
           "max_diff_over_max_abs": diff, "ms_per_step_entry": st.median(samples["entry"]),
           "ms_per_step_grouped": st.median(samples["grouped"]), "samples_entry": samples["entry"], "samples_grouped": samples["grouped"]}
    row["speedup"] = row["ms_per_step_entry"] / row["ms_per_step_grouped"]
    rows.append(row)
    print(f"{row['case']:28s} steps {steps}  entry {row['ms_per_step_entry']:7.3f}  grouped {row['ms_per_step_grouped']:7.3f}"
          f"  x{row['speedup']:.2f}  oracle bits {oracle}  diff {diff:.1e}", flush=True)
json.dump({"threads": __import__("numba").get_num_threads(), "rows": rows}, open(sys.argv[2], "w"), indent=1)
