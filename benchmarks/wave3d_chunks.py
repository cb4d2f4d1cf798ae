"""One-off: numba's wide 3D kernel (`_wide_source`, wave3d r8) with each tile's plane evaluated in chunks of
a few rows, every loop over a chunk before the next chunk, so the partial sums (`part`, `acc`) stay in L1
instead of streaming through L2. Each variant is checked bit for bit against the NumPy oracle; rounds interleave
the variants, each timed as the median of 5 batches of 4 calls. Usage: python benchmarks/wave3d_chunks.py OUT.json
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
    path = f"/tmp/wave3d_chunks_{name}.py"
    with open(path, "w") as f:
        f.write(source.replace("cache=True, ", ""))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kernel


def chunked(source: str, rows: int) -> str:
    """The kernel's source with each tile's plane evaluated `rows` rows at a time: its loops over the flat range
    (`for j in range(n)`) and the copy into `out` wrapped in a loop over chunks. The bounds are unsigned, so
    Numba leaves out its negative-index wraparound (with signed bounds the loops ran 6x slower)."""
    lines = source.split("\n")
    first = next(i for i, line in enumerate(lines) if line.strip() == "for j in range(n):")
    last = next(i for i, line in enumerate(lines) if line.strip().startswith("out[i0, y0 + k"))
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    body = ["    " + line.replace("range(n)", "range(j0, j1)").replace("range(y1 - y0)", "range(k0, k1)")
            for line in lines[first : last + 1]]
    head = [f"{indent}for k0 in range(0, y1 - y0, {rows}):", f"{indent}    k1 = min(y1 - y0, k0 + {rows})",
            f"{indent}    j0 = np.uint64(k0 * w)", f"{indent}    j1 = np.uint64((k1 - 1) * w + m)"]
    return "\n".join(lines[:first] + head + body + lines[last + 1 :])


def main(out_path: str, n: int = 192, rounds: int = 9) -> None:
    case = build_case(Workload("wave3d", (n, n, n), "float32"))
    sweep, grid, fields = case.plan, case.grid, dict(case.fields)
    fields = {k: nc.aligned_field(v, grid.ghost) for k, v in fields.items()}
    g = grid.ghost
    coef = nc.sweep_coefficients(sweep, grid.dtype)
    ref = np.asarray(evaluate_sweep(sweep, grid, fields))
    none = (np.zeros((0, 0, 0)), np.zeros((0, 0, 0)), 0.0)
    variants = {}
    for tile in (16, 32):
        nc.Y_TILE = tile
        source = nc.sweep_source(sweep, reduce=False)
        variants[f"tile {tile}" + (" (the backend's)" if tile == 32 else "")] = load(source, f"t{tile}")
        for chunk in (1, 4, 8):
            variants[f"tile {tile} chunks of {chunk} rows"] = load(chunked(source, chunk), f"t{tile}c{chunk}")
    out = nc.aligned_field(np.empty_like(fields["u"]), g)
    nt = numba.get_num_threads()
    for name, kernel in variants.items():
        out[...] = np.nan
        kernel(out, fields["u"], fields["u_prev"], fields["vel"], coef, g, *none, nt)
        assert np.array_equal(out[grid.interior], ref), f"{name}: not the oracle's bits"
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, kernel in variants.items():
            batches = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(4):
                    kernel(out, fields["u"], fields["u_prev"], fields["vel"], coef, g, *none, nt)
                batches.append((time.perf_counter() - t0) / 4 * 1e3)
            samples[name].append(statistics.median(batches))
    rows = {k: {"median_ms": statistics.median(v), "min_ms": min(v), "max_ms": max(v), "rounds_ms": v}
            for k, v in samples.items()}
    result = {"workload": f"wave3d r8 {n}^3 float32, one sweep call without walls, aligned fields", "threads": nt,
              "machine": platform.processor() or platform.machine(), "numba": numba.__version__, "rows": rows,
              "bitwise_equal_to_oracle": True}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    for k, v in rows.items():
        print(f"{k:28s} {v['median_ms']:8.3f} ms  (min {v['min_ms']:.3f}, max {v['max_ms']:.3f})")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
