"""One-off: where numba's 3D march spends heat3d's time, and what the wave3d time loop's moving walls cost.

heat3d 256^3 float32, four steps a pass, walls that stay put (the bench's kernel row), interleaved in one process:
- pass: the kernel `fused_source` prints;
- planes_in_cache: the same kernel with its input and output planes wrapping within 8 planes, so no plane comes
  from or goes to memory (not a computation: a floor, what the pass costs with the memory traffic taken away);
- aligned_ring: the ring planes padded to whole 64-byte lines with their interior on a line, the middle levels in
  loops over rows; checked first for the same bits as the pass.
wave3d 192^3 float32: the single-step kernel without walls, with the time loop's x and y walls (`RowWalls.at`),
and the filler of the z faces the kernel does not write (`RowWalls.rest`).
python benchmarks/march_floor.py ROUNDS OUT.json"""

import json
import statistics as st
import sys
import time

import numba
import numpy as np

from stencilforge import problems
from stencilforge.backends import numba_cpu as nc
from stencilforge.timeloop import LoopOptions, SweepStepper

rounds, path = int(sys.argv[1]), sys.argv[2]


def in_cache(src: str) -> str:
    for a, b in (("f_u[p - 1]", "f_u[(p - 1) % 8 + 1]"), ("f_u[p + 1]", "f_u[(p + 1) % 8 + 1]"), ("f_u[p]", "f_u[p % 8 + 1]"),
                 ("out[z, i, g:g + m]", "out[z % 8 + 1, i, g:g + m]")):
        assert a in src, a
        src = src.replace(a, b)
    return src


def aligned_ring(src: str) -> str:
    start, stop = src.index("@SERIAL\ndef middle"), src.index("@SERIAL\ndef march")
    mid = src[start:stop]
    expr = mid[mid.index("o[j] = ") + len("o[j] = "):].split("\n")[0]
    views = [line.strip().split(" = ")[0] for line in mid.split("\n") if line.strip().startswith("v_u_")]
    at = {"v_u_m1_p0_p0": "x_u_m1[i, c:c + m]", "v_u_p0_m1_p0": "x_u_p0[i - 1, c:c + m]", "v_u_p0_p0_m1": "x_u_p0[i, c - 1:c - 1 + m]",
          "v_u_p0_p0_p0": "x_u_p0[i, c:c + m]", "v_u_p0_p0_p1": "x_u_p0[i, c + 1:c + 1 + m]", "v_u_p0_p1_p0": "x_u_p0[i + 1, c:c + m]",
          "v_u_p1_p0_p0": "x_u_p1[i, c:c + m]"}
    assert sorted(views) == sorted(at), views
    body = ["@SERIAL", "def middle(w, wl, x_u_m1, x_u_p0, x_u_p1, xl, ghosts, gl, coef, g, m, wx, wy, fac, p, ylo, yhi):",
            "    wide_vectors()", "    c0 = coef[0]", "    c1 = coef[1]", "    n1 = w.shape[0] - 2 * g", "    ya = max(ylo, g)",
            "    yb = min(yhi, g + n1)", "    for i in range(ya, yb):", "        c = xl + g",
            *[f"        {v} = {at[v]}" for v in views], "        o = w[i, wl + g:wl + g + m]", "        for j in range(m):",
            f"            o[j] = {expr}", "    for i in range(max(ylo, 0), min(yhi, w.shape[0])):", "        if i < g or i >= g + n1:",
            "            for j in range(m + 2 * g):", "                w[i, wl + j] = ghosts[i, gl + j]", "        else:",
            "            for j in range(g):", "                w[i, wl + j] = ghosts[i, gl + j]",
            "                w[i, wl + g + m + j] = ghosts[i, gl + g + m + j]", "", "", ""]
    src = src[:start] + "\n".join(body) + src[stop:]
    swaps = [
        ("def copy_plane(w, a):\n    for i in range(w.shape[0]):\n        for j in range(w.shape[1]):\n            w[i, j] = a[i, j]",
         "def copy_plane(w, wl, a, al, width):\n    for i in range(w.shape[0]):\n        for j in range(width):\n"
         "            w[i, wl + j] = a[i, al + j]"),
        ("    mid = np.empty((3, 3, out.shape[1], out.shape[2]), dtype=out.dtype)\n",
         "    vec = 64 // out.itemsize\n    L = (vec - g % vec) % vec\n    pitch = (L + m + 2 * g + vec - 1) // vec * vec\n"
         "    size = 3 * 3 * out.shape[1] * pitch\n    raw = np.empty(size + vec, dtype=out.dtype)\n"
         "    off = ((-(raw.ctypes.data + (L + g) * out.itemsize)) % 64) // out.itemsize\n"
         "    mid = raw[off:off + size].reshape((3, 3, out.shape[1], pitch))\n"),
        ("copy_plane(w, f_u[p] if still else out[p])", "copy_plane(w, L, f_u[p] if still else out[p], 0, m + 2 * g)"),
        ("copy_plane(w, f_u[p] if still else _walls2[p])", "copy_plane(w, L, f_u[p] if still else _walls2[p], 0, m + 2 * g)"),
        ("copy_plane(w, f_u[p] if still else _walls3[p])", "copy_plane(w, L, f_u[p] if still else _walls3[p], 0, m + 2 * g)"),
        ("middle(w, f_u[p - 1], f_u[p], f_u[p + 1], f_u[p] if still else out[p], coef, g, wx, wy, fac2,",
         "middle(w, L, f_u[p - 1], f_u[p], f_u[p + 1], 0, f_u[p] if still else out[p], 0, coef, g, m, wx, wy, fac2,"),
    ]
    for s, holder, fac in ((0, "_walls2", "fac3"), (1, "_walls3", "fac4")):
        planes = f"mid[{s}, (p - 1) % 3], mid[{s}, p % 3], mid[{s}, (p + 1) % 3]"
        swaps.append((f"middle(w, {planes}, mid[{s}, p % 3] if still else {holder}[p], coef, g, wx, wy, {fac},",
                      f"middle(w, L, {planes}, L, mid[{s}, p % 3] if still else {holder}[p], L if still else 0, "
                      f"coef, g, m, wx, wy, {fac},"))
    for name, rows, col in (("w_m1", "i", "g"), ("w_p0", "i - 1", "g"), ("w_p0", "i", "g - 1"), ("w_p0", "i", "g"), ("w_p0", "i", "g + 1"),
                            ("w_p0", "i + 1", "g"), ("w_p1", "i", "g")):
        swaps.append((f"{name}[{rows}, {col}:{col} + m]", f"{name}[{rows}, L + {col}:L + {col} + m]"))
    for a, b in swaps:
        assert a in src, a
        src = src.replace(a, b)
    return src


