"""One-off: what bounds numba's heat3d pass of four steps (`_march_source`).

1. The march's own `middle` (one level of one plane: a flat loop over the plane's rows, then its ghost cells) on one
   thread, called over a stack of planes small enough for L2, of the real size (L3), and many real planes (DRAM):
   ns per interior cell. If the time does not grow with the distance of the data, the level is compute-bound.
2. The four-step pass as the backend generates it against one whose first two levels share one loop (each cell of
   level 1 feeds level 2 of the plane behind it straight from a register), so the level that reads u from memory
   overlaps one that reads only cache. Bitwise equal, checked. Rounds interleave; ms per step.
Usage: python benchmarks/heat3d_ceiling.py OUT.json
"""

import importlib.util
import json
import platform
import statistics
import sys
import time

import numba
import numpy as np

import stencilforge.backends.numba_cpu as nc
from stencilforge.bench.workloads import Workload, build_case

PAIR = '''
@SERIAL
def middle2(w1, a_m1, a_p0, a_p1, gh1, fac_1, w2, b_m1, b_p0, gh2, fac_2, coef, g, wx, wy, p):
    c0, c1, c2, c3, c4, c5, c6 = coef[0], coef[1], coef[2], coef[3], coef[4], coef[5], coef[6]
    wd = w1.shape[1]
    n1 = w1.shape[0] - 2 * g
    m = wd - 2 * g
    base = g * wd + g
    n = (n1 - 1) * wd + m
    a_m1, a_p0, a_p1, b_m1, b_p0 = a_m1.reshape(-1), a_p0.reshape(-1), a_p1.reshape(-1), b_m1.reshape(-1), b_p0.reshape(-1)
    va0, va6 = a_m1[base:base + n], a_p1[base:base + n]
    va1, va2, va3 = a_p0[base - wd:base - wd + n], a_p0[base - 1:base - 1 + n], a_p0[base:base + n]
    va4, va5 = a_p0[base + 1:base + 1 + n], a_p0[base + wd:base + wd + n]
    vb0 = b_m1[base:base + n]
    vb1, vb2, vb3 = b_p0[base - wd:base - wd + n], b_p0[base - 1:base - 1 + n], b_p0[base:base + n]
    vb4, vb5 = b_p0[base + 1:base + 1 + n], b_p0[base + wd:base + wd + n]
    o1 = w1.reshape(-1)[base:base + n]
    o2 = w2.reshape(-1)[base:base + n]
    for j in range(n):
        t = (c0 * va0[j] + c1 * va1[j] + c2 * va2[j] + c3 * va3[j] + c4 * va4[j] + c5 * va5[j] + c6 * va6[j])
        o1[j] = t
        o2[j] = (c0 * vb0[j] + c1 * vb1[j] + c2 * vb2[j] + c3 * vb3[j] + c4 * vb4[j] + c5 * vb5[j] + c6 * t)
    for (w, gh, fac, q) in ((w1, gh1, fac_1, p), (w2, gh2, fac_2, p - 1)):
        if wx.shape[0]:
            plane_walls(w, wx, wy, fac, g, q, g, g + n1, True, True)
        else:
            for i in range(w.shape[0]):
                if i < g or i >= g + n1:
                    for j in range(wd):
                        w[i, j] = gh[i, j]
                else:
                    for j in range(g):
                        w[i, j] = gh[i, j]
                        w[i, g + m + j] = gh[i, g + m + j]

'''

PAIRED_LEVELS = '''        p = q
        if (p >= max(z0 - 3, g - 1) and p < min(z1 + 3, g + n0 + 1) and p - 1 >= max(z0 - 2, g - 1)
                and p - 1 < min(z1 + 2, g + n0 + 1) and p - 1 >= g and p < g + n0):
            if wx.shape[0] and p >= z0 + 3 and p < z1 - 3:
                plane_walls(f_u[p], wx, wy, fac, g, p, g, g + n1, True, True)
            middle2(mid[0, p % 3], f_u[p - 1], f_u[p], f_u[p + 1], out[p], fac2, mid[1, (p - 1) % 3],
                    mid[0, (p - 2) % 3], mid[0, (p - 1) % 3], _walls2[p - 1], fac3, coef, g, wx, wy, p)
        else:
'''


