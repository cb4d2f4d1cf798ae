"""One-off: numba's 3D march (several steps a pass) with each task's planes cut into tiles of rows along
axis 1, so a task's rings of middle planes stay in L2, against the march over whole planes (the commit before) and
the single-step kernel, heat3d 256^3 float32, interleaved in one process on the same fields. Checked first: every
tiled pass equals the whole-plane pass's bits. The kernels before come from
git show HEAD~1:src/stencilforge/backends/numba_cpu.py > src/stencilforge/backends/_previous_march.py
then python benchmarks/march_tiles.py ROUNDS OUT.json N0,N1,N2 STEPS,... TILES,... [walls]."""

import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import _previous_march as old, numba_cpu as new

rounds = int(sys.argv[1])
shape = tuple(int(v) for v in (sys.argv[3] if len(sys.argv) > 3 else "256,256,256").split(","))
setup = problems.build("heat3d", shape=shape, dtype="float32")
grid, sweep = setup.grid, setup.sweep
be = new.NumbaBackend()
variants = {"single": (old, 1, None)}
STEPS, TILES = tuple(int(v) for v in sys.argv[4].split(",")), tuple(int(v) for v in sys.argv[5].split(","))
for steps in STEPS:
    variants[f"whole s{steps}"] = (old, steps, None)
    for tile in TILES:
        variants[f"tile{tile} s{steps}"] = (new, steps, tile)
runs = {}
for label, (mod, steps, tile) in variants.items():
    if tile:
        mod.MARCH_TILE_CELLS = tile * grid.padded_shape[2]
    src = mod.sweep_source(sweep, False) if steps == 1 else mod.fused_source(sweep, steps)
    carriers = tuple(mod.fused_walls(s, sweep.out) for s in range(2, steps))
    walls = (mod.wall_args(grid.ndim) if steps == 1 else mod.fused_wall_args(steps, grid.ndim)) if mod.writes_walls(sweep) else ()
    runs[label] = (be._bound(src, sweep, grid, sweep.out, walls=walls, carriers=carriers)[0], steps)
rng = np.random.default_rng(3)
names = {*sweep.inputs, sweep.out, *(new.fused_walls(s, sweep.out) for s in range(2, max(STEPS)))}
base = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in names}
fields = {label: {n: be.field(v, grid.ghost) for n, v in base.items()} for label in runs}
same = {}
for label, (run, steps) in runs.items():
    run(fields[label])
    if not label.startswith(("whole", "single")):
        ref = fields[f"whole s{steps}"][sweep.out]
        same[label] = bool(np.array_equal(fields[label][sweep.out][grid.interior], ref[grid.interior]))
g, (n0, n1, n2) = grid.ghost, grid.shape
wx = rng.uniform(-1, 1, (n0, n1, 2 * g)).astype(grid.dtype)
wy = rng.uniform(-1, 1, (n0, 2 * g, n2 + 2 * g)).astype(grid.dtype)
if len(sys.argv) > 6:  # with the walls the time loop passes (heat3d's move in time): x and y values, a factor a state
    bare = runs
    runs = {f"{label} walls": (lambda f, run=run, steps=steps: run(f, (wx, wy, *[0.5 + 0.1 * k for k in range(steps)])), steps)
            for label, (run, steps) in bare.items()}
    fields = {f"{label} walls": f for label, f in fields.items()}
samples = {label: [] for label in runs}
order = list(runs)
for r in range(rounds):
    for label in (order if r % 2 == 0 else order[::-1]):
        run, steps = runs[label]
        t = time.perf_counter()
        for _ in range(3):
            run(fields[label])
        samples[label].append((time.perf_counter() - t) / 3 / steps * 1e3)
rows = [{"variant": label, "ms_per_step": st.median(s), "samples": s, "bits_equal_whole": same.get(label)} for label, s in samples.items()]
for row in rows:
    print(f"{row['variant']:20s} {row['ms_per_step']:7.3f} ms/step  bits {row['bits_equal_whole']}", flush=True)
json.dump({"case": f"heat3d {'x'.join(map(str, shape))} float32", "threads": __import__("numba").get_num_threads(), "rows": rows},
          open(sys.argv[2], "w"), indent=1)
