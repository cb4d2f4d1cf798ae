"""One-off: numba's kernels writing their walls from float32 values (walls' spatial part rounded to float32 once,
`boundary.spatial_values`) against float64 values, and against no walls; wave3d r8 192^3 (the wide kernel) and
heat3d 256^3 (four steps a pass), float32, interleaved in one process on the same fields, two threads.
Checked first: the same bits from float32 and float64 arrays holding the same (float32-exact) values.
python benchmarks/wall_values.py ROUNDS OUT.json"""

import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import numba_cpu as nc

rounds = int(sys.argv[1])
rows = []
for name, shape, kw, steps in (("wave3d", (192,) * 3, {"radius": 8}, 1), ("heat3d", (256,) * 3, {}, 4)):
    setup = problems.build(name, shape=shape, dtype="float32", **kw)
    grid, sweep = setup.grid, setup.sweep
    be = nc.NumbaBackend()
    if steps == 1:
        src, walls, carriers = nc.sweep_source(sweep, False), nc.wall_args(3), ()
    else:
        src, walls, carriers = nc.fused_source(sweep, steps), nc.fused_wall_args(steps, 3), tuple(nc.fused_walls(s, sweep.out) for s in range(2, steps))
    run = be._bound(src, sweep, grid, sweep.out, walls=walls, carriers=carriers)[0]
    rng = np.random.default_rng(3)
    base = {k: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for k in (*sweep.inputs, sweep.out, *carriers)}
    g, (n0, n1, n2) = grid.ghost, grid.shape
    wx = rng.uniform(-1, 1, (n0, n1, 2 * g)).astype(np.float32)
    wy = rng.uniform(-1, 1, (n0, 2 * g, n2 + 2 * g)).astype(np.float32)
    factors = tuple(0.7 + 0.01 * s for s in range(steps))
    variants = {"none": None, "float64 values": (wx.astype(np.float64), wy.astype(np.float64), *factors), "float32 values": (wx, wy, *factors)}
    fields = {k: {n: be.field(v, g) for n, v in base.items()} for k in variants}
    got = {}
    for k in ("float64 values", "float32 values"):
        f = {n: v.copy() for n, v in fields[k].items()}
        run(f, variants[k])
        got[k] = f[sweep.out]
    same = bool(np.array_equal(got["float64 values"], got["float32 values"]))
    samples = {k: [] for k in variants}
    for r in range(rounds):
        for k in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
            t = time.perf_counter()
            for _ in range(3):
                run(fields[k], variants[k])
            samples[k].append((time.perf_counter() - t) / 3 / steps * 1e3)
    row = {"case": f"{name} {'x'.join(map(str, shape))} float32", "steps_per_pass": steps, "same_bits": same,
           **{f"ms_per_step {k}": st.median(v) for k, v in samples.items()}, "samples": samples}
    rows.append(row)
    print(row["case"], steps, "steps:", "  ".join(f"{k} {st.median(v):.3f}" for k, v in samples.items()), f" same bits {same}", flush=True)
json.dump({"threads": __import__("numba").get_num_threads(), "rows": rows}, open(sys.argv[2], "w"), indent=1)
