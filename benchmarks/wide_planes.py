"""One-off: numba's wide 3D kernel compiled for its shape evaluating k output planes a pass (WIDE_PLANES), which share
their loads along axis 0, against one plane a pass (the kernel before), wave3d r8 192^3 float32, interleaved in one
process on the same fields, with and without the loop's float64 walls. Checked first: the same bits (out and the walls
written into u). The kernel before comes from
git show HEAD~1:src/stencilforge/backends/numba_cpu.py > src/stencilforge/backends/_previous_wide.py
then python benchmarks/wide_planes.py ROUNDS OUT.json K (NUMBA_NUM_THREADS=1 for one thread)."""

import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import numba_cpu as nb


def run_ab(variant, src_a=None, rounds=11, n=192, reps=3, label="B", out=None):
    setup = problems.build("wave3d", shape=(n, n, n), dtype="float32", radius=8)
    grid, sweep = setup.grid, setup.sweep
    be = nb.NumbaBackend()
    src_a = src_a(sweep, grid) if src_a else nb.sweep_source(sweep, False, nb.constant_shape(grid))
    src_b = variant(src_a) if variant else nb.sweep_source(sweep, False, nb.constant_shape(grid))
    assert src_a != src_b
    runs = {k: be._bound(s, sweep, grid, sweep.out, walls=nb.wall_args(3))[0] for k, s in (("A", src_a), (label, src_b))}
    rng = np.random.default_rng(3)
    base = {k: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for k in sweep.inputs}
    g, (n0, n1, n2) = grid.ghost, grid.shape
    walls = (rng.uniform(-1, 1, (n0, n1, 2 * g)), rng.uniform(-1, 1, (n0, 2 * g, n2 + 2 * g)), 0.7)
    got = {}
    for k, r in runs.items():
        f = {kk: be.field(v, g) for kk, v in base.items()}
        r(f, walls)
        got[k] = (f[sweep.out].copy(), f[sweep.stencil_inputs[0]].copy())
    same = all(np.array_equal(a, b) for a, b in zip(got["A"], got[label]))
    res = {}
    for ww in (False, True):
        fields = {k: {kk: be.field(v, g) for kk, v in base.items()} for k in runs}
        samples = {k: [] for k in runs}
        for r in range(rounds):
            for k in list(runs) if r % 2 == 0 else list(runs)[::-1]:
                t = time.perf_counter()
                for _ in range(reps):
                    runs[k](fields[k], walls if ww else None)
                samples[k].append((time.perf_counter() - t) / reps * 1e3)
        med = {k: st.median(v) for k, v in samples.items()}
        mn = {k: min(v) for k, v in samples.items()}
        print("  min: " + "  ".join(f"{k} {v:.3f}" for k, v in mn.items()) + f"  x{mn['A'] / mn[label]:.3f}")
        print(
            f"walls={ww}: " + "  ".join(f"{k} {v:.3f}" for k, v in med.items()) + f"  x{med['A'] / med[label]:.3f} same={same}", flush=True
        )
        res[str(ww)] = {"medians": med, "samples": samples}
    if out:
        json.dump({"n": n, "same_bits": same, "rows": res}, open(out, "w"), indent=1)


if __name__ == "__main__":
    from stencilforge.backends import _previous_wide as old

    nb.WIDE_PLANES = int(sys.argv[3])
    run_ab(
        None,
        src_a=lambda sw, gr: old.sweep_source(sw, False, old.constant_shape(gr)),
        label=f"planes{sys.argv[3]}",
        rounds=int(sys.argv[1]),
        out=sys.argv[2],
    )
