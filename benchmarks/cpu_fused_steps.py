"""Numba's fused 3D kernel at several steps per pass: time per step of heat3d (its own walls, static), in
interleaved rounds, each k checked bit for bit against k single steps first; and the compile of each on a cold
cache, in a fresh process. Usage: python benchmarks/cpu_fused_steps.py OUT.json [N] [ks]."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numba
import numpy as np

from stencilforge.backends.base import with_walls
from stencilforge.backends.numba_cpu import NumbaBackend
from stencilforge.bench.workloads import Workload, build_case

COMPILE = """
import sys, time
from stencilforge.bench.workloads import Workload, build_case
from stencilforge.backends.numba_cpu import NumbaBackend
case = build_case(Workload("heat3d", (16, 16, 16), "float32"))
t0 = time.perf_counter()
NumbaBackend().sweep_fused(case.plan, case.grid, steps=int(sys.argv[1])).wait()
print(time.perf_counter() - t0)
"""


def compile_seconds(k: int) -> float:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "STENCILFORGE_CACHE_DIR": cache}
        done = subprocess.run([sys.executable, "-c", COMPILE, str(k)], env=env, capture_output=True, text=True, check=True)
        return float(done.stdout.split()[-1])


def main() -> None:
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    ks = [int(k) for k in (sys.argv[3] if len(sys.argv) > 3 else "2,3,4,6,8").split(",")]
    case = build_case(Workload("heat3d", (n, n, n), "float32"))
    be, sweep, g = NumbaBackend(), case.plan, case.grid.ghost
    u0 = be.field(case.fields["u"].copy(), g)
    single = be.sweep(sweep, case.grid)
    kernels = {}
    for k in ks:
        kernels[k] = be.sweep_fused(sweep, case.grid, steps=k)
        kernels[k].wait()
        a, b = u0.copy(), u0.copy()
        for _ in range(k):
            single({"u": a, "u_new": b})
            a, b = b, a
        got = {"u": u0.copy(), "u_new": u0.copy()}
        got["u_new"][case.grid.interior] = np.nan
        kernels[k](with_walls(got, sweep, k))
        assert np.array_equal(got["u_new"], a), f"{k} steps per pass differ from single steps"
    times: dict[int, list[float]] = {k: [] for k in [1, *ks]}
    buffers = {k: {"u": u0.copy(), "u_new": u0.copy()} for k in times}
    passes = 24  # steps per timed call: a multiple of every k above
    for _ in range(9):
        for k, f in buffers.items():
            t0 = time.perf_counter()
            for _ in range(passes // k):
                (single if k == 1 else kernels[k])(f if k == 1 else with_walls(f, sweep, k))
                f["u"], f["u_new"] = f["u_new"], f["u"]
            times[k].append((time.perf_counter() - t0) / passes * 1e3)
    report = {
        "workload": f"heat3d {n}^3 float32, static walls",
        "machine": platform.processor() or platform.machine(),
        "cpu": next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), None),
        "numba_threads": numba.get_num_threads(),
        "note": "ms per step, 9 interleaved rounds of 24 steps; k = 1 is the single-step kernel; compile: the fused "
                "kernel alone on an empty cache in a fresh process, s",
        "per_step_ms": {str(k): {"median": float(np.median(v)), "min": float(min(v))} for k, v in times.items()},
        "compile_s": {str(k): compile_seconds(k) for k in ks},
    }
    with open(out, "w") as fh:
        json.dump(report, fh, indent=1)
    for k, v in report["per_step_ms"].items():
        print(f"k={k}: median {v['median']:.3f} ms/step, min {v['min']:.3f}, compile {report['compile_s'].get(k, '-')}")


if __name__ == "__main__":
    main()
