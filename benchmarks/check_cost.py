"""One-off: the time loop's checks on poisson2d 4096^2 float32 (numba, every 100 steps, with a residual): the NaN test
and the residual each check (before) against the residual alone while it is finite (after), interleaved runs in one
process, each check's time from Monitor.after. python benchmarks/check_cost.py ROUNDS OUT.json"""

import json
import statistics as st
import sys
import time

from stencilforge import problems, timeloop
from stencilforge.backends.numba_cpu import NumbaBackend
from stencilforge.timeloop import LoopOptions, run

rounds = int(sys.argv[1])
be = NumbaBackend()
sees = timeloop.residual_sees
after = timeloop.Monitor.after
checks: list[float] = []


def timed_after(self, n):
    start = time.perf_counter()
    reason = after(self, n)
    if self.checked(n):
        checks.append(time.perf_counter() - start)
    return reason


timeloop.Monitor.after = timed_after
opts = LoopOptions(steps=400, check_every=100, tol=1e-30, stall_checks=0)
run(problems.build("poisson2d", shape=(4096, 4096)), be, LoopOptions(steps=20))
samples = {"before": [], "after": []}
for r in range(rounds):
    for label in (("before", "after") if r % 2 == 0 else ("after", "before")):
        timeloop.residual_sees = sees if label == "after" else (lambda setup: False)
        checks.clear()
        run(problems.build("poisson2d", shape=(4096, 4096)), be, opts)
        samples[label] += [c * 1e3 for c in checks]
row = {label: {"ms_per_check_median": st.median(v), "samples_ms": v} for label, v in samples.items()}
print({label: round(v["ms_per_check_median"], 2) for label, v in row.items()})
case = "poisson2d 4096x4096 float32, numba, 400 steps, checks every 100"
json.dump({"machine": "2-core Xeon (Emerald Rapids KVM guest, AVX-512), 2 threads", "case": case, **row}, open(sys.argv[2], "w"), indent=1)
