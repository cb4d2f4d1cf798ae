"""One-off: the examples whose passes call sin, cos or exp on coordinates and t only (advection_diffusion's velocity and
forcing, variable_diffusion's forcing), numba, float64, ms a step through sf.run, before and after those terms are
hoisted out of the kernel and computed by NumPy's oracle (once, or each pass where they read t). Each tree runs in a
process of its own, rounds alternating; the kernels are compiled before the clock starts. The tree before comes from
`git worktree add /tmp/before HEAD~1`; python benchmarks/hoisted_terms.py /tmp/before/src ROUNDS OUT.json"""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

before, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
after = str(Path(__file__).resolve().parents[1] / "src")
examples = Path(__file__).resolve().parents[1] / "examples"
CASES = [("advection_diffusion", (256, 256), 300), ("advection_diffusion", (1024, 1024), 40),
         ("variable_diffusion", (128, 128), 1000), ("variable_diffusion", (512, 512), 100)]

CHILD = """
import json, sys
import numpy as np
import stencilforge as sf
from stencilforge.convergence import load_problem_file
path, shape, steps = json.loads(sys.argv[1])
problem = load_problem_file(path).build(shape=tuple(shape))
sf.run(problem, steps=20, backend="numba", fuse_steps=False).summary  # compiles (or loads) every kernel it takes
import threading
for thread in threading.enumerate():
    if thread.name == "stencilforge-compile":
        thread.join()
s = sf.run(problem, steps=steps, backend="numba").summary
ref = sf.run(problem, steps=20, backend="numpy").fields
got = sf.run(problem, steps=20, backend="numba").fields
print(json.dumps({"ms": s["wall_s"] / s["steps"] * 1e3, "bitwise": all(bool(np.array_equal(ref[k], got[k])) for k in ref)}))
"""

samples: dict = {}
for r in range(rounds):
    for label in ("before", "after") if r % 2 == 0 else ("after", "before"):
        for name, shape, steps in CASES:
            env = dict(os.environ, PYTHONPATH=before if label == "before" else after)
            arg = json.dumps([str(examples / f"{name}.py"), shape, steps])
            res = subprocess.run([sys.executable, "-c", CHILD, arg], env=env, capture_output=True, text=True, check=True)
            row = json.loads(res.stdout.strip().splitlines()[-1])
            samples.setdefault(f"{name} {shape[0]}x{shape[1]}", {}).setdefault(label, []).append(row)
            print(label, name, shape, row, flush=True)
summary = {case: {label: statistics.median(x["ms"] for x in runs) for label, runs in by.items()} for case, by in samples.items()}
for m in summary.values():
    m["speedup"] = m["before"] / m["after"]
print(json.dumps(summary, indent=1))
json.dump({"unit": "ms a step, numba, float64, sf.run", "medians": summary, "samples": samples,
           "load_average": list(os.getloadavg())}, open(out, "w"), indent=1)
