"""Hand experiment: our x-derivative kernels with compile-time shapes, against the naive peer, and the
ceiling of the fused workload's traffic (1 read + 2 writes of doubles) measured by a plain copy kernel.

    PYTHONPATH=src python3 benchmarks/experiments/derivatives_literal.py

Every variant runs on the bench's derivatives-fused case (float64 10000^2, random input), its outputs
poisoned with NaN first and compared bit for bit with rows (1,128); times are CUDA-event medians
(cuda_bench.timed), as % of the memcpy bandwidth measured in the same run.
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
SIG = ", const int n0, const int n1)"


def ours(strategy, tile, literal):
    k = codegen.operator_kernel(op, strategy, grid.dtype, tile)
    src = k.source
    if literal:
        assert SIG in src
        src = src.replace(SIG, ")").replace("{", f"{{\n    const int n0 = {n0}, n1 = {n1};", 1)
    fn = cp.RawModule(code="typedef double real;\n" + src, options=("-std=c++17",)).get_function(k.name)
    args = tuple(f[n] for n in k.args) + (() if literal else (np.int32(n0), np.int32(n1)))
    return lambda: fn(k.grid(grid.shape), k.block, args)


runs = {}
for strategy, tile in [("rows", (1, 128)), ("rows", (1, 256)), ("rows", (2, 128)), ("rows_vec", (1, 256)), ("rows_vec", (1, 128)), ("rows_vec", (2, 128))]:
    for literal in (False, True):
        runs[f"{strategy} {tile}{' literal' if literal else ''}"] = ours(strategy, tile, literal)
peer = cp.RawModule(code="typedef double real;\n" + naive_operator_source(op, grid.shape, grid.dtype), options=("-std=c++17",)).get_function("peer_naive")
runs["peer (literal shapes)"] = lambda: peer(((cells + 255) // 256,), (256,), (f["u"], *(f[o] for o in outs)))
ref = None
rows = []
for name, run in runs.items():
    for o in outs:
        f[o][...] = np.nan
    run()
    got = [cp.asnumpy(f[o]) for o in outs]
    ref = ref or got
    same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, ref))
    sec = timed(run)
    pct = 100 * cells * case.bytes_per_cell / sec / 1e9 / ceiling
    rows.append((name, sec, pct, same))
    print(f"{name:34s} {sec * 1e3:7.4f} ms {pct:5.1f}%  {'same' if same else 'DIFFERENT'}", flush=True)

copy12 = cp.RawKernel(r"""
extern "C" __global__ void copy12(const double2* __restrict__ a, double2* __restrict__ b, double2* __restrict__ c, const long long n)
{
    const long long i = blockIdx.x * 256LL + threadIdx.x;
    if (i < n) { const double2 v = a[i]; b[i] = v; c[i] = make_double2(2.0 * v.x, 2.0 * v.y); }
}""", "copy12")
half = cells // 2
copy_run = lambda: copy12(((half + 255) // 256,), (256,), (f["u"], f[outs[0]], f[outs[1]], np.int64(half)))
copy_run()
assert cp.array_equal(f[outs[0]], f["u"]) and cp.array_equal(f[outs[1]], 2 * f["u"])
sec = timed(copy_run)
print(f"{'copy 1 read + 2 writes (double2)':34s} {sec * 1e3:7.4f} ms {100 * cells * 24 / sec / 1e9 / ceiling:5.1f}%  (ceiling of this traffic)")
print("\nsorted:")
for name, sec, pct, same in sorted(rows, key=lambda r: -r[2]):
    print(f"{name:34s} {pct:5.1f}%{'' if same else '  DIFFERENT'}")
