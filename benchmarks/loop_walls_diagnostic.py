# ruff: noqa  (a diagnostic as it ran; removed in the next commit)
"""Diagnostic (kept in the commit that used it, then removed): the numba time loop's per-step cost split into the
kernel, the wall fill alone, both together, and the stepper's advance, for heat3d 256^3 and wave3d 192^3 float32 (single
steps). Medians of 5 rounds of 20 steps, milliseconds."""
import time, statistics, numpy as np, sys
sys.path.insert(0, "src")
from stencilforge import problems
from stencilforge.backends import get_backend
from stencilforge.timeloop import LoopOptions, SweepStepper
eng = get_backend("numba")
for name, shape in (("wave3d", (192,) * 3), ("heat3d", (256,) * 3)):
    st = SweepStepper(problems.build(name, shape=shape, dtype="float32"), eng, LoopOptions(fuse_steps=False))
    st.compile(); st.warm()
    f = st.state(); a, b = st.setup.swap
    res = {"kernel": [], "kernel+fill": [], "fill": [], "advance": []}
    n = 0
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(20):
            st.step(f); f[a], f[b] = f[b], f[a]
        res["kernel"].append((time.perf_counter() - t0) / 20)
        t0 = time.perf_counter()
        for k in range(20):
            for nm, fill in st.dynamic:
                fill(f[nm], 0.1 + k * 1e-3)
            st.step(f); f[a], f[b] = f[b], f[a]
        res["kernel+fill"].append((time.perf_counter() - t0) / 20)
        t0 = time.perf_counter()
        for k in range(20):
            for nm, fill in st.dynamic:
                fill(f[nm], 0.1 + k * 1e-3)
        res["fill"].append((time.perf_counter() - t0) / 20)
        t0 = time.perf_counter()
        for _ in range(20):
            n += st.advance(n, False)
        res["advance"].append((time.perf_counter() - t0) / 20)
    print(name, {k: round(statistics.median(v) * 1e3, 2) for k, v in res.items()}, [nm for nm, _ in st.dynamic], len(st.setup.sources))
