"""Round 10 (docs/performance.md): what separates our `flat` fused derivative from the naive peer, one
property at a time on flat's source: no __restrict__/const (plain loads, the peer's), the row index by a
literal n1 (the peer's shapes are literals), no __launch_bounds__; against the peer with 128 and 256 threads.

    PYTHONPATH=src python3 benchmarks/experiments/derivatives_flat_anatomy.py

Bench case derivatives-fused (float64 10000^2, random input); outputs NaN-poisoned before each variant's
first launch and compared bit for bit with the peer's; CUDA-event medians (cuda_bench.timed) as % of the
memcpy bandwidth measured in the same run; the list is run three times, interleaved.
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
T = 128
base = codegen.operator_kernel(op, "flat", grid.dtype, (T,))
INDEX = [
    "    unsigned q = (unsigned)((double)cu * inv_n1);",
    "    if (q * (unsigned)n1 > cu) q -= 1; else if ((q + 1) * (unsigned)n1 <= cu) q += 1;",
]
for line in INDEX:
    assert line in base.source, line


def variant(plain=False, literal=False, bounds=True):
    s = base.source
    if plain:
        s = s.replace("__restrict__ ", "").replace("const real*", "real*")
    if literal:
        s = s.replace(INDEX[0], f"    const unsigned q = cu / {n1}u;").replace(INDEX[1] + "\n", "")
        s = s.replace("(unsigned)n0 * (unsigned)n1", f"{cells}u").replace("(unsigned)n1", f"{n1}u").replace("n1 - 1", f"{n1 - 1}")
    if not bounds:
        s = s.replace(f"__launch_bounds__({T}) ", "")
    fn = cp.RawModule(code=f"typedef {codegen.ctype(grid.dtype)} real;\n" + s, options=("-std=c++17",)).get_function(base.name)
    args = (f["u"], *(f[o] for o in outs), np.int32(n0), np.int32(n1), np.float64(1.0 / n1))
    return lambda: fn(((cells + T - 1) // T,), (T,), args)


runs = {}
peer = cp.RawModule(code=naive_operator_source(op, grid.shape, grid.dtype), options=("-std=c++17",)).get_function("peer_naive")
for t in (128, 256):
    runs[f"peer, {t} threads"] = lambda t=t: peer(((cells + t - 1) // t,), (t,), (f["u"], *(f[o] for o in outs)))
runs["flat 128 (ours)"] = variant()
runs["flat 128, plain pointers"] = variant(plain=True)
runs["flat 128, literal n1"] = variant(literal=True)
runs["flat 128, plain + literal"] = variant(plain=True, literal=True)
runs["flat 128, no launch bounds"] = variant(bounds=False)

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
