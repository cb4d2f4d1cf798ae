"""One-off: a user's own equation (the bench's Gray-Scott, 2048^2 float32, numba) from a fresh process to its first step,
on empty caches and on the caches that run left, before and after NumPy's oracle takes a generated pass's first steps
while its kernel compiles; beside Devito's Operator for the same two updates (fresh TMPDIR: an empty jit cache).
Rounds interleave the three. The tree before comes from `git worktree add /tmp/before HEAD~1`;
python benchmarks/coldstart_equations.py /tmp/before/src ROUNDS OUT.json"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

before, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
after = str(Path(__file__).resolve().parents[1] / "src")

OURS = """
import json
from stencilforge.bench.coldstart import cold_start
from stencilforge.bench.loop import LoopWorkload
row = cold_start(LoopWorkload("gray_scott", (2048, 2048)), "numba")
print(json.dumps({k: row[k] for k in ("cold", "warm")}))
"""

DEVITO = """
import time
t0 = time.perf_counter()
import numpy as np
from devito import Eq, Grid, Operator, TimeFunction
n = 2048
grid = Grid(shape=(n, n), extent=(2.5, 2.5), dtype=np.float32)
u, v = (TimeFunction(name=s, grid=grid, space_order=2) for s in "uv")
dt = min(1.0, 0.24 * (2.5 / (n - 1)) ** 2 / 2e-5)
rng = np.random.default_rng(0)
u.data[0] = 1.0 - 0.5 * rng.random((n, n))
v.data[0] = 0.25 * rng.random((n, n))
uvv = u * v * v
op = Operator([Eq(u.forward, u + dt * (2e-5 * u.laplace - uvv + 0.04 * (1 - u))),
               Eq(v.forward, v + dt * (1e-5 * v.laplace + uvv - (0.04 + 0.06) * v))])
op.apply(time_M=0, dt=dt)
print(time.perf_counter() - t0)
"""


def ours(src: str) -> dict:
    env = dict(os.environ, PYTHONPATH=src)
    res = subprocess.run([sys.executable, "-c", OURS], env=env, capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def devito() -> dict:
    with tempfile.TemporaryDirectory(prefix="devito-cold-") as tmp:
        env = dict(os.environ, TMPDIR=tmp, DEVITO_LOGGING="ERROR")
        runs = [subprocess.run([sys.executable, "-c", DEVITO], env=env, capture_output=True, text=True, check=True) for _ in range(2)]
        return {"cold": {"to_first_step_s": float(runs[0].stdout)}, "warm": {"to_first_step_s": float(runs[1].stdout)}}


samples: dict = {"before": [], "after": [], "devito": []}
for r in range(rounds):
    for label in ("before", "after", "devito") if r % 2 == 0 else ("devito", "after", "before"):
        start = time.perf_counter()
        row = devito() if label == "devito" else ours(before if label == "before" else after)
        samples[label].append(row)
        print(label, {k: round(v["to_first_step_s"], 2) for k, v in row.items()}, f"{time.perf_counter() - start:.1f} s", flush=True)
summary = {label: {kind: statistics.median(run[kind]["to_first_step_s"] for run in runs) for kind in ("cold", "warm")}
           for label, runs in samples.items()}
print(json.dumps(summary))
json.dump({"case": "gray_scott 2048x2048 float32, numba, fresh process to its first step (s)", "medians": summary,
           "samples": samples, "load_average": list(os.getloadavg())}, open(out, "w"), indent=1)
