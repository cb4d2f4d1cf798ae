"""How many steps a 2D fused pass should take: time `sweep_fused` for steps k and tiles on one GPU.

Prints ms per step and % of the copy bandwidth measured in the same run for
each (workload, dtype, k, tile); writes the rows as JSON to the path given.
Usage: python benchmarks/fused_steps_sweep.py OUT.json [--size N]
"""

from __future__ import annotations

import json
import statistics
import sys

import cupy as cp

from stencilforge.backends.base import fused_walls
from stencilforge.backends.cuda import CudaBackend, codegen
from stencilforge.bench.measure import MeasureOptions, git_commit, gpu_copy_bandwidth, gpu_device, now_iso
from stencilforge.bench.workloads import Workload, build_case


def time_pass(launch, fields, target_s=0.15, repeats=5):
    launch(fields)
    cp.cuda.runtime.deviceSynchronize()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record()
    launch(fields)
    b.record()
    b.synchronize()
    one = cp.cuda.get_elapsed_time(a, b) / 1e3
    n = max(3, int(target_s / max(one, 1e-6)))
    samples = []
    for _ in range(repeats):
        a.record()
        for _ in range(n):
            launch(fields)
        b.record()
        b.synchronize()
        samples.append(cp.cuda.get_elapsed_time(a, b) / 1e3 / n)
    return statistics.median(samples)


def main() -> None:
    out = sys.argv[1]
    size = int(sys.argv[sys.argv.index("--size") + 1]) if "--size" in sys.argv else 16384
    copy = gpu_copy_bandwidth(size * size * 4, MeasureOptions())
    rows = []
    be = CudaBackend()
    for name, dtype in (("jacobi2d", "float32"), ("heat2d", "float32"), ("poisson2d", "float32"), ("heat2d", "float64")):
        case = build_case(Workload(name, (size, size), dtype))
        u = case.plan.stencil_inputs[0]
        fields = {k: be.field(v, case.grid.ghost) for k, v in case.fields.items()}
        single = be.sweep(case.plan, case.grid)
        t1 = time_pass(single, fields)
        nbytes = case.bytes_per_cell * case.cells
        base = {"workload": name, "dtype": dtype, "shape": [size, size]}
        rows.append({**base, "steps": 1, "tile": list(single.tile), "strategy": single.strategy, "ms_per_step": t1 * 1e3,
                     "pct_copy": 100 * nbytes / t1 / 1e9 / copy["gbps"]})
        for k in (2, 3, 4, 5, 6, 8):
            for tile in ((8, 256), (16, 256), (8, 128), (16, 128)):
                for interior in (True, False) if k <= 3 else (True,):
                    kernel = codegen._fused_rows(case.plan, case.grid.dtype, tile, f"sf_k{k}", k, interior)
                    launch = be._sweep_runner(kernel, case.grid)
                    f = {**fields, **{fused_walls(s, case.plan.out): fields[u] for s in range(2, k)}}
                    t = time_pass(launch, f) / k
                    rows.append({**base, "steps": k, "tile": list(tile), "interior_path": interior, "ms_per_step": t * 1e3,
                                 "pct_copy": 100 * nbytes / t / 1e9 / copy["gbps"]})
                    print(f"{name:9s} {dtype} k={k} tile={tile} interior={interior}: {t * 1e3:.4f} ms/step  {rows[-1]['pct_copy']:.1f}%",
                          flush=True)
        del fields
        cp.get_default_memory_pool().free_all_blocks()
    with open(out, "w") as fh:
        json.dump({"date": now_iso(), "device": gpu_device(), "git": git_commit(), "copy": copy, "rows": rows}, fh, indent=1)
    print(f"copy {copy['gbps']:.0f} GB/s ({copy['method']})")
    best = {}
    for r in rows:
        key = (r["workload"], r["dtype"], r["steps"], r.get("interior_path"))
        if key not in best or r["pct_copy"] > best[key]["pct_copy"]:
            best[key] = r
    for (w, d, k, interior), r in sorted(best.items(), key=lambda kv: str(kv[0])):
        print(f"| {w} {d} | {k} | {interior} | {tuple(r['tile'])} | {r['ms_per_step']:.4f} | {r['pct_copy']:.1f}% |")


if __name__ == "__main__":
    main()
