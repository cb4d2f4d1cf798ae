"""One-off: wave3d r8 192^3 float32 with compile-time offsets from one flat index (no views, so no alias-check
limit) and Z planes per loop, each cell's 49 terms in the oracle's order, chained per plane or interleaved across
planes; against the numba backend's kernel (14 views a loop) on the same shape, alternating rounds, no walls.

    python benchmarks/wave3d_zplanes.py OUT.json
"""
# ruff: noqa: E501, E402, E702, B007

import statistics
import sys
import time

import numba
import numpy as np

R = 8
N = 192
G = R
W = N + 2 * G
P = W * W
offs = sorted([(dz, 0, 0) for dz in range(-R, R + 1) if dz] + [(0, dy, 0) for dy in range(-R, R + 1) if dy]
              + [(0, 0, dx) for dx in range(-R, R + 1)])
# oracle-ish order: lexicographic offsets (as the generated kernel's views)
LOWV = R * P + R * W + R


def gen_chained(Z):
    lines = ["@numba.njit(parallel=True, nogil=True, fastmath=False)",
             "def kern(out, u, up, vel, coef, nt):",
             *[f"    c{k} = coef[{k}]" for k in range(len(offs) + 2)],
             f"    LOW = {LOWV}", "    xu = u.reshape(-1)", "    xp = up.reshape(-1)", "    xv = vel.reshape(-1)",
             f"    n0 = {N}", "    span = (n0 + nt - 1) // nt", "    tasks = (n0 + span - 1) // span",
             f"    ny = {max(1, N // 32)}", f"    rows = ({N} + ny - 1) // ny",
             "    for t in numba.prange(tasks):",
             f"        z0 = {G} + t * span", f"        z1 = min({G} + n0, z0 + span)",
             f"        acc = np.empty({Z} * rows * {W}, dtype=out.dtype)",
             "        for yt in range(ny):",
             f"            y0 = {G} + yt * {N} // ny", f"            y1 = {G} + (yt + 1) * {N} // ny",
             f"            n = (y1 - y0 - 1) * {W} + {N}",
             "            i0 = z0",
             "            while i0 < z1:",
             f"                if i0 + {Z} <= z1:",
             f"                    base = i0 * {P} + y0 * {W} + {G}",
             "                    for j in range(n):",
             "                        b = np.uint64(base - LOW + j)"]
    for z in range(Z):
        terms = " + ".join(f"c{k + 2} * xu[b + np.uint64({z * P + dz * P + dy * W + dx + LOWV})]" for k, (dz, dy, dx) in enumerate(offs))
        lines.append(f"                        acc[{z} * n + j] = (c0 * xu[b + np.uint64({z * P + LOWV})]) + (c1 * xp[b + np.uint64({z * P + LOWV})]) + (({terms}) * xv[b + np.uint64({z * P + LOWV})])")
    lines += [f"                    for z in range({Z}):",
              "                        for k in range(y1 - y0):",
              f"                            out[i0 + z, y0 + k, {G}:{G + N}] = acc[z * n + k * {W}:z * n + k * {W} + {N}]",
              f"                    i0 += {Z}",
              "                else:",
              f"                    base = i0 * {P} + y0 * {W} + {G}",
              "                    for j in range(n):",
              "                        b = np.uint64(base - LOW + j)"]
    terms = " + ".join(f"c{k + 2} * xu[b + np.uint64({dz * P + dy * W + dx + LOWV})]" for k, (dz, dy, dx) in enumerate(offs))
    lines += [f"                        acc[j] = (c0 * xu[b + np.uint64({LOWV})]) + (c1 * xp[b + np.uint64({LOWV})]) + (({terms}) * xv[b + np.uint64({LOWV})])",
              "                    for k in range(y1 - y0):",
              f"                        out[i0, y0 + k, {G}:{G + N}] = acc[k * {W}:k * {W} + {N}]",
              "                    i0 += 1"]
    ns = {"numba": numba, "np": np}
    exec("\n".join(lines), ns)
    return ns["kern"]

