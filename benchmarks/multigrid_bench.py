"""Multigrid Poisson on the GPU against Jacobi, CG and an FFT direct solve, with the copy bandwidth.

The problem is poisson2d/poisson3d's: del^2 u = f on the unit box, Dirichlet
walls, u = prod sin(pi x). Rows:

- ours: `sf.poisson(..., backend="cuda")`, median wall time of repeated
  solves after a warm-up (set-up included), cycles, residual, error against
  the exact solution, and a cycle's T_eff (compulsory bytes / median cycle
  time) against the cudaMemcpy bandwidth measured in the same run;
- Jacobi: our Jacobi sweeps (the seed's method, fused pairs) timed for a few
  hundred sweeps; the sweeps to reach the tolerance are extrapolated from
  Jacobi's convergence factor cos(pi h) and marked as extrapolated;
- CG: `cupyx.scipy.sparse.linalg.cg` on the 5/7-point CSR matrix, timed for
  a capped number of iterations; when it stops short of the tolerance the
  time to reach it is extrapolated from the measured rate (marked);
- FFT: a DST-I diagonalisation of the same discrete operator with CuPy's FFT
  (exact for this Dirichlet box), timed, and checked against our solution.

Usage: python3 benchmarks/multigrid_bench.py [--quick] [--out FILE] [--commit SHA]
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import statistics
import time

import cupy as cp
import cupyx.scipy.sparse as cps
import cupyx.scipy.sparse.linalg as cpsl
import numpy as np
from poisson_problem import manufactured

import stencilforge as sf
from stencilforge.bench.measure import MeasureOptions, git_commit, gpu_copy_bandwidth, gpu_device, versions


def gpu_seconds(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        cp.cuda.Device().synchronize()
        start = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        times.append(time.perf_counter() - start)
    return times


def ours(f, h, exact, dtype, tol, mixed, repeats):
    fd = cp.asarray(f)  # on the device, as the peers' right-hand sides are

    def run():
        return sf.poisson(fd, h, tol=tol, dtype=dtype, mixed=mixed, backend="cuda", max_cycles=30)

    cold = gpu_seconds(run, 1)[0]  # the first solve of this size: kernels loaded, transfer tables built
    times = gpu_seconds(run, repeats)
    result = run()
    s = result.summary
    u = cp.asnumpy(result.u).astype(np.float64)
    return {
        "method": "multigrid V(2,2) red-black, FMG first" + (", float32 cycles in float64 defect correction" if mixed else ""),
        "dtype": dtype, "tol": tol, "converged": s["converged"], "cycles": s["cycles"], "residual": s["residual"],
        "residual_history": s["residual_history"], "error_max": float(np.abs(u - exact).max()),
        "time_s": statistics.median(times), "times_s": times, "first_solve_s": cold, "setup_s": s["setup_s"], "cycle_s": s["cycle_s"],
        "passes_per_cycle": s["passes_per_cycle"], "teff_gbps": s["teff_gbps"],
    }, u


def jacobi(shape, dtype, tol, sweeps):
    name = "poisson2d" if len(shape) == 2 else "poisson3d"
    sf.solve(name, shape=shape, steps=20, dtype=dtype, backend="cuda", check_every=10**9, method="jacobi")
    r = sf.solve(name, shape=shape, steps=sweeps, dtype=dtype, backend="cuda", check_every=10**9, method="jacobi")
    per_sweep = r.summary["wall_s"] / sweeps
    rho = math.cos(math.pi / (max(shape) + 1))
    needed = math.log(tol) / math.log(rho)
    return {"method": "Jacobi (ours, the seed's method)", "dtype": dtype, "tol": tol, "sweep_s": per_sweep,
            "sweeps_needed": needed, "time_s": needed * per_sweep, "extrapolated": True,
            "note": f"{sweeps} sweeps timed; sweeps to tol from the convergence factor cos(pi h)"}


def laplacian_csr(shape, h, dtype):
    """The 5/7-point matrix with Dirichlet walls, 2d+1 entries per row (a zero weight on itself past a wall)."""
    size = math.prod(shape)
    idx = cp.arange(size, dtype=cp.int64)
    coords = cp.unravel_index(idx, shape)
    cols, vals = [idx], [cp.full(size, -sum(2.0 / (x * x) for x in h), dtype=dtype)]
    strides = [math.prod(shape[a + 1:]) for a in range(len(shape))]
    for a, n in enumerate(shape):
        for side in (-1, 1):
            inside = (coords[a] + side >= 0) & (coords[a] + side < n)
            cols.append(cp.where(inside, idx + side * strides[a], idx))
            vals.append(cp.where(inside, 1.0 / (h[a] * h[a]), 0.0).astype(dtype))
    width = len(cols)
    indices = cp.stack(cols, axis=1).reshape(-1).astype(cp.int32)
    data = cp.stack(vals, axis=1).reshape(-1)
    indptr = cp.arange(0, width * size + 1, width, dtype=cp.int32)
    return cps.csr_matrix((data, indices, indptr), shape=(size, size))


def conjugate_gradients(f, h, dtype, tol, maxiter):
    a = laplacian_csr(f.shape, h, dtype)
    b = cp.asarray(f, dtype=dtype).reshape(-1)
    count = [0]

    def step(_):
        count[0] += 1

    name = "rtol" if "rtol" in inspect.signature(cpsl.cg).parameters else "tol"
    cpsl.cg(a, b, maxiter=5, **{name: tol})  # warm-up
    count[0] = 0
    cp.cuda.Device().synchronize()
    start = time.perf_counter()
    x, _ = cpsl.cg(a, b, maxiter=maxiter, callback=step, **{name: tol})
    cp.cuda.Device().synchronize()
    seconds = time.perf_counter() - start
    res = float(cp.linalg.norm(b - a @ x) / cp.linalg.norm(b))
    iters = count[0]
    converged = res < tol
    del a
    cp.get_default_memory_pool().free_all_blocks()
    return {"method": "cupyx.scipy.sparse.linalg.cg, CSR 5/7-point", "dtype": dtype, "tol": tol, "iterations": iters,
            "residual": res, "converged": converged, "iteration_s": seconds / iters, "time_s": seconds,
            "note": "time and true relative residual where cg stopped (its recurrence residual below tol, or maxiter)"}


def dst1(x, axis):
    """DST-I along `axis` (unnormalised): y_k = sum_j x_j sin(pi j k / (n + 1)), by a real FFT of the odd extension."""
    n = x.shape[axis]
    zero = cp.zeros_like(cp.take(x, [0], axis=axis))
    ext = cp.concatenate([zero, x, zero, -cp.flip(x, axis=axis)], axis=axis)
    spec = cp.fft.rfft(ext, axis=axis)
    return -cp.take(spec, cp.arange(1, n + 1), axis=axis).imag


def fft_solve(f, h):
    """The 5/7-point Dirichlet system solved exactly: DST-I on every axis, divide by the eigenvalues, invert."""
    lam = 0
    for a, (n, ha) in enumerate(zip(f.shape, h)):
        k = cp.arange(1, n + 1, dtype=f.dtype)
        eig = -4.0 / (ha * ha) * cp.sin(cp.pi * k / (2 * (n + 1))) ** 2
        lam = lam + eig.reshape(tuple(n if b == a else 1 for b in range(f.ndim)))
    g = f
    for a in range(f.ndim):
        g = dst1(g, a)
    g = g / lam
    for a, n in enumerate(f.shape):
        g = dst1(g, a) * (2.0 / (n + 1))
    return g


def fft_row(f, h, dtype, repeats, reference):
    fd = cp.asarray(f, dtype=dtype)
    u = fft_solve(fd, h)
    times = gpu_seconds(lambda: fft_solve(fd, h), repeats)
    diff = float(np.abs(cp.asnumpy(u) - reference).max() / np.abs(reference).max())
    u = fd = None
    cp.get_default_memory_pool().free_all_blocks()
    return {"method": "DST-I direct solve with cupy.fft (exact for the Dirichlet box)", "dtype": dtype,
            "time_s": statistics.median(times), "times_s": times, "max_rel_diff_from_multigrid": diff}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--commit", help="the commit measured, where the working copy has no git history of its own")
    args = parser.parse_args()
    cases = [((4096, 4096), 1e-10, 1e-9), ((512, 512, 512), 1e-10, 1e-9)]
    if args.quick:
        cases = [((1024, 1024), 1e-10, 1e-9), ((128, 128, 128), 1e-10, 1e-9)]
    copy = gpu_copy_bandwidth(1 << 30, MeasureOptions())
    commit = {"commit": args.commit, "dirty": False} if args.commit else git_commit()
    report = {"device": gpu_device(), "commit": commit, "versions": versions(), "copy": copy, "cases": []}
    for shape, tol64, fallback in cases:
        f, exact, h = manufactured(shape)
        rows = []
        row, u64 = ours(f, h, exact, "float64", tol64, False, 3)
        rows.append(row)
        if not row["converged"]:
            rows.append(ours(f, h, exact, "float64", fallback, False, 3)[0])
        rows.append(ours(f, h, exact, "float64", fallback, True, 3)[0])
        rows.append(ours(f, h, exact, "float32", 1e-6, False, 3)[0])
        rows.append(fft_row(f, h, "float64", 5, u64))
        rows.append(jacobi(shape, "float64", fallback, 400))
        rows.append(conjugate_gradients(f, h, "float64", fallback, 20000))
        for r in rows:
            if "teff_gbps" in r and r["teff_gbps"]:
                r["teff_pct_copy"] = 100 * r["teff_gbps"] / copy["gbps"]
        report["cases"].append({"shape": list(shape), "rows": rows})
        cp.get_default_memory_pool().free_all_blocks()
    text = json.dumps(report, indent=1, default=float)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(f"copy {copy['gbps']:.0f} GB/s ({copy['method']}) on {report['device'].get('name')}")
    for case in report["cases"]:
        print("shape", "x".join(map(str, case["shape"])))
        for r in case["rows"]:
            extra = ""
            if "cycles" in r:
                extra = (f"cycles {r['cycles']} res {r['residual']:.1e} conv {r['converged']} err {r['error_max']:.1e} "
                         f"cycle {1e3 * r['cycle_s']:.2f} ms T_eff {r.get('teff_pct_copy', 0):.1f}%")
            elif "iterations" in r:
                extra = f"iters {r['iterations']} res {r['residual']:.1e} conv {r['converged']}"
            elif "sweeps_needed" in r:
                extra = f"sweep {1e3 * r['sweep_s']:.3f} ms needed {r['sweeps_needed']:.0f}"
            flag = " (extrapolated)" if r.get("extrapolated") else ""
            print(f"  {r['method'][:40]:40s} {r['dtype']:8s} tol {r.get('tol', 0):.0e} {r['time_s']:9.4f} s{flag} {extra}")


if __name__ == "__main__":
    main()
