"""One-off: numba's wide 3D kernel (`_wide_source`) before and after flat ranges over tiles of rows, wave3d r8.

Before: the kernel at the parent commit (tiles of 32 rows per task, a loop per row, 30 views per loop).
After: tasks of planes, tiles of Y_TILE rows, one flat range per tile's plane, WIDE_LOOP_VIEWS views per loop,
at several values of both. Each kernel is first checked bit for bit against the NumPy oracle; then rounds
interleave the variants, each timed as the median of 5 batches of calls. Usage:
git show PARENT:src/stencilforge/backends/numba_cpu.py > src/stencilforge/backends/numba_cpu_old.py
python benchmarks/wave3d_flat.py src/stencilforge/backends/numba_cpu_old.py OUT.json [N]
"""

import importlib.util
import json
import platform
import statistics
import sys
import time

import numba
import numpy as np

import stencilforge.backends.numba_cpu as nc
from stencilforge.backends.numpy_ref import evaluate_sweep
from stencilforge.bench.workloads import Workload, build_case


def load(source: str, name: str):
    path = f"/tmp/wave3d_flat_{name}.py"
    with open(path, "w") as f:
        f.write(source.replace("cache=True, ", ""))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kernel


def old_source(path: str, sweep) -> str:
    """The parent commit's kernel source, printed by its own module (imported in the package's place)."""
    spec = importlib.util.spec_from_file_location("stencilforge.backends.numba_cpu_old", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.sweep_source(sweep, reduce=False)


def main(old_path: str, out_path: str, n: int = 192) -> None:
    case = build_case(Workload("wave3d", (n, n, n), "float32"))
    sweep, grid, fields = case.plan, case.grid, dict(case.fields)
    g = grid.ghost
    coef = nc.sweep_coefficients(sweep, grid.dtype)
    ref = np.asarray(evaluate_sweep(sweep, grid, fields))
    none = (np.zeros((0, 0, 0)), np.zeros((0, 0, 0)), 0.0)
    variants = {"before": load(old_source(old_path, sweep), "before")}
    for views in (10, 14, 18, 22):
        for tile in (16, 32):
            nc.WIDE_LOOP_VIEWS, nc.Y_TILE = views, tile
            variants[f"views {views} tile {tile}"] = load(nc.sweep_source(sweep, reduce=False), f"v{views}t{tile}")
    out = np.empty_like(fields["u"])
    for name, kernel in variants.items():
        out[...] = np.nan
        kernel(out, fields["u"], fields["u_prev"], fields["vel"], coef, g, *none, numba.get_num_threads())
        assert np.array_equal(out[grid.interior], ref), f"{name}: not the oracle's bits"
    samples: dict[str, list[float]] = {k: [] for k in variants}
    nt = numba.get_num_threads()
    for _ in range(9):
        for name, kernel in variants.items():
            batches = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(4):
                    kernel(out, fields["u"], fields["u_prev"], fields["vel"], coef, g, *none, nt)
                batches.append((time.perf_counter() - t0) / 4 * 1e3)
            samples[name].append(statistics.median(batches))
    rows = {k: {"median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v), "rounds_ms": v} for k, v in samples.items()}
    result = {"workload": f"wave3d r8 {n}^3 float32, one sweep call without walls", "threads": nt,
              "machine": platform.processor() or platform.machine(), "numba": numba.__version__, "rows": rows,
              "bitwise_equal_to_oracle": True}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    for k, v in rows.items():
        print(f"{k:22s} {v['median_ms']:8.3f} ms  (min {v['min_ms']:.3f}, max {v['max_ms']:.3f})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(a) for a in sys.argv[3:]))
