"""The 3D fused pair (z-march) against single rows steps: heat3d fp32, per-step T_eff, tiles x load-ahead.

Usage: python3 benchmarks/experiments/pair3d_bench.py [N] [TILE:AHEAD ...]  (TILE as ZxRxT)
"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
from cuda_bench import copy_bandwidth, timed

from stencilforge import problems
from stencilforge.backends.cuda import CudaBackend, codegen

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 512
configs = [(tuple(map(int, a.split(":")[0].split("x"))), int(a.split(":")[1])) for a in sys.argv[2:]]
setup = problems.build("heat3d", shape=(n, n, n), dtype="float32")
sweep, grid = setup.sweep, setup.grid
rng = cp.random.default_rng(0)
f = {k: rng.uniform(-1, 1, grid.padded_shape, dtype=cp.float32) for k in sweep.inputs + (sweep.out,)}
bpc = sweep.bytes_per_cell(4)


def report(label, sec):
    print(f"{label:34s} {sec * 1e3:7.4f} ms/step {100 * grid.cells * bpc / sec / 1e9 / ceiling:6.1f}%", flush=True)


rows = CudaBackend(strategy="rows").sweep(sweep, grid)
report("rows one step", timed(lambda: rows(f)))
be = CudaBackend()
for tile, ahead in configs:
    pair = be._sweep_runner(codegen.pair_sweep(sweep, grid.dtype, tile, f"sf_pair_a{ahead}", ahead), grid)
    report(f"pair {tile} ahead {ahead}", timed(lambda: pair(f)) / 2)
