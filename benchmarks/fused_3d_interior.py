"""The 3D fused pair with and without its interior path, side by side on one GPU.

Usage: python benchmarks/fused_3d_interior.py OUT.json
"""

from __future__ import annotations

import json
import os
import sys

import cupy as cp

from stencilforge.backends.cuda import CudaBackend, codegen
from stencilforge.bench.measure import MeasureOptions, gpu_copy_bandwidth, gpu_device
from stencilforge.bench.workloads import Workload, build_case

sys.path.insert(0, os.path.dirname(__file__))
from fused_steps_sweep import time_pass  # noqa: E402


def main() -> None:
    be = CudaBackend()
    copy = gpu_copy_bandwidth(512**3 * 4, MeasureOptions())
    rows = []
    for shape, dtype in (((512, 512, 512), "float32"), ((512, 512, 512), "float64"), ((1024, 1024, 1024), "float32")):
        case = build_case(Workload("heat3d", shape, dtype))
        fields = {k: be.field(v, case.grid.ghost) for k, v in case.fields.items()}
        single = be.sweep(case.plan, case.grid)
        t1 = time_pass(single, fields)
        nbytes = case.bytes_per_cell * case.cells
        rows.append({"shape": list(shape), "dtype": dtype, "kernel": f"single {single.strategy}", "ms_per_step": t1 * 1e3,
                     "pct_copy": 100 * nbytes / t1 / 1e9 / copy["gbps"]})
        for tile in (codegen.PAIR_TILE[3], (16, 2, 128), (32, 4, 128), (32, 2, 256)):
            for interior in (False, True):
                kernel = codegen._pair_march(case.plan, case.grid.dtype, tile, "sf_pair3", codegen.PAIR_AHEAD, interior)
                t = time_pass(be._sweep_runner(kernel, case.grid), fields) / 2
                rows.append({"shape": list(shape), "dtype": dtype, "kernel": "pair", "tile": list(tile), "interior_path": interior,
                             "ms_per_step": t * 1e3, "pct_copy": 100 * nbytes / t / 1e9 / copy["gbps"]})
        for r in rows[-9:]:
            print(f"| heat3d {'x'.join(map(str, shape))} {dtype} | {r['kernel']} | {r.get('tile')} | {r.get('interior_path')} | "
                  f"{r['ms_per_step']:.4f} | {r['pct_copy']:.1f}% |", flush=True)
        del fields
        cp.get_default_memory_pool().free_all_blocks()
    with open(sys.argv[1], "w") as fh:
        json.dump({"device": gpu_device(), "copy": copy, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
