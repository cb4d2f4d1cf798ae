"""Round 10 (docs/performance.md): streaming_vec with its blocks ordered y-fastest (blockIdx.x walks the tile
rows, so the blocks that share 8-row halos launch next to each other) against the generator's x-fastest order.
The y-fastest kernel is the generated source with the two block indices swapped; its output is compared bit for
bit with the generated kernel's before timing (cuda_bench.timed: median of 7 x 10 launches, CUDA events).

    PYTHONPATH=src python3 benchmarks/experiments/wave3d_block_order.py
"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge import problems
from stencilforge.backends.cuda import codegen

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")
for n in (512, 1024):
    setup = problems.build("wave3d", shape=(n, n, n), dtype="float32", radius=8)
    sweep, grid = setup.sweep, setup.grid
    f = {k: cp.random.uniform(-1, 1, grid.padded_shape, dtype=cp.float32) for k in set(sweep.inputs) | {sweep.out}}
    f["vel"] *= 1e-4
    start = {k: v.copy() for k, v in f.items()}
    scal = tuple(np.int32(s) for s in grid.shape) + (np.int32(grid.ghost),)
    for chunk in (64, 256):
        k = codegen.sweep_kernel(sweep, "streaming_vec", grid.dtype, (chunk, 4, 128))
        line = [l for l in k.source.splitlines() if "const int b2 = blockIdx.x" in l]
        assert len(line) == 1, line
        swapped = k.source.replace(line[0], line[0].replace("blockIdx.x", "BX").replace("blockIdx.y", "blockIdx.x").replace("BX", "blockIdx.y"))
        gx, gy, gz = k.grid(grid.shape)
        runs = {}
        for label, src, g in (("x-fastest (generated)", k.source, (gx, gy, gz)), ("y-fastest", swapped, (gy, gx, gz))):
            fn = cp.RawModule(code="typedef float real;\n" + src, options=("-std=c++17",)).get_function(k.name)
            args = tuple(f[a] for a in k.args) + scal
            runs[label] = lambda fn=fn, g=g, args=args: fn(g, k.block, args)
        outs = {}
        for label, run in runs.items():
            for name in f:
                f[name][...] = start[name]
            run()
            outs[label] = cp.asnumpy(f[sweep.out])
        same = np.array_equal(*outs.values())
        for rep in range(2):
            for label, run in runs.items():
                sec = timed(run)
                pct = 100 * grid.cells * setup.sweep.bytes_per_cell(4) / sec / 1e9 / ceiling
                print(f"{n}^3 chunk {chunk:3d} {label:22s} {sec * 1e3:7.3f} ms {pct:5.1f}%  {'same bits' if same else 'DIFFERENT'}", flush=True)
    del f, start
    cp.get_default_memory_pool().free_all_blocks()
