"""Hand experiment: a flat one-thread-per-cell derivative kernel with run-time shapes, whose row index
comes from a reciprocal of n1 passed in double (a multiply, a truncation and a one-step correction)
instead of an integer division, against the naive peer compiled for the shape and our rows.

    PYTHONPATH=src python3 benchmarks/experiments/derivatives_flat.py

Bench case derivatives-fused (and derivatives-y, the pair along y), float64 10000^2, random input;
outputs NaN-poisoned and compared bit for bit with the peer's; CUDA-event medians (cuda_bench.timed)
as % of the memcpy bandwidth measured in the same run; the whole list is run twice.
"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge.backends.cuda import codegen
from stencilforge.bench.peers import naive_operator_source
from stencilforge.bench.workloads import GPU_MATRIX, Workload, build_case

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")
INDEX = {
    "reciprocal": [
        "    const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;",
        "    if (c >= (unsigned)n0 * (unsigned)n1) return;",
        "    unsigned q = (unsigned)((double)c * inv_n1);",
        "    if (q * (unsigned)n1 > c) q -= 1; else if ((q + 1) * (unsigned)n1 <= c) q += 1;",
        "    const int i0 = q, i1 = c - q * (unsigned)n1;",
        "    const long long cc = c;",
    ],
    "division": [
        "    const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;",
        "    if (c >= (unsigned)n0 * (unsigned)n1) return;",
        "    const int i0 = c / (unsigned)n1, i1 = c % (unsigned)n1;",
        "    const long long cc = c;",
    ],
}


def flat_source(op, dtype, index):
    nv = codegen.operator_kernel(op, "naive", dtype, (1, 256))
    head, rest = nv.source.split("{", 1)
    body = rest.split("\n")
    start = [i for i, line in enumerate(body) if "const long long c =" in line][0]
    src = head.replace(f"__launch_bounds__(256) {nv.name}", "flat").replace("const int n1)", "const int n1, const double inv_n1)")
    return "typedef double real;\n" + src + "{" + "\n".join(INDEX[index] + [line.replace("[c + ", "[cc + ").replace("[c]", "[cc]") for line in body[start + 1:]])


def case_runs(wname):
    w = next((w for w in GPU_MATRIX if w.name == wname), None) or Workload(wname, (10000, 10000), "float64")
    case = build_case(w)
    op, grid = case.plan, case.grid
    f = {k: cp.asarray(v) for k, v in case.fields.items()}
    outs = [d.out for d in op.outputs]
    n0, n1 = grid.shape
    cells = n0 * n1
    runs = {}
    peer = cp.RawModule(code=naive_operator_source(op, grid.shape, grid.dtype), options=("-std=c++17",)).get_function("peer_naive")
    for t in (256, 128):
        runs[f"peer, {t} threads"] = lambda t=t: peer(((cells + t - 1) // t,), (t,), (f["u"], *(f[o] for o in outs)))
    for index in INDEX:
        fn = cp.RawModule(code=flat_source(op, grid.dtype, index), options=("-std=c++17",)).get_function("flat")
        args = (f["u"], *(f[o] for o in outs), np.int32(n0), np.int32(n1), np.float64(1.0 / n1))
        for t in (128, 256):
            runs[f"flat {index}, {t} threads"] = lambda fn=fn, t=t, args=args: fn(((cells + t - 1) // t,), (t,), args)
    for strategy, tile in ([("rows", (1, 128))] if op.axis == 1 else [("naive", (8, 32))]):
        k = codegen.operator_kernel(op, strategy, grid.dtype, tile)
        fn = cp.RawModule(code="typedef double real;\n" + k.source, options=("-std=c++17",)).get_function(k.name)
        args = tuple(f[n] for n in k.args) + (np.int32(n0), np.int32(n1))
        runs[f"ours {strategy} {tile}"] = lambda fn=fn, k=k, args=args: fn(k.grid(grid.shape), k.block, args)
    return case, f, outs, runs


for wname in ("derivatives-fused", "derivatives-y"):
    case, f, outs, runs = case_runs(wname)
    ref, table = None, {}
    for rep in range(2):
        for name, run in runs.items():
            for o in outs:
                f[o][...] = np.nan
            run()
            got = [cp.asnumpy(f[o]) for o in outs]
            ref = ref or got
            same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, ref))
            pct = 100 * case.cells * case.bytes_per_cell / timed(run) / 1e9 / ceiling
            table.setdefault(name, []).append(pct)
            if not same:
                table[name].append("DIFFERENT")
    print(f"\n{wname} (% of copy, run 1 / run 2)")
    for name, pcts in sorted(table.items(), key=lambda kv: -sum(p for p in kv[1] if isinstance(p, float))):
        print(f"{name:32s} " + " / ".join(f"{p:5.1f}" if isinstance(p, float) else p for p in pcts), flush=True)
