"""Round 12 (docs/performance.md): can the fused derivative's launch, not its arithmetic, beat the naive peer?

Variants of our `flat` source against the peer, on the bench case (float64 10000^2, random input):
- grid-stride: a fixed grid of B blocks per SM, each thread looping over cells (fewer block launches);
- evict-first loads of u (`__ldcs`), whose lines are dead once the warps next to them have read them.
Outputs are NaN-poisoned before each variant's first launch and compared bit for bit with the peer's;
CUDA-event medians as % of the memcpy bandwidth measured in the same run; the list runs three times,
interleaved (cuda_bench.interleaved).

    PYTHONPATH=src python3 benchmarks/experiments/derivatives_persistent.py
"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, interleaved, print_interleaved

from stencilforge.backends.cuda import codegen
from stencilforge.bench.peers import naive_operator_source
from stencilforge.bench.workloads import GPU_MATRIX, build_case

T = 128
HEAD = (f"    const unsigned cu = blockIdx.x * {T}u + threadIdx.x;\n"
        "    if (cu >= (unsigned)n0 * (unsigned)n1) return;\n")
LOOP = f"    for (unsigned cu = blockIdx.x * {T}u + threadIdx.x; cu < (unsigned)n0 * (unsigned)n1; cu += gridDim.x * {T}u) {{\n"


def source(base: str, stride: bool, evict_first: bool) -> str:
    assert HEAD in base and base.rstrip().endswith("}")
    s = base
    if stride:
        s = s.replace(HEAD, LOOP).rstrip() + "\n}\n"
    if evict_first:
        s = s.replace("f_u[c + (", "__ldcs(f_u + c + (").replace(")]", "))")
    return s


def main() -> None:
    ceiling = copy_bandwidth()["memcpy_gbps"]
    print(f"memcpy {ceiling:.0f} GB/s")
    case = build_case(next(w for w in GPU_MATRIX if w.name == "derivatives-fused"))
    op, grid = case.plan, case.grid
    f = {k: cp.asarray(v) for k, v in case.fields.items()}
    outs = [d.out for d in op.outputs]
    n0, n1 = grid.shape
    cells = n0 * n1
    base = codegen.operator_kernel(op, "flat", grid.dtype, (T,))
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    args = (f["u"], *(f[o] for o in outs), np.int32(n0), np.int32(n1), np.float64(1.0 / n1))

    def variant(stride=False, evict_first=False, per_sm=None):
        code = f"typedef {codegen.ctype(grid.dtype)} real;\n" + source(base.source, stride, evict_first)
        fn = cp.RawModule(code=code, options=("-std=c++17",)).get_function(base.name)
        blocks = sms * per_sm if stride else (cells + T - 1) // T
        return lambda: fn((blocks,), (T,), args)

    runs = {}
    peer = cp.RawModule(code=naive_operator_source(op, grid.shape, grid.dtype), options=("-std=c++17",)).get_function("peer_naive")
    for t in (128, 256):
        runs[f"peer, {t} threads"] = lambda t=t: peer(((cells + t - 1) // t,), (t,), (f["u"], *(f[o] for o in outs)))
    runs["flat 128 (ours)"] = variant()
    runs["flat, evict-first u"] = variant(evict_first=True)
    for per_sm in (8, 16, 32, 64):
        runs[f"flat grid-stride, {per_sm} blocks/SM"] = variant(stride=True, per_sm=per_sm)
    runs["flat grid-stride 16, evict-first u"] = variant(stride=True, evict_first=True, per_sm=16)

    table = interleaved(runs, [f[o] for o in outs], case.cells * case.bytes_per_cell, ceiling)
    print_interleaved("derivatives-fused", table)


if __name__ == "__main__":
    main()