def heat3d() -> dict:
    setup = problems.build("heat3d", shape=(256, 256, 256), dtype="float32")
    grid, sweep = setup.grid, setup.sweep
    (u,) = sweep.stencil_inputs
    be = nc.NumbaBackend()
    steps = nc.FUSED_STEPS_3D
    carriers = tuple(nc.fused_walls(s, sweep.out) for s in range(2, steps))
    walls = nc.fused_wall_args(steps, 3)
    src = nc.fused_source(sweep, steps)
    runs = {label: be._bound(s, sweep, grid, sweep.out, walls=walls, carriers=carriers)[0]
            for label, s in (("pass", src), ("planes_in_cache", in_cache(src)), ("aligned_ring", aligned_ring(src)))}
    rng = np.random.default_rng(5)
    base = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in (*sweep.inputs, sweep.out)}
    fields = {}
    for label in runs:
        f = {n: be.field(v, grid.ghost) for n, v in base.items()}
        fields[label] = {**f, **{c: f[u] for c in carriers}}  # walls that stay put: the carriers are the input
        runs[label](fields[label])
    same = bool(np.array_equal(fields["pass"][sweep.out], fields["aligned_ring"][sweep.out]))
    samples = {label: [] for label in runs}
    for r in range(rounds):
        for label in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            t = time.perf_counter()
            for _ in range(2):
                runs[label](fields[label])
            samples[label].append((time.perf_counter() - t) / 2 / steps * 1e3)
    return {"case": f"heat3d 256x256x256 float32, {steps} steps a pass, walls that stay put",
            "aligned_ring_same_bits": same, **{f"ms_per_step_{k}": st.median(v) for k, v in samples.items()},
            **{f"min_ms_per_step_{k}": min(v) for k, v in samples.items()},
            "samples": samples}


def wave3d() -> dict:
    st_ = SweepStepper(problems.build("wave3d", shape=(192, 192, 192), dtype="float32"), nc.NumbaBackend(), LoopOptions())
    st_.compile()
    st_.step.wait()
    f, (a, b) = st_.state(), st_.setup.swap
    name, rw = st_.row_walls

    def kernel():
        st_.step(f)
        f[a], f[b] = f[b], f[a]

    def kernel_with_walls():
        st_.step(f, rw.at(0.1))
        f[a], f[b] = f[b], f[a]

    def z_faces():
        rw.rest(f[name], 0.1)

    parts = (kernel, kernel_with_walls, z_faces)
    samples = {p.__name__: [] for p in parts}
    for p in parts:
        p()
    for _ in range(rounds):
        for p in parts:
            t = time.perf_counter()
            for _ in range(5):
                p()
            samples[p.__name__].append((time.perf_counter() - t) / 5 * 1e3)
    wall_bytes = rw.x.nbytes + rw.y.nbytes + sum(v.nbytes for _, v in rw.rest.parts)
    return {"case": "wave3d 192x192x192 float32 radius 8, single steps, moving walls", "wall_value_bytes": wall_bytes,
            **{f"ms_{k}": st.median(v) for k, v in samples.items()}, **{f"min_ms_{k}": min(v) for k, v in samples.items()},
            "samples": samples}


rows = [heat3d(), wave3d()]
for row in rows:
    print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items() if k != "samples"}, flush=True)
json.dump({"threads": numba.get_num_threads(), "rows": rows}, open(path, "w"), indent=1)
