"""The fused pair against single rows steps: jacobi2d and poisson2d sweeps at 16384^2 fp32, per-step T_eff."""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge.backends.cuda import CudaBackend
from stencilforge.grid import Grid
from stencilforge.problems import poisson2d
from stencilforge.stencil import Stencil

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")
grid = Grid((16384, 16384), (1 / 16385, 1 / 16385), np.dtype(np.float32), 1, (0.0, 0.0))
lap = Stencil.laplacian(2, 1, grid.spacing)
rng = cp.random.default_rng(0)
for label, sweep in (("jacobi2d", poisson2d.jacobi_sweep(lap, False)), ("poisson2d", poisson2d.jacobi_sweep(lap, True))):
    f = {n: rng.uniform(-1, 1, grid.padded_shape, dtype=cp.float32) for n in sweep.inputs + (sweep.out,)}
    bpc = sweep.bytes_per_cell(4)
    rows = CudaBackend(strategy="rows").sweep(sweep, grid)
    sec = timed(lambda: rows(f))
    print(f"{label:10s} rows (4,512) one step      {sec * 1e3:7.4f} ms/step {100 * grid.cells * bpc / sec / 1e9 / ceiling:6.1f}%", flush=True)
    be = CudaBackend()
    for tile in [(8, 256), (4, 256), (16, 256), (8, 128), (8, 512), (16, 128), (32, 128), (4, 512)]:
        pair = be.sweep_pair(sweep, grid, tile)
        sec = timed(lambda: pair(f)) / 2
        print(f"{label:10s} pair {str(tile):22s} {sec * 1e3:7.4f} ms/step {100 * grid.cells * bpc / sec / 1e9 / ceiling:6.1f}% per step", flush=True)
