"""One-off: the time loop with fused passes always against the loop timing both on its first steps and keeping the
faster (the default), interleaved in one process, each run on fresh fields. python benchmarks/pass_choice_loop.py ROUNDS OUT.json"""

import json
import statistics as st
import sys

import stencilforge as sf
from stencilforge import problems
from stencilforge.backends.numba_cpu import NumbaBackend
from stencilforge.bench.loop import gray_scott
from stencilforge.timeloop import LoopOptions, run

CASES = [("heat3d", (256, 256, 256), 200), ("heat2d", (4096, 4096), 200), ("poisson2d", (4096, 4096), 200),
         ("gray_scott", (2048, 2048), 400)]
rounds = int(sys.argv[1])
be = NumbaBackend()
rows = []


def once(name, shape, steps, fuse):
    if name == "gray_scott":
        s = sf.run(gray_scott(shape), backend=be, steps=steps, fuse_steps=fuse).summary
    else:
        s = run(problems.build(name, shape=shape, dtype="float32"), be, LoopOptions(steps=steps, fuse_steps=fuse)).summary
    return s["wall_s"] / steps * 1e3, s.get("steps_per_pass"), s.get("pass_choice")


for name, shape, steps in CASES:
    once(name, shape, 20, "always")  # compile both kernels
    samples = {"always": [], "timed": []}
    chosen = []
    for r in range(rounds):
        for label in (("always", "timed") if r % 2 == 0 else ("timed", "always")):
            ms, per_pass, choice = once(name, shape, steps, "always" if label == "always" else True)
            samples[label].append(ms)
            if label == "timed":
                chosen.append({"steps_per_pass": per_pass, **(choice or {})})
    row = {"case": f"{name} {'x'.join(map(str, shape))} float32", "steps": steps, "ms_per_step_always": st.median(samples["always"]),
           "ms_per_step_timed": st.median(samples["timed"]), "samples_always": samples["always"], "samples_timed": samples["timed"],
           "choices": chosen}
    row["speedup"] = row["ms_per_step_always"] / row["ms_per_step_timed"]
    rows.append(row)
    print(f"{row['case']:28s} always {row['ms_per_step_always']:7.3f}  timed {row['ms_per_step_timed']:7.3f}  x{row['speedup']:.2f}  "
          f"chose {[c['steps_per_pass'] for c in chosen]}", flush=True)
json.dump({"threads": __import__("numba").get_num_threads(), "rows": rows}, open(sys.argv[2], "w"), indent=1)
