"""A/B of the numba backend's fill of scaled Dirichlet walls (value(x) f(t)): NumPy's multiply per face box
against Numba's parallel writer, through the bench's time-loop rows (loop against its kernels alone), in
alternating rounds. Usage: python benchmarks/wall_fill_ab.py OUT.json"""

import json
import os
import subprocess
import sys

from stencilforge.backends.numba_cpu import NumbaBackend
from stencilforge.bench.loop import LoopWorkload, measure_loop
from stencilforge.boundary import scale_with_numpy

WRITERS = {"numpy": staticmethod(scale_with_numpy), "numba": staticmethod(NumbaBackend.scale_walls)}
rows = []
for rnd in range(3):
    for writer in ("numpy", "numba"):
        NumbaBackend.scale_walls = WRITERS[writer]
        for name, shape in (("heat3d", (256, 256, 256)), ("wave3d", (192, 192, 192))):
            r = measure_loop(LoopWorkload(name, shape), "numba", 5, 1.0)
            rows.append({"round": rnd, "writer": writer, **r})
            print(rnd, writer, name, f"loop {r['loop_ms']:.2f} kernels {r['kernel_ms']:.2f} ms  {r['overhead']:+.1%}", flush=True)
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
json.dump({"command": "python benchmarks/wall_fill_ab.py OUT.json", "commit": f"{commit} + working tree",
           "cpu_count": os.cpu_count(), "rows": rows}, open(sys.argv[1], "w"), indent=1)
