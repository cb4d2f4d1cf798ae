"""One-off: the wide 3D kernel (wave3d r8 192^3 float32) with its loops over a tile-plane's flat range cut into chunks
that stay in L1, against today's, interleaved in one process on the same fields, the same bits checked first.
python benchmarks/wave3d_chunks.py ROUNDS OUT.json (each results file: a subset of VARIANTS, run one thread;
"contract" lets LLVM fuse multiplies and adds, so its bits differ)."""
import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import numba_cpu as nc

VARIANTS = {"base": dict(WIDE_CHUNK=0, Y_TILE=32), "c1024": dict(WIDE_CHUNK=1024, Y_TILE=32),
            "c2048": dict(WIDE_CHUNK=2048, Y_TILE=32), "c4096": dict(WIDE_CHUNK=4096, Y_TILE=32),
            "c2048y64": dict(WIDE_CHUNK=2048, Y_TILE=64), "c2048y96": dict(WIDE_CHUNK=2048, Y_TILE=96),
            "v18c2048y64": dict(WIDE_CHUNK=2048, Y_TILE=64, WIDE_LOOP_VIEWS=18),
            "v10c2048y64": dict(WIDE_CHUNK=2048, Y_TILE=64, WIDE_LOOP_VIEWS=10), "contract": dict(WIDE_CHUNK=0, Y_TILE=32),
            "y16": dict(WIDE_CHUNK=0, Y_TILE=16), "v24": dict(WIDE_LOOP_VIEWS=24), "v52": dict(WIDE_LOOP_VIEWS=60)}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
be = nc.NumbaBackend()
setup = problems.build("wave3d", shape=(192, 192, 192), dtype="float32", radius=8)
grid, sweep = setup.grid, setup.sweep
walls = nc.wall_args(grid.ndim) if nc.writes_walls(sweep) else ()
defaults = dict(WIDE_CHUNK=nc.WIDE_CHUNK, Y_TILE=nc.Y_TILE, WIDE_LOOP_VIEWS=nc.WIDE_LOOP_VIEWS)
runs = {}
for label, kw in VARIANTS.items():
    for k, v in {**defaults, **kw}.items():
        setattr(nc, k, v)
    src = nc.sweep_source(sweep, False)
    if label == "contract":
        src = src.replace("nogil=True)", "nogil=True, fastmath={'contract'})", 1)
    runs[label] = be._bound(src, sweep, grid, sweep.out, walls=walls)[0]
rng = np.random.default_rng(3)
base = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in sweep.inputs}
base.setdefault(sweep.out, rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype))
fields = {label: {n: be.field(v, grid.ghost) for n, v in base.items()} for label in runs}
ref = None
same = {}
for label, run in runs.items():
    f = {n: be.field(v, grid.ghost) for n, v in base.items()}
    run(f)
    got = f[sweep.out][grid.interior].copy()
    ref = got if ref is None else ref
    same[label] = bool(np.array_equal(ref, got))
samples = {label: [] for label in runs}
order = list(runs)
for r in range(rounds):
    for label in (order if r % 2 == 0 else order[::-1]):
        run, f = runs[label], fields[label]
        t = time.perf_counter()
        for _ in range(3):
            run(f)
        samples[label].append((time.perf_counter() - t) / 3 * 1e3)
rows = []
for label in runs:
    m = st.median(samples[label])
    rows.append({"variant": label, **{**defaults, **VARIANTS[label]}, "same_bits": same[label], "ms_per_step": m,
                 "samples": samples[label], "speedup": st.median(samples["base"]) / m})
    print(f"{label:12s} {m:8.3f} ms  x{rows[-1]['speedup']:.2f}  same {same[label]}", flush=True)
json.dump({"threads": __import__("numba").get_num_threads(), "rows": rows}, open(sys.argv[2] if len(sys.argv) > 2 else "chunks.json", "w"), indent=1)
