"""The seed problems before and after their rewrite on the equation API, on one GPU.

Run once per source tree (PYTHONPATH selects it); prints one JSON line per
workload: the hash of the CUDA module `auto` builds for its sweep (same hash,
same machine code) and the kernel time per step from the time loop's CUDA
events, median of 3 runs. Usage: PYTHONPATH=TREE python3 benchmarks/seed_rewrite_check.py LABEL
"""

import hashlib
import json
import statistics
import sys

from stencilforge import problems
from stencilforge.backends.cuda import CudaBackend, codegen
from stencilforge.backends.cuda.backend import resolve
from stencilforge.timeloop import LoopOptions, run

CASES = [
    ("heat2d", dict(shape=(16384, 16384), dtype="float32"), 200),
    ("heat3d", dict(shape=(512, 512, 512), dtype="float32"), 60),
    ("wave3d", dict(shape=(512, 512, 512), dtype="float32", radius=8), 30),
    ("poisson2d", dict(shape=(8192, 8192), dtype="float64"), 200),
]

label = sys.argv[1]
for name, kw, steps in CASES:
    setup = problems.build(name, **kw)
    be = CudaBackend()
    kernel = resolve(setup.sweep, "auto", None, setup.grid.shape, setup.grid.dtype, be.device_name)
    source = codegen.module_source([kernel], setup.grid.dtype, "check")
    per_step = []
    for _ in range(3):
        res = run(problems.build(name, **kw), be, LoopOptions(steps=steps))
        per_step.append(res.summary["kernel_s"] / steps)
    print(json.dumps({"tree": label, "problem": name, "shape": kw["shape"], "strategy": kernel.strategy,
                      "module_sha256": hashlib.sha256(source.encode()).hexdigest()[:16],
                      "kernel_ms_per_step": 1e3 * statistics.median(per_step)}), flush=True)
