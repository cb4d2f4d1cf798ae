"""One-off: each numba sweep kernel with and without `wide_vectors()` (512-bit vectors), interleaved in one process on
the same fields, the same bits checked first. python benchmarks/vector_width.py ROUNDS OUT.json (NUMBA_NUM_THREADS=1 for one thread)."""
import json
import statistics as st
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends.numba_cpu import (
    FUSED_STEPS_2D,
    FUSED_STEPS_3D,
    NumbaBackend,
    fused_source,
    fused_wall_args,
    fused_walls,
    sweep_source,
    wall_args,
    writes_walls,
)

CASES = [("wave3d", (192, 192, 192), 1), ("heat3d", (256, 256, 256), 1), ("heat3d", (256, 256, 256), FUSED_STEPS_3D),
         ("heat2d", (4096, 4096), 1), ("heat2d", (4096, 4096), FUSED_STEPS_2D), ("poisson2d", (4096, 4096), FUSED_STEPS_2D),
         ]
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 11
be = NumbaBackend()
out = []
for name, shape, steps in CASES:
    kw = {"radius": 8} if name == "wave3d" else {}
    setup = problems.build(name, shape=shape, dtype="float32", **kw)
    grid, sweep = setup.grid, setup.sweep
    new = sweep_source(sweep, False) if steps == 1 else fused_source(sweep, steps)
    assert "wide_vectors()" in new
    old = new.replace("wide_vectors()", "pass")
    carriers = tuple(fused_walls(s, sweep.out) for s in range(2, steps)) if steps > 1 else ()
    runs = {}
    for label, src in (("w256", old), ("w512", new)):
        walls = (wall_args(grid.ndim) if steps == 1 else fused_wall_args(steps, grid.ndim)) if writes_walls(sweep) else ()
        runs[label] = be._bound(src, sweep, grid, sweep.out, walls=walls, carriers=carriers)[0]
    rng = np.random.default_rng(3)
    base = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in (*sweep.inputs, *carriers)}
    base.setdefault(sweep.out, rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype))
    results = {}
    for label, run in runs.items():
        f = {n: be.field(v, grid.ghost) for n, v in base.items()}
        run(f)
        results[label] = f[sweep.out][grid.interior].copy()
    same = bool(np.array_equal(results["w256"], results["w512"]))
    fields = {label: {n: be.field(v, grid.ghost) for n, v in base.items()} for label in runs}
    samples = {label: [] for label in runs}
    cpu = {label: [] for label in runs}
    for r in range(rounds):
        for label in (("w256", "w512") if r % 2 == 0 else ("w512", "w256")):
            run, f = runs[label], fields[label]
            t = time.perf_counter(); c = time.process_time()
            for _ in range(3):
                run(f)
            samples[label].append((time.perf_counter() - t) / 3 / steps * 1e3)
            cpu[label].append((time.process_time() - c) / 3 / steps * 1e3)
    row = {"case": f"{name} {'x'.join(map(str, shape))} float32", "steps_per_pass": steps, "same_bits": same,
           "ms_per_step_256": st.median(samples["w256"]), "ms_per_step_512": st.median(samples["w512"]),
           "samples_256": samples["w256"], "samples_512": samples["w512"], "cpu_ms_256": st.median(cpu["w256"]), "cpu_ms_512": st.median(cpu["w512"]), "cpu_samples_256": cpu["w256"], "cpu_samples_512": cpu["w512"]}
    row["speedup"] = row["ms_per_step_256"] / row["ms_per_step_512"]
    out.append(row)
    print(f"{row['case']:28s} steps {steps}  256: {row['ms_per_step_256']:7.3f}  512: {row['ms_per_step_512']:7.3f}  x{row['speedup']:.2f} cpu {row['cpu_ms_256']:.3f}/{row['cpu_ms_512']:.3f}  same bits {same}", flush=True)
json.dump(out, open(sys.argv[2] if len(sys.argv) > 2 else "/tmp/exp/inproc.json", "w"), indent=1)
