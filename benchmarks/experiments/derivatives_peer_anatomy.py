"""Hand experiment: which part of the naive peer's structure gives it its lead on the fused x-derivative?

    PYTHONPATH=src python3 benchmarks/experiments/derivatives_peer_anatomy.py

The peer (one thread per cell, flat launch, shapes as literals, no __restrict__, each derivative stored
as soon as computed) is varied one property at a time, and our rows/naive kernels are run beside it, on
the bench's derivatives-fused case (float64 10000^2, random input). Outputs are NaN-poisoned and compared
bit for bit with the peer's; times are CUDA-event medians (cuda_bench.timed) as % of the memcpy
bandwidth measured in the same run; registers per thread from the loaded function.
"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge.backends.cuda import codegen
from stencilforge.bench.peers import naive_operator_source
from stencilforge.bench.workloads import GPU_MATRIX, build_case

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")
w = next(w for w in GPU_MATRIX if w.name == "derivatives-fused")
case = build_case(w)
op, grid = case.plan, case.grid
f = {k: cp.asarray(v) for k, v in case.fields.items()}
outs = [d.out for d in op.outputs]
n0, n1 = grid.shape
cells = n0 * n1
peer = naive_operator_source(op, grid.shape, grid.dtype)
variants = {
    "peer": (peer, 256),
    "peer, 128 threads": (peer, 128),
    "peer, 512 threads": (peer, 512),
    "peer, 1024 threads": (peer, 1024),
    "peer, __restrict__": (peer.replace("const double* u", "const double* __restrict__ u").replace("double* o", "double* __restrict__ o"), 256),
    "peer, __launch_bounds__(256)": (peer.replace('extern "C" __global__ void', 'extern "C" __global__ void __launch_bounds__(256)'), 256),
    "peer, 32-bit index": (peer.replace("const long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x;", "const int idx = blockIdx.x * blockDim.x + threadIdx.x;"), 256),
}
runs, regs = {}, {}
for name, (src, threads) in variants.items():
    fn = cp.RawModule(code=src, options=("-std=c++17",)).get_function("peer_naive")
    regs[name] = fn.num_regs
    runs[name] = lambda fn=fn, t=threads: fn(((cells + t - 1) // t,), (t,), (f["u"], *(f[o] for o in outs)))
for strategy, tile in [("rows", (1, 128)), ("rows", (1, 256)), ("naive", (1, 256)), ("naive", (2, 128)), ("rows_vec", (1, 256))]:
    k = codegen.operator_kernel(op, strategy, grid.dtype, tile)
    fn = cp.RawModule(code="typedef double real;\n" + k.source, options=("-std=c++17",)).get_function(k.name)
    name = f"ours {strategy} {tile}"
    regs[name] = fn.num_regs
    args = tuple(f[n] for n in k.args) + (np.int32(n0), np.int32(n1))
    runs[name] = lambda fn=fn, k=k, args=args: fn(k.grid(grid.shape), k.block, args)
ref, rows = None, []
for name, run in runs.items():
    for o in outs:
        f[o][...] = np.nan
    run()
    got = [cp.asnumpy(f[o]) for o in outs]
    ref = ref or got
    same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, ref))
    sec = timed(run)
    pct = 100 * cells * case.bytes_per_cell / sec / 1e9 / ceiling
    rows.append((name, pct, same))
    print(f"{name:34s} {sec * 1e3:7.4f} ms {pct:5.1f}%  regs {regs[name]:3d}  {'same' if same else 'DIFFERENT'}", flush=True)
print("\nsorted:")
for name, pct, same in sorted(rows, key=lambda r: -r[1]):
    print(f"{name:34s} {pct:5.1f}%{'' if same else '  DIFFERENT'}")
