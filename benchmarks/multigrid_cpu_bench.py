"""Multigrid Poisson on the CPU (numba) against PyAMG and SciPy's sparse direct solver, with the copy bandwidth.

The problem is multigrid_bench.py's (poisson_problem.manufactured): del^2 u = f on the unit box,
Dirichlet walls, u = (1 + x^2) prod sin(pi x_a), float64. Rows per size:

- ours: `sf.poisson(f, h, tol=..., backend="numba")`, the first solve timed on its own (numba
  compilation or cache loading included), then the median of repeated solves (set-up included);
  cycles, residual, error against the exact solution, cycle time and T_eff against the copy
  bandwidth of `cpu_copy_bandwidth` measured in the same run; on all of numba's threads, and
  again on one thread, as SciPy's sparse kernels and SuperLU run on one core;
- PyAMG: smoothed aggregation and classical Ruge-Stuben on the 5/7-point CSR matrix of -del^2_h,
  each as a stand-alone V-cycle solver (accel=None) and as CG's preconditioner (accel="cg"), set-up
  and solve timed separately. The tolerance handed to PyAMG is tightened until the true relative
  residual ||f - A u|| / ||f||, computed here with the matrix, reaches the target;
- SuperLU: `scipy.sparse.linalg.spsolve`, and `splu` with its factorisation and solve timed
  separately, each in a child process with a time limit and a memory cap. Where one does not
  finish, the row says so and halved sizes are measured instead (reported as measured, never
  extrapolated).

Timed rows are the median of at least --repeats runs, more for short ones (until they add up to
MIN_TOTAL_S). Every peer's solution is compared with ours (max |difference| / max |u|); its time
counts only when they agree to AGREE. The machine may be shared: the load average at the start
and end is in the JSON.

Usage: python3 benchmarks/multigrid_cpu_bench.py [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np
import scipy
import scipy.sparse as sp
import scipy.sparse.linalg as spl
from poisson_problem import manufactured

import stencilforge as sf
from stencilforge.bench.measure import MeasureOptions, cpu_copy_bandwidth, cpu_device, git_commit, versions

try:
    import pyamg
except ImportError:
    pyamg = None

AGREE = 1e-8  # max |u_peer - u_ours| / max |u_ours| for a peer's time to count
CHILD_TIMEOUT_S = 120
CHILD_MEMORY_BYTES = 8 << 30
MIN_TOTAL_S, MAX_REPEATS = 2.0, 15


def laplacian(shape, h):
    """-del^2_h with Dirichlet walls as a CSR matrix (SPD, rows in C order of the interior nodes)."""
    eye = [sp.identity(n, format="csr") for n in shape]
    a = None
    for axis, (n, ha) in enumerate(zip(shape, h)):
        t = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1], format="csr") / (ha * ha)
        term = t if axis == 0 else eye[0]
        for b in range(1, len(shape)):
            term = sp.kron(term, t if b == axis else eye[b], format="csr")
        a = term if a is None else a + term
    return a.tocsr()


def relative_residual(a, u, b) -> float:
    return float(np.linalg.norm(b - a @ u) / np.linalg.norm(b))


def agreement(u, reference) -> float:
    return float(np.abs(u - reference).max() / np.abs(reference).max())


def seconds(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def repeated(fn, repeats):
    """(times, last result): at least `repeats` runs, more (up to MAX_REPEATS) until they add up to MIN_TOTAL_S.

    Short solves on a shared machine vary a lot from run to run; more samples steady their median.
    """
    times = []
    while len(times) < repeats or (sum(times) < MIN_TOTAL_S and len(times) < MAX_REPEATS):
        t, out = seconds(fn)
        times.append(t)
    return times, out


def ours(f, h, exact, a, tol, repeats, copy_gbps, threads):
    """Our solve on `threads` of numba's threads (all of them, then one: the peers' sparse kernels are serial)."""
    def run():
        return sf.poisson(f, h, tol=tol, dtype="float64", backend="numba", max_cycles=30)

    numba.set_num_threads(threads)
    try:
        first, _ = seconds(run)
        times, result = repeated(run, repeats)
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    s = result.summary
    u = np.asarray(result.u).reshape(-1)
    return {
        "method": f"stencilforge multigrid, numba {threads} thread{'s' if threads > 1 else ''}",
        "scheme": "V(2,2) red-black Gauss-Seidel, FMG first", "threads": threads, "tol": tol,
        "converged": s["converged"], "cycles": s["cycles"], "residual": s["residual"],
        "residual_matrix": relative_residual(a, u, -f.reshape(-1)), "residual_history": s["residual_history"],
        "error_max": float(np.abs(u - exact.reshape(-1)).max()), "time_s": statistics.median(times), "times_s": times,
        "first_solve_s": first, "setup_s": s["setup_s"], "cycle_s": s["cycle_s"],
        "passes_per_cycle": s["passes_per_cycle"], "teff_gbps": s["teff_gbps"], "teff_pct_copy": 100 * s["teff_gbps"] / copy_gbps,
    }, u


def pyamg_solve(ml, b, tol, accel):
    """One solve; returns (u, iterations). Iterations: V-cycles (accel=None) or CG steps."""
    count = [0]

    def step(_):
        count[0] += 1

    u = ml.solve(b, tol=tol, maxiter=500, accel=accel, callback=step)
    return u, count[0]


def pyamg_rows(a, b, reference, target, repeats):
    if pyamg is None:
        return [{"method": "PyAMG", "skipped": True, "note": "pyamg is not installed (pip install pyamg)"}]
    rows = []
    builders = (("smoothed aggregation", pyamg.smoothed_aggregation_solver), ("Ruge-Stuben", pyamg.ruge_stuben_solver))
    for name, build in builders:
        setups, ml = repeated(lambda build=build: build(a), repeats)
        for accel in (None, "cg"):
            tol = target
            for _ in range(6):  # tighten until the true residual reaches the target
                u, iters = pyamg_solve(ml, b, tol, accel)
                res = relative_residual(a, u, b)
                if res <= target:
                    break
                tol /= 4
            times, (u, iters) = repeated(lambda ml=ml, tol=tol, accel=accel: pyamg_solve(ml, b, tol, accel), repeats)
            res = relative_residual(a, u, b)
            diff = agreement(u, reference)
            rows.append({
                "method": f"PyAMG {name}, accel={accel}", "tol": target, "tol_passed": tol, "iterations": iters,
                "residual_matrix": res, "converged": res <= target, "levels": len(ml.levels),
                "operator_complexity": float(ml.operator_complexity()), "setup_s": statistics.median(setups),
                "setup_times_s": setups, "solve_s": statistics.median(times), "solve_times_s": times,
                "time_s": statistics.median(setups) + statistics.median(times),
                "max_rel_diff_from_ours": diff, "agrees": diff <= AGREE,
            })
    return rows


def superlu_child(mode: str, shape, path: str) -> None:
    """Runs in a child process: one SuperLU solve of the problem, timings on stdout, solution to `path`."""
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    f, _, h = manufactured(shape)
    a = laplacian(shape, h).tocsc()
    b = -f.reshape(-1)
    if mode == "spsolve":
        t, u = seconds(lambda: spl.spsolve(a, b))
        out = {"time_s": t}
    else:
        tf, lu = seconds(lambda: spl.splu(a))
        ts, u = seconds(lambda: lu.solve(b))
        out = {"factor_s": tf, "solve_s": ts, "time_s": tf + ts, "fill_nnz": int(lu.L.nnz + lu.U.nnz)}
    out["residual_matrix"] = relative_residual(a, u, b)
    np.save(path, u)
    print(json.dumps(out))


def superlu(mode: str, shape):
    """One SuperLU solve in a child process: (row, solution or None)."""
    label = "SuperLU spsolve (COLAMD)" if mode == "spsolve" else "SuperLU splu factor + solve (COLAMD)"
    row = {"method": label, "shape": list(shape), "limit_s": CHILD_TIMEOUT_S, "memory_cap_bytes": CHILD_MEMORY_BYTES}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "u.npy")
        cmd = [sys.executable, __file__, "--superlu-child", mode, "--shape", *map(str, shape), "--npy", path]
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=Path(__file__).parent)
        except subprocess.TimeoutExpired:
            return {**row, "finished": False, "note": f"did not finish within {CHILD_TIMEOUT_S} s (stopped)"}, None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return {**row, "finished": False, "note": f"failed after {time.perf_counter() - start:.1f} s: {last}"}, None
        row.update(json.loads(done.stdout.strip().splitlines()[-1]), finished=True)
        return row, np.load(path)


def superlu_rows(shape, reference):
    """spsolve and splu at `shape`; where spsolve does not finish, halved sizes (measured, not extrapolated)."""
    rows = []
    for mode in ("spsolve", "splu"):
        row, u = superlu(mode, shape)
        if u is not None:
            row["max_rel_diff_from_ours"] = agreement(u, reference)
            row["agrees"] = row["max_rel_diff_from_ours"] <= AGREE
        rows.append(row)
        if not row["finished"]:
            break
    smaller = shape
    while not rows[-1]["finished"] and min(smaller) >= 64:
        smaller = tuple(n // 2 for n in smaller)
        for mode in ("spsolve", "splu"):
            row, _ = superlu(mode, smaller)
            sizes = f"{'x'.join(map(str, smaller))} because {'x'.join(map(str, shape))}"
            row["note"] = (row.get("note", "") + f" measured at {sizes} did not finish; "
                           "not compared with ours (other size), not extrapolated").strip()
            row["smaller_size"] = True
            rows.append(row)
            if not row["finished"]:
                break
    return rows


def machine() -> dict:
    """Call after a parallel numba function has run (the threading layer is chosen then)."""
    return {**cpu_device(), "numba_threads": numba.get_num_threads(), "numba_threading_layer": numba.threading_layer(),
            "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
            "shared": "other work ran on this machine during the run; see load_average_start/end"}


def case_table(case) -> str:
    lines = [f"shape {'x'.join(map(str, case['shape']))}, target relative residual {case['target']:.0e}"]
    for r in case["rows"]:
        if r.get("skipped"):
            lines.append(f"  {r['method']:44s} skipped: {r['note']}")
            continue
        if not r.get("finished", True):
            lines.append(f"  {r['method'][:44]:44s} {'x'.join(map(str, r['shape']))}: {r['note']}")
            continue
        size = f" at {'x'.join(map(str, r['shape']))}" if r.get("smaller_size") else ""
        if "cycles" in r:
            extra = (f"cycles {r['cycles']} res {r['residual_matrix']:.1e} err {r['error_max']:.1e} first {r['first_solve_s']:.2f} s "
                     f"cycle {1e3 * r['cycle_s']:.0f} ms T_eff {r['teff_pct_copy']:.0f}% of copy")
        elif "iterations" in r:
            extra = (f"setup {r['setup_s']:.2f} s solve {r['solve_s']:.2f} s iters {r['iterations']} res {r['residual_matrix']:.1e} "
                     f"diff {r['max_rel_diff_from_ours']:.0e}")
        else:
            split = f"factor {r['factor_s']:.2f} s solve {r['solve_s']:.2f} s " if "factor_s" in r else ""
            diff = f"diff {r['max_rel_diff_from_ours']:.0e}" if "max_rel_diff_from_ours" in r else "(not compared)"
            extra = f"{split}res {r['residual_matrix']:.1e} {diff}{size}"
        if r.get("agrees") is False:
            extra += f" DISAGREES with ours (> {AGREE:.0e}): time not counted"
        lines.append(f"  {r['method'][:44]:44s} {r['time_s']:8.2f} s  {extra}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="256^2 and 32^3 instead of 1024^2 and 128^3")
    parser.add_argument("--out")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--superlu-child", choices=("spsolve", "splu"), help=argparse.SUPPRESS)
    parser.add_argument("--shape", type=int, nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--npy", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.superlu_child:
        superlu_child(args.superlu_child, tuple(args.shape), args.npy)
        return
    shapes = [(256, 256), (32, 32, 32)] if args.quick else [(1024, 1024), (128, 128, 128)]
    tol = 1e-10
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "git": git_commit(),
        "load_average_start": list(os.getloadavg()),
        "versions": {**versions(), "scipy": scipy.__version__, "pyamg": pyamg.__version__ if pyamg else None},
        "problem": "del^2 u = f, Dirichlet unit box, u = (1 + x^2) prod sin(pi x_a), float64",
        "agree": AGREE, "repeats": args.repeats,
    }
    report["copy"] = cpu_copy_bandwidth(1 << 28, MeasureOptions())
    report["machine"] = machine()
    report["cases"] = []
    for shape in shapes:
        f, exact, h = manufactured(shape)
        a = laplacian(shape, h)
        b = -f.reshape(-1)
        row, reference = ours(f, h, exact, a, tol, args.repeats, report["copy"]["gbps"], numba.config.NUMBA_NUM_THREADS)
        serial, u = ours(f, h, exact, a, tol, args.repeats, report["copy"]["gbps"], 1)
        serial["max_rel_diff_from_ours"] = agreement(u, reference)
        # Below the float64 floor our solver stops short; the peers are then asked for what it reached.
        target = tol if row["converged"] else row["residual"]
        rows = [row, serial, *pyamg_rows(a, b, reference, target, args.repeats), *superlu_rows(shape, reference)]
        report["cases"].append({"shape": list(shape), "target": target, "rows": rows})
        print(case_table(report["cases"][-1]), flush=True)
    report["load_average_end"] = list(os.getloadavg())
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, default=float) + "\n")
    print(f"copy {report['copy']['gbps']:.1f} GB/s on {report['machine']['name']} ({report['machine']['cores']} cores), "
          f"load average {report['load_average_start'][0]:.2f} at the start, {report['load_average_end'][0]:.2f} at the end")


if __name__ == "__main__":
    main()
