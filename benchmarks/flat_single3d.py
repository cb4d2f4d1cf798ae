"""One-off: numba's single-step kernel for a narrow 3D sweep (heat3d) evaluating each plane's rows as one flat range
(out's ghost columns between rows kept aside and put back), against a loop per row (the kernel in the tree); heat3d
256^3 float32, interleaved in one process on the same fields, with and without the loop's walls. Checked first: the
same bits (out and u). python benchmarks/flat_single3d.py ROUNDS OUT.json."""
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import numba_cpu as nb

n = 256
import json

rows = []
setup = problems.build("heat3d", shape=(n, n, n), dtype="float32")
grid, sweep = setup.grid, setup.sweep
be = nb.NumbaBackend()
src = nb.sweep_source(sweep, False, nb.constant_shape(grid))
a = src.index("        for i1 in range(g, out.shape[1] - g):")
b = src.index("            for j in range(m):")
expr = src[b:].split("o[j] = ", 1)[1].strip()
flat = '''        w = out.shape[2]
        p = out.shape[1] * w
        base = i0 * p + g * w + g
        n = (n1 - 1) * w + m
        x_u = f_u.reshape(-1)
        x_o = out.reshape(-1)
        keep = np.empty((n1 - 1) * 2 * g, dtype=out.dtype)
        for k in range(n1 - 1):
            for c in range(2 * g):
                keep[k * 2 * g + c] = x_o[base + k * w + m + c]
        v_u_m1_p0_p0 = x_u[base - p:base - p + n]
        v_u_p0_m1_p0 = x_u[base - w:base - w + n]
        v_u_p0_p0_m1 = x_u[base - 1:base - 1 + n]
        v_u_p0_p0_p0 = x_u[base:base + n]
        v_u_p0_p0_p1 = x_u[base + 1:base + 1 + n]
        v_u_p0_p1_p0 = x_u[base + w:base + w + n]
        v_u_p1_p0_p0 = x_u[base + p:base + p + n]
        o = x_o[base:base + n]
        for j in range(n):
            o[j] = EXPR
        for k in range(n1 - 1):
            for c in range(2 * g):
                x_o[base + k * w + m + c] = keep[k * 2 * g + c]
'''.replace("EXPR", expr)
src_flat = src[:a] + flat
runs = {k: be._bound(s, sweep, grid, sweep.out, walls=nb.wall_args(3))[0] for k, s in (("rows", src), ("flat", src_flat))}
rng = np.random.default_rng(3)
base = {k: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for k in (*sweep.inputs, sweep.out)}
g, (n0, n1, n2) = grid.ghost, grid.shape
walls = (rng.uniform(-1, 1, (n0, n1, 2 * g)), rng.uniform(-1, 1, (n0, 2 * g, n2 + 2 * g)), 0.7)
got = {}
for k, r in runs.items():
    f = {kk: be.field(v, g) for kk, v in base.items()}
    r(f, walls)
    got[k] = (f[sweep.out].copy(), f["u"].copy())
same = all(np.array_equal(x, y) for x, y in zip(got["rows"], got["flat"]))
for ww in (False, True):
    fields = {k: {kk: be.field(v, g) for kk, v in base.items()} for k in runs}
    samples = {k: [] for k in runs}
    for r in range(int(sys.argv[1])):
        for k in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            t = time.perf_counter()
            for _ in range(3):
                runs[k](fields[k], walls if ww else None)
            samples[k].append((time.perf_counter() - t) / 3 * 1e3)
    med = {k: st.median(v) for k, v in samples.items()}
    mn = {k: min(v) for k, v in samples.items()}
    rows.append({"walls": ww, "ms_per_step": med, "min_ms_per_step": mn, "samples": samples, "same_bits": same})
    print(f"walls={ww}: rows {med['rows']:.3f} flat {med['flat']:.3f} x{med['rows']/med['flat']:.3f} (min x{mn['rows']/mn['flat']:.3f}) same={same}", flush=True)
json.dump({"case": "heat3d 256^3 float32, single steps", "threads": __import__("numba").get_num_threads(), "rows": rows}, open(sys.argv[2], "w"), indent=1)
