"""Round 11 (docs/performance.md): do rows that start on a 128-byte line move the single-step sweeps?

The grids keep their ghost cells in one C-ordered array, so with a ghost width of 1 every interior row
starts 4 bytes past a line, and each warp's 128-byte request touches 5 sectors instead of 4. Here each
generated kernel runs on three layouts of the same cells: the generated one (row pitch n + 2g), a
pitch rounded up to 32 floats with the interior's first cell on a line ("aligned"), and the same pitch
with the array's first cell on a line ("pitched", the control that separates pitch from alignment).
The kernel source differs only in its row stride, which becomes the literal pitch. Each layout's
interior output is compared bit for bit with the generated layout's before timing
(cuda_bench.timed: median of 7 x 10 launches, CUDA events; memcpy bandwidth in the same run).

    PYTHONPATH=src python3 benchmarks/experiments/aligned_rows.py [problem:strategy ...]
"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge import problems
from stencilforge.backends.cuda import codegen
from stencilforge.backends.cuda.compile import BASE_OPTIONS

CASES = sys.argv[1:] or ["heat3d:rows", "heat3d:streaming", "poisson2d:rows", "heat2d:pipelined",
                         "wave3d:streaming_vec"]
SHAPES = {"heat3d": (512,) * 3, "wave3d": (512,) * 3, "poisson2d": (16384,) * 2, "heat2d": (16384,) * 2}
LINE = 32  # floats per 128-byte line

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s", flush=True)
for case in CASES:
    name, strategy = case.split(":")
    setup = problems.build(name, shape=SHAPES[name], dtype="float32", **({"radius": 8} if name == "wave3d" else {}))
    sweep, grid = setup.sweep, setup.grid
    k = codegen.sweep_kernel(sweep, strategy, grid.dtype, None)
    g, padded = grid.ghost, grid.padded_shape
    stride = f"(long long)n{grid.ndim - 1} + 2 * g"
    module = codegen.module_source([k], grid.dtype, case)
    assert module.count(stride) == 1, case
    pitch = -(-(padded[-1] + LINE) // LINE) * LINE
    rng = cp.random.default_rng(7)
    host = {n: rng.uniform(-1, 1, padded, dtype=cp.float32) for n in set(sweep.inputs) | {sweep.out}}
    if "vel" in host:
        host["vel"] *= 1e-4
    scal = tuple(np.int32(s) for s in grid.shape) + (np.int32(g),)
    results, outs = {}, {}
    for label, row, first in (("generated", padded[-1], 0), ("aligned", pitch, (LINE - g) % LINE), ("pitched", pitch, 0)):
        src = module.replace(stride, f"(long long){row}")
        fn = cp.RawModule(code=src, options=BASE_OPTIONS).get_function(k.name)
        if k.dynamic_smem > codegen.STATIC_SMEM_LIMIT:
            fn.max_dynamic_shared_size_bytes = k.dynamic_smem
        views, bufs = {}, []
        for n, a in host.items():
            buf = cp.full(int(np.prod(padded[:-1])) * row + LINE, np.nan, dtype=cp.float32)
            view = buf[first:first + int(np.prod(padded[:-1])) * row].reshape(padded[:-1] + (row,))[..., :padded[-1]]
            view[...] = a
            views[n], bufs = view, bufs + [buf]
        ptrs = tuple(bufs[list(host).index(n)][first:] for n in k.args)
        if sweep.out not in sweep.inputs:
            views[sweep.out][...] = cp.nan
        run = lambda fn=fn, ptrs=ptrs: fn(k.grid(grid.shape), k.block, ptrs + scal, shared_mem=k.dynamic_smem)
        run()
        outs[label] = cp.asnumpy(views[sweep.out][grid.interior])
        results[label] = run
    same = all(np.array_equal(outs["generated"], o) for o in outs.values()) and np.isfinite(outs["generated"]).all()
    bpc = sweep.bytes_per_cell(4)
    for rep in range(2):
        for label, run in results.items():
            sec = timed(run)
            pct = 100 * grid.cells * bpc / sec / 1e9 / ceiling
            print(f"{case:22s} {label:10s} pitch {padded[-1] if label == 'generated' else pitch:6d} "
                  f"{sec * 1e3:7.3f} ms {pct:5.1f}%  {'same bits' if same else 'DIFFERENT'}", flush=True)
    del host, results, outs
    cp.get_default_memory_pool().free_all_blocks()
