"""Whether the five-step 2D pass is bound by occupancy: time it with __launch_bounds__ minimum blocks per SM.

Usage: python benchmarks/fused_occupancy.py OUT.json [--profile]   (--profile: launch the auto kernel twice, for ncu)
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import cupy as cp

sys.path.insert(0, os.path.dirname(__file__))
from fused_steps_sweep import time_pass  # noqa: E402

from stencilforge.backends.base import fused_walls
from stencilforge.backends.cuda import CudaBackend, codegen
from stencilforge.backends.cuda.tune import fused_choice
from stencilforge.bench.measure import MeasureOptions, gpu_copy_bandwidth, gpu_device
from stencilforge.bench.workloads import Workload, build_case


def main() -> None:
    size = 16384
    be = CudaBackend()
    rows = []
    copy = None if "--profile" in sys.argv else gpu_copy_bandwidth(size * size * 4, MeasureOptions())
    for name, dtype in (("jacobi2d", "float32"), ("heat2d", "float32"), ("poisson2d", "float32"), ("heat2d", "float64")):
        case = build_case(Workload(name, (size, size), dtype))
        steps, tile = fused_choice(case.plan)
        u = case.plan.stencil_inputs[0]
        fields = {k: be.field(v, case.grid.ghost) for k, v in case.fields.items()}
        f = {**fields, **{fused_walls(s, case.plan.out): fields[u] for s in range(2, steps)}}
        base = codegen.fused_sweep(case.plan, case.grid.dtype, tile, "sf_fused_probe", steps)
        if "--profile" in sys.argv:
            launch = be._sweep_runner(base, case.grid)
            launch(f)
            launch(f)
            cp.cuda.runtime.deviceSynchronize()
            continue
        for blocks in (None, 4, 5, 6, 8, None, 4, 5, 6, 8):  # two rounds, interleaved
            bounds = f"__launch_bounds__({tile[1]}{'' if blocks is None else f', {blocks}'})"
            kernel = dataclasses.replace(base, name=f"sf_occ{blocks}", source=base.source.replace(
                f"__launch_bounds__({tile[1]})", bounds).replace("sf_fused_probe", f"sf_occ{blocks}"))
            t = time_pass(be._sweep_runner(kernel, case.grid), f) / steps
            pct = 100 * case.bytes_per_cell * case.cells / t / 1e9 / copy["gbps"]
            rows.append({"workload": name, "dtype": dtype, "steps": steps, "tile": list(tile), "min_blocks": blocks,
                         "ms_per_step": t * 1e3, "pct_copy": pct})
            print(f"| {name} {dtype} | {blocks} | {t * 1e3:.4f} | {pct:.1f}% |", flush=True)
        del fields, f
        cp.get_default_memory_pool().free_all_blocks()
    if copy is not None:
        with open(sys.argv[1], "w") as fh:
            json.dump({"device": gpu_device(), "copy": copy, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
