"""One-off: what bitwise equality with the oracle costs wave3d r8 192^3 float32 on numba. Today's wide kernel against
the same kernel with the Laplacian's entries of equal weight summed first and multiplied once (c * (a + b + ...), as
Devito factorises), with and without LLVM allowed to contract and reassociate, interleaved in one process on the same
fields. python benchmarks/wave3d_factorised.py ROUNDS OUT.json"""
import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import numba_cpu as nc
from stencilforge.backends.numpy_ref import NumpyBackend
be = nc.NumbaBackend()
setup = problems.build("wave3d", shape=(192,192,192), dtype="float32", radius=8)
grid, sweep = setup.grid, setup.sweep
walls = nc.wall_args(grid.ndim) if nc.writes_walls(sweep) else ()
src = nc.sweep_source(sweep, False)
views = nc._views(sweep)
lap = sweep.terms[2]
groups = {}
for o, wt in lap.stencil.entries:
    groups.setdefault(float(wt), []).append(views[("u", o)])
gsum = []
for k, (wt, vs) in enumerate(groups.items()):
    gsum.append(f"g{k} * (" + " + ".join(f"{v}[j]" for v in vs) + ")")
gdefs = "\n".join(f"    g{k} = coef[{51 + k}]" for k in range(len(groups)))
def variant(chunks, fm):
    lines = src.splitlines()
    first = next(i for i, l in enumerate(lines) if l.strip() == "for j in range(n):")
    last = next(i for i, l in enumerate(lines) if l.strip().startswith("for k in range(y1 - y0)"))
    ind = " " * 16
    body = []
    parts = [gsum[i::chunks] for i in range(chunks)] if chunks > 1 else [gsum]
    for i, ps in enumerate(parts[:-1]):
        body += [f"{ind}for j in range(n):", f"{ind}    part[j] = {'part[j] + ' if i else ''}" + " + ".join(ps)]
    tail = ("part[j] + " if len(parts) > 1 else "") + " + ".join(parts[-1])
    body += [f"{ind}for j in range(n):", f"{ind}    acc[j] = c0 * v_u_p0_p0_p0[j] + c1 * v_u_prev_p0_p0_p0[j] + ({tail}) * v_vel_p0_p0_p0[j]"]
    out = lines[:first] + body + lines[last:]
    s = "\n".join(out) + "\n"
    s = s.replace("    c0 = coef[0]", gdefs + "\n    c0 = coef[0]", 1)
    if fm:
        s = s.replace("JIT = numba.njit(parallel=True, cache=True, nogil=True)", f"JIT = numba.njit(parallel=True, cache=True, nogil=True, fastmath={fm})")
    return s
coef = nc.sweep_coefficients(sweep, grid.dtype)
coef2 = np.concatenate([coef, np.array(list(groups), dtype=grid.dtype)])
import numba
runs = {"base": be._bound(src, sweep, grid, sweep.out, walls=walls)[0]}
for label, ch, fm in [("g1", 1, None), ("g1fm", 1, "{'contract', 'reassoc'}"), ("g2fm", 2, "{'contract', 'reassoc'}"), ("g4fm", 4, "{'contract', 'reassoc'}"), ("g2c", 2, "{'contract'}")]:
    k = nc.load_kernel(variant(ch, fm))
    def run(fields, k=k):
        return k(fields["u_next"] if "u_next" in fields else fields[sweep.out], *(fields[n] for n in sweep.inputs), coef2, grid.ghost, *nc.no_walls(walls, 3), numba.get_num_threads())
    runs[label] = run
rng = np.random.default_rng(3)
base = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in (*sweep.inputs, sweep.out)}
fields = {l: {n: be.field(v, grid.ghost) for n, v in base.items()} for l in runs}
res = {}
for l, r in runs.items():
    r(fields[l]); res[l] = fields[l][sweep.out][grid.interior].copy()
scale = np.abs(res["base"]).max()
diff = {l: float(np.abs(res[l] - res["base"]).max() / scale) for l in runs}
print(diff)
s = {l: [] for l in runs}
order = list(runs)
for r in range(int(sys.argv[1])):
    for l in (order if r % 2 == 0 else order[::-1]):
        t = time.perf_counter()
        for _ in range(3): runs[l](fields[l])
        s[l].append((time.perf_counter() - t) / 3 * 1e3)
b = st.median(s["base"])
rows = [{"variant": l, "ms_per_step": st.median(s[l]), "samples": s[l], "speedup": b / st.median(s[l]),
         "max_diff_over_max_abs": diff[l]} for l in runs]
for row in rows:
    print(f"{row['variant']:6s} {row['ms_per_step']:8.3f} ms x{row['speedup']:.2f}")
json.dump({"threads": numba.get_num_threads(), "rows": rows}, open(sys.argv[2], "w"), indent=1)
