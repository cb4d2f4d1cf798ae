"""Round 10 (docs/performance.md): does the backend's pair of CUDA events around every launch (its kernel_s
clock) cost time between kernels? The same kernel launched raw, raw with an event pair around each launch,
and through the backend, each timed by cuda_bench.timed (outer events, median of 7 x 10 launches), for
the bench's derivatives-fused (flat) and poisson2d (rows, one sweep) cases; three interleaved passes.

    PYTHONPATH=src python3 benchmarks/experiments/event_bubble.py
"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge.backends.cuda import CudaBackend, codegen
from stencilforge.bench.peers import naive_operator_source
from stencilforge.bench.workloads import GPU_MATRIX, build_case

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")
pair = (cp.cuda.Event(), cp.cuda.Event())


def with_events(fn):
    def run():
        pair[0].record()
        fn()
        pair[1].record()
    return run


def compiled(k, dtype):
    return cp.RawModule(code=f"typedef {codegen.ctype(dtype)} real;\n" + k.source, options=("-std=c++17",)).get_function(k.name)


cases = {}
d = build_case(next(w for w in GPU_MATRIX if w.name == "derivatives-fused"))
f = {k: cp.asarray(v) for k, v in d.fields.items()}
outs = [o.out for o in d.plan.outputs]
n0, n1 = d.grid.shape
k = codegen.operator_kernel(d.plan, "flat", d.grid.dtype, (128,))
fn = compiled(k, d.grid.dtype)
args = (f["u"], *(f[o] for o in outs), np.int32(n0), np.int32(n1), np.float64(1.0 / n1))
raw = lambda: fn(k.grid(d.grid.shape), k.block, args)
peer = cp.RawModule(code=naive_operator_source(d.plan, d.grid.shape, d.grid.dtype), options=("-std=c++17",)).get_function("peer_naive")
apply = CudaBackend("flat").axis_operator(d.plan, d.grid.dtype, d.grid.shape)
cases["derivatives-fused"] = (d, {
    "flat raw": raw,
    "flat raw + event pair": with_events(raw),
    "flat through the backend": lambda: apply(f["u"], *(f[o] for o in outs)),
    "peer 256 raw": lambda: peer(((n0 * n1 + 255) // 256,), (256,), (f["u"], *(f[o] for o in outs))),
})
p = build_case(next(w for w in GPU_MATRIX if w.name == "poisson2d"))
g = {k: cp.asarray(v) for k, v in p.fields.items()}
ks = codegen.sweep_kernel(p.plan, "rows", p.grid.dtype)
fs = compiled(ks, p.grid.dtype)
sargs = tuple(g[n] for n in ks.args) + tuple(np.int32(n) for n in p.grid.shape) + (np.int32(p.grid.ghost),)
sraw = lambda: fs(ks.grid(p.grid.shape), ks.block, sargs)
step = CudaBackend("rows").sweep(p.plan, p.grid)
cases["poisson2d"] = (p, {
    "rows raw": sraw,
    "rows raw + event pair": with_events(sraw),
    "rows through the backend": lambda: step(g),
})
for name, (case, runs) in cases.items():
    table = {}
    for rep in range(3):
        for label, run in runs.items():
            sec = timed(run)
            table.setdefault(label, []).append((sec * 1e3, 100 * case.cells * case.bytes_per_cell / sec / 1e9 / ceiling))
    print(f"\n{name} (ms / % of copy, passes 1-3)")
    for label, vals in table.items():
        print(f"{label:28s} " + "   ".join(f"{ms:.4f} {pct:5.1f}%" for ms, pct in vals), flush=True)
