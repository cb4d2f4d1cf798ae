"""Round 11 (docs/performance.md): the 2D fused pair's register count moved with the row-pitch argument
(NVRTC for sm_90: poisson2d 48 -> 56 registers, so 4 blocks of 256 threads per SM instead of 5). This
times the generated pair with its __launch_bounds__ asking for 4, 5 or 6 blocks per SM, on the bench's
layout (CudaBackend.field), 16384^2 float32, radius 1; each variant's output is compared bit for bit
with the backend's pair first (cuda_bench.timed: median of 7 x 10 launches, CUDA events).

    PYTHONPATH=src python3 benchmarks/experiments/pair_occupancy.py
"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge import problems
from stencilforge.backends.cuda import CudaBackend, codegen
from stencilforge.backends.cuda.compile import BASE_OPTIONS
from stencilforge.problems import poisson2d
from stencilforge.stencil import Stencil

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")
be = CudaBackend()
for name in ("poisson2d", "heat2d", "jacobi2d"):
    setup = problems.build("poisson2d" if name == "jacobi2d" else name, shape=(16384, 16384), dtype="float32")
    sweep = setup.sweep
    if name == "jacobi2d":
        sweep = poisson2d.jacobi_sweep(Stencil.laplacian(2, 1, setup.grid.spacing), False)
    grid = setup.grid
    rng = cp.random.default_rng(5)
    host = {k: rng.uniform(-1, 1, grid.padded_shape, dtype=cp.float32) for k in set(sweep.inputs) | {sweep.out}}
    fresh = lambda: {k: be.field(v, grid.ghost) for k, v in host.items()}
    f = fresh()
    be.sweep_pair(sweep, grid)(f)
    want = cp.asnumpy(f[sweep.out])
    k = codegen.pair_sweep(sweep, grid.dtype, codegen.PAIR_TILE[2], "sf_pair_x")
    module = codegen.module_source([k], grid.dtype, name)
    head = f"__launch_bounds__({k.block[0]}) sf_pair_x"
    assert module.count(head) == 1
    for blocks in (None, 4, 5, 6):
        src = module if blocks is None else module.replace(head, f"__launch_bounds__({k.block[0]}, {blocks}) sf_pair_x")
        fn = cp.RawModule(code=src, options=BASE_OPTIONS).get_function(k.name)
        f = fresh()
        pitch = f[sweep.out].strides[-2] // 4
        args = tuple(f[a] for a in k.args) + tuple(np.int32(n) for n in grid.shape) + (np.int32(grid.ghost), np.int32(pitch))
        run = lambda: fn(k.grid(grid.shape), k.block, args)
        run()
        same = np.array_equal(cp.asnumpy(f[sweep.out]), want)
        sec = timed(run) / 2
        pct = 100 * grid.cells * sweep.bytes_per_cell(4) / sec / 1e9 / ceiling
        print(f"{name:9s} min blocks {str(blocks):4s} regs {fn.num_regs:3d}  {sec * 1e3:7.4f} ms/step {pct:6.1f}%"
              f"  {'same bits' if same else 'DIFFERENT'}", flush=True)
