"""One-off: numba's fused pass reading its first middle state's walls (walls that stay put) from the input, whose
ghost cells lie in lines the pass reads anyway, against reading them from out's ghost cells (the kernel before:
the same source with out[p] for _walls1[p]), interleaved in one process on the same fields, two threads.
Checked first: the same bits. python benchmarks/first_walls.py ROUNDS OUT.json"""

import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import numba_cpu as nc
from stencilforge.backends.base import with_walls

CASES = [("heat3d", (256, 256, 256), 4), ("heat2d", (4096, 4096), 6), ("poisson2d", (4096, 4096), 6)]
rounds = int(sys.argv[1])
rows = []
for name, shape, steps in CASES:
    setup = problems.build(name, shape=shape, dtype="float32")
    grid, sweep = setup.grid, setup.sweep
    be = nc.NumbaBackend()
    new = nc.fused_source(sweep, steps)
    old = new.replace("_walls1[p]", "out[p]")
    assert old != new
    walls = nc.fused_wall_args(steps, grid.ndim) if nc.writes_walls(sweep) else ()
    carriers = nc.fused_carriers(sweep, steps)
    runs = {label: be._bound(src, sweep, grid, sweep.out, walls=walls, carriers=carriers)[0]
            for label, src in (("out", old), ("input", new))}
    rng = np.random.default_rng(3)
    base = {k: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for k in (*sweep.inputs, sweep.out)}
    fields = {label: {k: be.field(v, grid.ghost) for k, v in base.items()} for label in runs}
    for label in runs:  # walls that stay put: out's ghost cells equal the input's, as the time loop keeps them
        f = fields[label]
        interior = f[sweep.out][grid.interior].copy()
        f[sweep.out][...] = f[sweep.stencil_inputs[0]]
        f[sweep.out][grid.interior] = interior
    got = {}
    for label, run in runs.items():
        f = {k: v.copy() for k, v in fields[label].items()}
        run(with_walls(f, sweep, steps))
        got[label] = f[sweep.out]
    same = bool(np.array_equal(got["out"], got["input"]))
    samples = {label: [] for label in runs}
    for r in range(rounds):
        for label in (("out", "input") if r % 2 == 0 else ("input", "out")):
            f = with_walls(fields[label], sweep, steps)
            t = time.perf_counter()
            for _ in range(3):
                runs[label](f)
            samples[label].append((time.perf_counter() - t) / 3 / steps * 1e3)
    row = {"case": f"{name} {'x'.join(map(str, shape))} float32", "steps_per_pass": steps, "same_bits": same,
           "ms_per_step_out": st.median(samples["out"]), "ms_per_step_input": st.median(samples["input"]), "samples": samples}
    row["speedup"] = row["ms_per_step_out"] / row["ms_per_step_input"]
    rows.append(row)
    print(f"{row['case']:28s} {steps} steps: walls from out {row['ms_per_step_out']:.3f}  from the input {row['ms_per_step_input']:.3f}"
          f"  x{row['speedup']:.3f}  same bits {same}", flush=True)
json.dump({"threads": __import__("numba").get_num_threads(), "rows": rows}, open(sys.argv[2], "w"), indent=1)