def paired(source: str) -> str:
    """The four-step heat3d source with levels 1 and 2 in one loop wherever both planes are interior."""
    start = "    for q in range(z0 - 3, z1 + 3):\n"
    i = source.index(start) + len(start)
    j = source.index("        p = q - 2\n")
    block = "\n".join(("    " + line if line else line) for line in source[i:j].split("\n")).rstrip(" ")
    source = source[:i] + PAIRED_LEVELS + block + source[j:]
    return source.replace("\n@SERIAL\ndef march(", PAIR + "\n@SERIAL\ndef march(")


def load(source: str, name: str):
    path = f"/tmp/heat3d_ceiling_{name}.py"
    with open(path, "w") as f:
        f.write(source.replace("cache=True, ", ""))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def level_ns(middle, coef, side: int, planes: int, cells: float = 2e8) -> list[float]:
    """ns per interior cell of `middle` over `planes` planes of side x side (one thread), per round."""
    rng = np.random.default_rng(0)
    stack = rng.random((planes, side, side)).astype(np.float32)
    ring = np.zeros((2, side, side), np.float32)
    none = np.zeros((0, 0, 0))
    reps = max(1, int(cells // (side * side * (planes - 2))))

    def run(times):
        for _ in range(times):
            for q in range(1, planes - 1):
                middle(ring[q % 2], stack[q - 1], stack[q], stack[q + 1], stack[q], coef, 1, none, none, 0.0, q)

    run(1)
    out = []
    for _ in range(7):
        t0 = time.perf_counter()
        run(reps)
        out.append((time.perf_counter() - t0) / (reps * (planes - 2) * (side - 2) ** 2) * 1e9)
    return out


def main(out_path: str, n: int = 256) -> None:
    case = build_case(Workload("heat3d", (n,) * 3, "float32"))
    grid, g = case.grid, case.grid.ghost
    coef = nc.sweep_coefficients(case.plan, grid.dtype)
    source = nc.fused_source(case.plan, 4)
    backend = load(source, "backend")
    levels = {}
    for label, side, planes in (("L2: 6 planes of 130^2", 130, 6), ("L3: 6 planes of 258^2", 258, 6),
                                ("memory: 40 planes of 258^2", 258, 40)):
        s = level_ns(backend.middle, coef, side, planes)
        levels[label] = {"median_ns_per_cell": statistics.median(s), "min": min(s), "rounds": s}
        print(f"middle, one thread, {label:28s} {statistics.median(s):.3f} ns a cell (min {min(s):.3f})")
    kernels = {"levels apart (the backend's)": backend.kernel, "levels 1 + 2 in one loop": load(paired(source), "paired").kernel}
    rng = np.random.default_rng(1)
    u = nc.aligned_field(case.fields["u"], g)
    carriers = [nc.aligned_field(rng.random(u.shape).astype(np.float32), g) for _ in range(2)]
    walls = (rng.random((n, n, 2 * g)), rng.random((n, 2 * g, n + 2 * g)), 0.5, 0.6, 0.7, 0.8)
    none = (np.zeros((0, 0, 0)), np.zeros((0, 0, 0)), 0.0, 0.0, 0.0, 0.0)
    nt = numba.get_num_threads()
    start = rng.random(u.shape).astype(np.float32)
    results = {}
    for name, kernel in kernels.items():
        for label, args in (("none", none), ("walls", walls)):
            out, uu = nc.aligned_field(start, g), u.copy()
            kernel(out, uu, *carriers, coef, g, *args, nt)
            results[name, label] = (out, uu)
    for label in ("none", "walls"):
        a, b = (results[name, label] for name in kernels)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), f"paired levels differ ({label} walls)"
    out = nc.aligned_field(np.zeros_like(u), g)
    samples: dict[str, list[float]] = {k: [] for k in kernels}
    for _ in range(9):
        for name, kernel in kernels.items():
            batch = []
            for _ in range(3):
                t0 = time.perf_counter()
                kernel(out, u, *carriers, coef, g, *none, nt)
                batch.append((time.perf_counter() - t0) / 4 * 1e3)
            samples[name].append(statistics.median(batch))
    passes = {k: {"median_ms_per_step": statistics.median(v), "min": min(v), "rounds": v} for k, v in samples.items()}
    for k, v in passes.items():
        print(f"four-step pass, {nt} threads, {k:28s} {v['median_ms_per_step']:.3f} ms a step (min {v['min']:.3f})")
    result = {"workload": f"heat3d {n}^3 float32", "machine": platform.processor() or platform.machine(), "threads": nt,
              "numba": numba.__version__, "middle_one_thread": levels, "four_step_pass": passes,
              "paired_bitwise_equal": True}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
