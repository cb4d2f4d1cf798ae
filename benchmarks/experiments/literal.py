"""Hand experiment: do compile-time shapes explain the peers' last percent? Fused x-derivative and heat3d."""
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


def report(name, sec, bpc, cells, same):
    print(f"{name:40s} {sec * 1e3:7.4f} ms {100 * cells * bpc / sec / 1e9 / ceiling:5.1f}%  {'same' if same else 'DIFFERENT'}", flush=True)


def run_all(runs, outs, f, bpc, cells):
    ref = None
    for name, run in runs.items():
        for o in outs:
            f[o][...] = np.nan
        run()
        got = [cp.asnumpy(f[o]) for o in outs]
        ref = ref or got
        report(name, timed(run), bpc, cells, all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, ref)))


w = next(w for w in GPU_MATRIX if w.name == "derivatives-fused")
case = build_case(w)
op, grid = case.plan, case.grid
f = {k: cp.asarray(v) for k, v in case.fields.items()}
outs = [d.out for d in op.outputs]
n0, n1 = grid.shape
cells = n0 * n1
k = codegen.operator_kernel(op, "rows", grid.dtype, (1, 128))
rows = cp.RawModule(code="typedef double real;\n" + k.source, options=("-std=c++17",)).get_function(k.name)
runs = {"rows (1,128)": lambda: rows(k.grid(grid.shape), k.block, tuple(f[n] for n in k.args) + (np.int32(n0), np.int32(n1)))}
peer = naive_operator_source(op, grid.shape, grid.dtype)
nv = codegen.operator_kernel(op, "naive", grid.dtype, (1, 256))
head, rest = nv.source.split("{", 1)
body = rest.split("\n")
idx = [i for i, line in enumerate(body) if "const long long c =" in line][0]
index = ["    const unsigned int cu = blockIdx.x * 256u + threadIdx.x;", "    if (cu >= (unsigned int)n0 * (unsigned int)n1) return;",
         "    const int i1 = (int)(cu % (unsigned int)n1);", "    const long long c = cu;"]
flat = (head + "{" + "\n".join(index + body[idx + 1:])).replace(nv.name, "flat")
variants = {
    "peer (literal shapes)": peer,
    "peer, shapes as arguments": peer.replace("const double* u, ", "const double* u, const int n0, const int n1, ").replace(
        f"{cells}LL", "(long long)n0 * n1").replace(f"{n1}LL", "(long long)n1").replace(f"== {n1 - 1}", "== n1 - 1").replace(f"== {n1 - 2}", "== n1 - 2"),
    "flat32": flat,
    "flat32, literal shapes": flat.replace(", const int n0, const int n1)", ")").replace("{", f"{{\n    const int n0 = {n0}, n1 = {n1};", 1),
    "flat32, no launch bounds": flat.replace("__launch_bounds__(256) ", ""),
}
for name, src in variants.items():
    fn = cp.RawModule(code="typedef double real;\n" + src, options=("-std=c++17",)).get_function("peer_naive" if name.startswith("peer") else "flat")
    literal = name.endswith("(literal shapes)") or name.endswith("literal shapes")
    args = lambda fn=fn, literal=literal: (f["u"], *(f[o] for o in outs)) if literal else (
        (f["u"], np.int32(n0), np.int32(n1), *(f[o] for o in outs)) if name.startswith("peer") else (f["u"], *(f[o] for o in outs), np.int32(n0), np.int32(n1)))
    a = args()
    runs[name] = lambda fn=fn, a=a: fn(((cells + 255) // 256,), (256,), a)
run_all(runs, outs, f, case.bytes_per_cell, cells)
print(variants["peer, shapes as arguments"][:400])
