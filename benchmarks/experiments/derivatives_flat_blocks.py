"""Round 10 (docs/performance.md): our `flat` fused derivative with 64-256 threads per block, and with
2 or 4 cells per thread (cells blockIdx.x * T * k + j * T + threadIdx.x, j < k, unrolled), against the
naive peer with 128 and 256 threads.

    PYTHONPATH=src python3 benchmarks/experiments/derivatives_flat_blocks.py

Bench case derivatives-fused (float64 10000^2, random input); outputs NaN-poisoned before every
variant's first launch and compared bit for bit with the peer's; CUDA-event medians (cuda_bench.timed)
as % of the memcpy bandwidth measured in the same run; the list is run three times, interleaved.
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
case = build_case(next(w for w in GPU_MATRIX if w.name == "derivatives-fused"))
op, grid = case.plan, case.grid
f = {k: cp.asarray(v) for k, v in case.fields.items()}
outs = [d.out for d in op.outputs]
n0, n1 = grid.shape
cells = n0 * n1


def compiled(source, name):
    return cp.RawModule(code=f"typedef {codegen.ctype(grid.dtype)} real;\n" + source, options=("-std=c++17",)).get_function(name)


def several(source, threads, k):
    """The flat kernel's body run for k cells per thread, T = threads apart."""
    head, body = source.split("{", 1)
    first = f"    const unsigned cu = blockIdx.x * {threads}u + threadIdx.x;"
    assert first in body
    body = body.replace(first, f"    #pragma unroll\n    for (unsigned j = 0; j < {k}u; ++j) {{\n    const unsigned cu = blockIdx.x * {threads * k}u + j * {threads}u + threadIdx.x;")
    return head + "{" + body.rstrip().rstrip("}") + "}\n}\n"


runs = {}
peer = cp.RawModule(code=naive_operator_source(op, grid.shape, grid.dtype), options=("-std=c++17",)).get_function("peer_naive")
for t in (128, 256):
    runs[f"peer, {t} threads"] = lambda t=t: peer(((cells + t - 1) // t,), (t,), (f["u"], *(f[o] for o in outs)))
args = (f["u"], *(f[o] for o in outs), np.int32(n0), np.int32(n1), np.float64(1.0 / n1))
for t in (64, 96, 128, 192, 256):
    k = codegen.operator_kernel(op, "flat", grid.dtype, (t,))
    fn = compiled(k.source, k.name)
    runs[f"flat {t}"] = lambda fn=fn, t=t: fn(((cells + t - 1) // t,), (t,), args)
for t, per in ((128, 2), (128, 4), (64, 2), (256, 2)):
    k = codegen.operator_kernel(op, "flat", grid.dtype, (t,))
    fn = compiled(several(k.source, t, per), k.name)
    runs[f"flat {t} x {per} cells"] = lambda fn=fn, t=t, per=per: fn(((cells + t * per - 1) // (t * per),), (t,), args)

ref, table = None, {}
for rep in range(3):
    for name, run in runs.items():
        for o in outs:
            f[o][...] = np.nan
        run()
        got = [cp.asnumpy(f[o]) for o in outs]
        ref = ref or got
        same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, ref))
        table.setdefault(name, []).append(100 * case.cells * case.bytes_per_cell / timed(run) / 1e9 / ceiling)
        if not same:
            table[name].append("DIFFERENT")
print("\nderivatives-fused (% of copy, runs 1 / 2 / 3)")
for name, pcts in sorted(table.items(), key=lambda kv: -sum(p for p in kv[1] if isinstance(p, float))):
    print(f"{name:28s} " + " / ".join(f"{p:5.1f}" if isinstance(p, float) else p for p in pcts), flush=True)