def gen_interleaved(Z):
    lines = ["@numba.njit(parallel=True, nogil=True, fastmath=False)",
             "def kern(out, u, up, vel, coef, nt):",
             *[f"    c{k} = coef[{k}]" for k in range(len(offs) + 2)],
             f"    LOW = {LOWV}", "    xu = u.reshape(-1)", "    xp = up.reshape(-1)", "    xv = vel.reshape(-1)",
             f"    n0 = {N}", "    span = (n0 + nt - 1) // nt", "    tasks = (n0 + span - 1) // span",
             f"    ny = {max(1, N // 32)}", f"    rows = ({N} + ny - 1) // ny",
             "    for t in numba.prange(tasks):",
             f"        z0 = {G} + t * span", f"        z1 = min({G} + n0, z0 + span)",
             f"        acc = np.empty({Z} * rows * {W}, dtype=out.dtype)",
             "        for yt in range(ny):",
             f"            y0 = {G} + yt * {N} // ny", f"            y1 = {G} + (yt + 1) * {N} // ny",
             f"            n = (y1 - y0 - 1) * {W} + {N}",
             "            i0 = z0",
             "            while i0 < z1:",
             f"                if i0 + {Z} <= z1:",
             f"                    base = i0 * {P} + y0 * {W} + {G}",
             "                    for j in range(n):",
             "                        b = np.uint64(base - LOW + j)"]
    ind = "                        "
    for k, (dz, dy, dx) in enumerate(offs):
        for z in range(Z):
            t = f"c{k + 2} * xu[b + np.uint64({z * P + dz * P + dy * W + dx + LOWV})]"
            lines.append(f"{ind}l{z} = {t}" if k == 0 else f"{ind}l{z} = l{z} + {t}")
    for z in range(Z):
        lines.append(f"{ind}acc[{z} * n + j] = (c0 * xu[b + np.uint64({z * P + LOWV})]) + (c1 * xp[b + np.uint64({z * P + LOWV})]) + (l{z} * xv[b + np.uint64({z * P + LOWV})])")
    lines += [f"                    for z in range({Z}):",
              "                        for k in range(y1 - y0):",
              f"                            out[i0 + z, y0 + k, {G}:{G + N}] = acc[z * n + k * {W}:z * n + k * {W} + {N}]",
              f"                    i0 += {Z}",
              "                else:",
              f"                    base = i0 * {P} + y0 * {W} + {G}",
              "                    for j in range(n):",
              "                        b = np.uint64(base - LOW + j)"]
    terms = " + ".join(f"c{k + 2} * xu[b + np.uint64({dz * P + dy * W + dx + LOWV})]" for k, (dz, dy, dx) in enumerate(offs))
    lines += [f"                        acc[j] = (c0 * xu[b + np.uint64({LOWV})]) + (c1 * xp[b + np.uint64({LOWV})]) + (({terms}) * xv[b + np.uint64({LOWV})])",
              "                    for k in range(y1 - y0):",
              f"                        out[i0, y0 + k, {G}:{G + N}] = acc[k * {W}:k * {W} + {N}]",
              "                    i0 += 1"]
    ns = {"numba": numba, "np": np}
    exec("\n".join(lines), ns)
    return ns["kern"]

def oracle(u, up, vel, coef):
    s = slice(G, G + N)
    lap = None
    for k, (dz, dy, dx) in enumerate(offs):
        t = coef[k + 2] * u[G + dz:G + dz + N, G + dy:G + dy + N, G + dx:G + dx + N]
        lap = t if lap is None else lap + t
    return (coef[0] * u[s, s, s]) + (coef[1] * up[s, s, s]) + (lap * vel[s, s, s])

rng = np.random.default_rng(0)
u, up, vel = (rng.random((W, W, W), dtype=np.float32) for _ in range(3))
coef = rng.random(len(offs) + 2).astype(np.float32)
ref = oracle(u, up, vel, coef)
import json
import platform

from stencilforge import problems
from stencilforge.backends import get_backend
from stencilforge.timeloop import LoopOptions, SweepStepper

nt = numba.get_num_threads()
runs = {}
for label, gen, Z in (("chained", gen_chained, 1), ("chained", gen_chained, 2), ("chained", gen_chained, 4),
                      ("interleaved", gen_interleaved, 2), ("interleaved", gen_interleaved, 4)):
    t = time.perf_counter(); k = gen(Z); out = np.zeros_like(u); k(out, u, up, vel, coef, nt); ct = time.perf_counter() - t
    same = bool(np.array_equal(out[G:G + N, G:G + N, G:G + N], ref))
    runs[f"{label} Z={Z}"] = (lambda k=k, out=out: k(out, u, up, vel, coef, nt), {"compile_s": ct, "same_bits": same})
st = SweepStepper(problems.build("wave3d", shape=(N, N, N), dtype="float32"), get_backend("numba"), LoopOptions())
st.compile()
st.step.wait()
fields = st.state()
runs["backend kernel"] = (lambda: st.step(fields), {})
times = {k: [] for k in runs}
for r in range(10):
    for k, (run, _) in runs.items():
        t = time.perf_counter()
        for _ in range(3):
            run()
        times[k].append((time.perf_counter() - t) / 3 * 1e3)
rows = [{"variant": k, **info, "ms_median": statistics.median(times[k]), "ms_min": min(times[k]), "samples_ms": times[k]}
        for k, (_, info) in runs.items()]
for row in rows:
    print(f"{row['variant']:>16}: median {row['ms_median']:.2f} min {row['ms_min']:.2f} ms", row.get("same_bits", ""))
with open(sys.argv[1], "w") as fh:
    json.dump({"cpu": platform.processor() or platform.machine(), "threads": nt, "rows": rows}, fh, indent=1)
