"""One-off: the time loop's rows (`stencilforge bench`'s loop rows, `bench.loop.measure_loop`) for heat2d 4096^2,
whose walls move in time, and poisson2d (static walls, as a control), in this tree. Run it from two checkouts
(before and after a change), alternating processes, and merge the printed JSON lines:
python benchmarks/loop_walls_2d.py REPEATS >> OUT.jsonl
"""

import json
import sys

from stencilforge.bench.loop import LoopWorkload, measure_loop

if __name__ == "__main__":
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    for name in ("heat2d", "poisson2d"):
        row = measure_loop(LoopWorkload(name, (4096, 4096)), "numba", repeats, 1.0)
        print(json.dumps({k: row[k] for k in ("problem", "loop_ms", "kernel_ms", "overhead", "overhead_min", "steps",
                                               "fused_steps", "loop_samples_ms", "kernel_samples_ms")}))
