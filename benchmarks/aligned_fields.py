"""One-off: numba kernels on fields where NumPy places them against fields whose first interior cell starts a
64-byte line (`numba_cpu.aligned_field`), in alternating rounds, one process, the same steps (bits compared).

    python benchmarks/aligned_fields.py OUT.json [ROUNDS]
"""

import json
import platform
import statistics
import sys
import time

import numpy as np

from stencilforge import problems
from stencilforge.backends import get_backend
from stencilforge.backends.numba_cpu import aligned_field
from stencilforge.timeloop import LoopOptions, SweepStepper

CASES = (("wave3d", (192, 192, 192), False), ("heat3d", (256, 256, 256), False), ("heat3d", (256, 256, 256), True),
         ("heat2d", (4096, 4096), True))


def runner(st, fused):
    walls = st.row_walls
    if fused:
        k = st.fused
        return lambda f: k(st.with_walls(f), *([walls[1].at(*(0.0,) * k.steps)] if walls is not None else [])), k.steps
    return lambda f: st.step(f, *([walls[1].at(0.0)] if walls is not None else [])), 1


def main(out: str, rounds: int = 15) -> None:
    eng = get_backend("numba")
    rows = []
    for name, shape, fused in CASES:
        st = SweepStepper(problems.build(name, shape=shape, dtype="float32"), eng, LoopOptions())
        st.compile()
        while not st.step.ready() or (fused and not st.fused.ready()):
            time.sleep(0.5)
        run, steps = runner(st, fused)
        g = st.setup.grid.ghost
        placed = {k: np.ascontiguousarray(v.copy()) for k, v in st.state().items()}
        lined = {k: aligned_field(v, g) for k, v in placed.items()}
        offsets = {k: (v.ctypes.data + int(np.ravel_multi_index((g,) * v.ndim, v.shape)) * v.itemsize) % 64
                   for k, v in placed.items()}
        a, b = ({k: v.copy() for k, v in placed.items()}, {k: aligned_field(v, g) for k, v in placed.items()})
        run(a)
        run(b)
        same = all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
        times = {"numpy": [], "aligned": []}
        for _ in range(rounds):
            for label, f in (("numpy", placed), ("aligned", lined)):
                t = time.perf_counter()
                for _ in range(4):
                    run(f)
                times[label].append((time.perf_counter() - t) / 4 / steps * 1e3)
        row = {"problem": name, "shape": list(shape), "steps_per_call": steps, "same_bits": same,
               "numpy_interior_offset_bytes": offsets,
               **{f"{k}_ms_median": statistics.median(v) for k, v in times.items()},
               **{f"{k}_ms_min": min(v) for k, v in times.items()}, "samples_ms": times}
        rows.append(row)
        print(f"{name} {shape} x{steps}: numpy {row['numpy_ms_median']:.3f} (min {row['numpy_ms_min']:.3f})"
              f" aligned {row['aligned_ms_median']:.3f} (min {row['aligned_ms_min']:.3f}) ms/step, same bits {same}",
              flush=True)
    with open(out, "w") as fh:
        json.dump({"cpu": platform.processor() or platform.machine(), "rounds": rounds, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], *(int(x) for x in sys.argv[2:3]))
