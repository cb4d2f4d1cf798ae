"""One-off: what keeping the oracle's order costs wave3d r8 on numba.

The oracle sums a star's 49 products left to right (c_k * u[o] per entry). ISO3DFD's own form sums the six
neighbours sharing a coefficient first, then multiplies: 9 products, not 49, and shorter dependent chains.
That changes the bits of every CPU result, so it is measured before it is decided: the library's kernel
(`_wide_source`, the oracle's order) against kernels of the same structure (tasks of planes, tiles of 32
rows, flat ranges) in the grouped order, each checked bit for bit against a NumPy evaluation of its own
order, timed in interleaved rounds (median of 5 batches each) on 1 and 2 threads. Usage:
python benchmarks/wave3d_grouped.py OUT.json [N]
"""

import importlib.util
import json
import statistics
import sys
import time

import numba
import numpy as np

import stencilforge.backends.numba_cpu as nc
from stencilforge.backends.numpy_ref import evaluate_sweep
from stencilforge.bench.workloads import Workload, build_case


def groups(term):
    """(coefficient, offsets) in order of first appearance."""
    out: dict = {}
    for o, c in term.stencil.entries:
        out.setdefault(c, []).append(o)
    return list(out.items())


def grouped_oracle(sweep, grid, fields):
    dtype = grid.dtype.type
    inner = grid.interior

    def at(f, o):
        return fields[f][tuple(slice(s.start + d, s.stop + d) for s, d in zip(inner, o))]

    total = None
    for t in sweep.terms:
        part = None
        for c, offs in groups(t):
            s = at(t.field, offs[0])
            for o in offs[1:]:
                s = s + at(t.field, o)
            v = dtype(float(c)) * s
            part = v if part is None else part + v
        if t.factor:
            part = part * fields[t.factor][inner]
        total = part if total is None else total + part
    return total


def grouped_source(sweep, per_loop: int) -> tuple[str, np.ndarray]:
    views = {}
    for t in sweep.terms:
        for _, offs in groups(t):
            for o in offs:
                views.setdefault((t.field, o), nc._view_name(t.field, o))
        if t.factor:
            views.setdefault((t.factor, (0, 0, 0)), nc._view_name(t.factor, (0, 0, 0)))
    coefs, lines = [], []
    ind = " " * 16
    parts = []
    for t in sweep.terms:
        ge = []
        for c, offs in groups(t):
            coefs.append(float(c))
            s = " + ".join(f"{views[(t.field, o)]}[j]" for o in offs)
            ge.append(f"c{len(coefs) - 1} * ({s})")
        if len(ge) > per_loop:
            chunks = [ge[k:k + per_loop] for k in range(0, len(ge), per_loop)]
            for k, ch in enumerate(chunks[:-1]):
                lines += [f"{ind}for j in range(n):", f"{ind}    part[j] = " + ("part[j] + " if k else "") + " + ".join(ch)]
            body = "part[j] + " + " + ".join(chunks[-1])
        else:
            body = " + ".join(ge)
        if t.factor:
            body = f"({body}) * {views[(t.factor, (0, 0, 0))]}[j]"
        parts.append(f"({body})")
    head = ["@JIT", "def kernel(out, f_u, f_u_prev, f_vel, coef, g, nt):", *[f"    c{k} = coef[{k}]" for k in range(len(coefs))],
            "    w = out.shape[2]", "    p = out.shape[1] * w", "    m = w - 2 * g", "    n0 = out.shape[0] - 2 * g",
            "    n1 = out.shape[1] - 2 * g", "    x_u = f_u.reshape(-1)", "    x_u_prev = f_u_prev.reshape(-1)",
            "    x_vel = f_vel.reshape(-1)", "    tasks = max(1, min(nt, n0))", "    ny = max(1, n1 // 32)",
            "    rows = (n1 + ny - 1) // ny",
            "    for t in numba.prange(tasks):", "        z0 = g + t * n0 // tasks", "        z1 = g + (t + 1) * n0 // tasks",
            "        acc = np.empty(rows * w, dtype=out.dtype)", "        part = np.empty(rows * w, dtype=out.dtype)",
            "        for yt in range(ny):", "            y0 = g + yt * n1 // ny", "            y1 = g + (yt + 1) * n1 // ny",
            "            n = (y1 - y0 - 1) * w + m", "            for i0 in range(z0, z1):", f"{ind}base = i0 * p + y0 * w + g"]
    for (field, offset), name in views.items():
        shift = "".join(f" {'+' if o > 0 else '-'} {abs(o)}{s}" for o, s in zip(offset, (" * p", " * w", "")) if o)
        head.append(f"{ind}{name} = x_{field}[base{shift}:base{shift} + n]")
    tail = [f"{ind}for j in range(n):", f"{ind}    acc[j] = " + " + ".join(parts), f"{ind}for k in range(y1 - y0):",
            f"{ind}    out[i0, y0 + k, g:g + m] = acc[k * w:k * w + m]"]
    return nc.HEADER + "\n".join(head + lines + tail) + "\n", np.array(coefs)


def load(source: str, name: str):
    path = f"/tmp/wave3d_grouped_{name}.py"
    with open(path, "w") as f:
        f.write(source.replace("cache=True, ", ""))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kernel


def main(out_path: str, n: int = 192) -> None:
    case = build_case(Workload("wave3d", (n, n, n), "float32"))
    sweep, grid, fields = case.plan, case.grid, dict(case.fields)
    g = grid.ghost
    none = (np.zeros((0, 0, 0)), np.zeros((0, 0, 0)), 0.0)
    lib = load(nc.sweep_source(sweep, reduce=False), "library")
    lib_coef = nc.sweep_coefficients(sweep, grid.dtype)

    def caller(kernel, coef, walls):
        return lambda o, nt: kernel(o, fields["u"], fields["u_prev"], fields["vel"], coef, g, *walls, nt)

    variants = {"oracle's order (library)": (caller(lib, lib_coef, none), np.asarray(evaluate_sweep(sweep, grid, fields)))}
    grouped_ref = np.asarray(grouped_oracle(sweep, grid, fields))
    for per_loop in (2, 3, 5):
        src, coef = grouped_source(sweep, per_loop)
        variants[f"grouped, {per_loop} groups per loop"] = (caller(load(src, f"g{per_loop}"), coef.astype(grid.dtype), ()), grouped_ref)
    out = np.empty_like(fields["u"])
    for name, (run, ref) in variants.items():
        out[...] = np.nan
        run(out, numba.get_num_threads())
        assert np.array_equal(out[grid.interior], ref), f"{name}: not its order's bits"
    diff = np.abs(variants["oracle's order (library)"][1].astype(np.float64) - grouped_ref)
    result = {"workload": f"wave3d r8 {n}^3 float32, one sweep call without walls", "numba": numba.__version__,
              "grouped_vs_oracle_max_abs_diff": float(diff.max()), "field_max_abs": float(np.abs(grouped_ref).max()), "threads": {}}
    for threads in (1, 2):
        numba.set_num_threads(threads)
        samples: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(7):
            for name, (run, _) in variants.items():
                batches = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    for _ in range(3):
                        run(out, threads)
                    batches.append((time.perf_counter() - t0) / 3 * 1e3)
                samples[name].append(statistics.median(batches))
        result["threads"][threads] = {k: {"median_ms": statistics.median(v), "rounds_ms": v} for k, v in samples.items()}
        for k, v in samples.items():
            print(f"{threads} threads  {k:28s} {statistics.median(v):8.3f} ms")
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
