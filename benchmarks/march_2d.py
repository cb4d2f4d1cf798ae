"""One-off: numba's 2D several-steps-per-pass kernels, the march (`_march_source`, k steps a pass) against the
two-step kernel it replaces (blocks of 32 rows, the parent commit's `_pair_rows_source`), per step, at 4096²
float32: heat2d, jacobi2d, poisson2d. Each kernel is first checked bit for bit against k NumPy oracle steps;
then interleaved rounds, each the median of 5 batches. Usage (the old module must sit in the package for its
relative imports):
git show PARENT:src/stencilforge/backends/numba_cpu.py > src/stencilforge/backends/numba_cpu_old.py
python benchmarks/march_2d.py src/stencilforge/backends/numba_cpu_old.py OUT.json
"""

import importlib.util
import json
import statistics
import sys
import time

import numba
import numpy as np

import stencilforge.backends.numba_cpu as nc
from stencilforge.backends.base import fused_walls, with_walls
from stencilforge.backends.numpy_ref import evaluate_sweep
from stencilforge.bench.workloads import Workload, build_case


def load(source: str, name: str):
    path = f"/tmp/march_2d_{name}.py"
    with open(path, "w") as f:
        f.write(source.replace("cache=True, ", ""))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kernel


def old_pair_source(path: str, sweep) -> str:
    spec = importlib.util.spec_from_file_location("stencilforge.backends.numba_cpu_old", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fused_source(sweep, 2)


def main(old_path: str, out_path: str) -> None:
    result = {"shape": [4096, 4096], "dtype": "float32", "threads": numba.get_num_threads(), "numba": numba.__version__,
              "rows": {}}
    for name in ("heat2d", "jacobi2d", "poisson2d"):
        case = build_case(Workload(name, (4096, 4096), "float32"))
        sweep, grid, fields = case.plan, case.grid, dict(case.fields)
        (u,) = sweep.stencil_inputs
        fields[sweep.out][...] = fields[u]  # static walls: every state's ghosts are u's
        coef = nc.sweep_coefficients(sweep, grid.dtype)
        variants = {"pair, blocks of 32 rows (before)": (load(old_pair_source(old_path, sweep), f"{name}_pair"), 2, ())}
        for k in (2, 4, 6, 8):
            variants[f"march, {k} steps"] = (load(nc.fused_source(sweep, k), f"{name}_m{k}"), k, (numba.get_num_threads(),))
        for label, (kernel, k, extra) in variants.items():
            f = {n: a.copy() for n, a in fields.items()}
            fw = with_walls(f, sweep, k)
            names = (sweep.out, *sweep.inputs, *(fused_walls(s, sweep.out) for s in range(2, k)))
            kernel(*(fw[n] for n in names), coef, grid.ghost, *extra)
            ref = {n: a.copy() for n, a in fields.items()}
            for _ in range(k):
                nxt = ref[sweep.out].copy()
                nxt[grid.interior] = evaluate_sweep(sweep, grid, ref)
                ref[sweep.out], ref[u] = ref[u], nxt
            assert np.array_equal(fw[sweep.out][grid.interior], ref[u][grid.interior]), f"{name} {label}"
        samples: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(7):
            for label, (kernel, k, extra) in variants.items():
                fw = with_walls(fields, sweep, k)
                args = [fw[n] for n in (sweep.out, *sweep.inputs, *(fused_walls(s, sweep.out) for s in range(2, k)))]
                batches = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    for _ in range(2):
                        kernel(*args, coef, grid.ghost, *extra)
                    batches.append((time.perf_counter() - t0) / 2 / k * 1e3)
                samples[label].append(statistics.median(batches))
        result["rows"][name] = {k: {"median_ms_per_step": statistics.median(v), "rounds": v} for k, v in samples.items()}
        for k, v in samples.items():
            print(f"{name:10s} {k:34s} {statistics.median(v):7.3f} ms a step", flush=True)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
