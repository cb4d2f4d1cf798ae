"""Hand experiment: flat 1D variants (the peers' indexing) of the fused x-derivative and of heat3d, vs rows."""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge.backends.cuda import codegen
from stencilforge.bench.workloads import GPU_MATRIX, build_case

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")


def report(name, sec, bpc, cells, same):
    print(f"{name:34s} {sec * 1e3:7.4f} ms {100 * cells * bpc / sec / 1e9 / ceiling:5.1f}%  {'same' if same else 'DIFFERENT'}", flush=True)


# fused derivative along x
w = next(w for w in GPU_MATRIX if w.name == "derivatives-fused")
case = build_case(w)
op, grid = case.plan, case.grid
f = {k: cp.asarray(v) for k, v in case.fields.items()}
outs = [d.out for d in op.outputs]
n0, n1 = grid.shape
cells = n0 * n1
k = codegen.operator_kernel(op, "rows", grid.dtype, (1, 128))
base = cp.RawModule(code="typedef double real;\n" + k.source, options=("-std=c++17",)).get_function(k.name)
runs = {"rows (1,128)": lambda: base(k.grid(grid.shape), k.block, tuple(f[n] for n in k.args) + (np.int32(n0), np.int32(n1)))}
nv = codegen.operator_kernel(op, "naive", grid.dtype, (1, 256))
head = nv.source.split("{", 1)
body = head[1].split("\n")
idx = [i for i, line in enumerate(body) if "const long long c =" in line][0]
for tag, index in (
    ("64", ["    const long long c = blockIdx.x * 256LL + threadIdx.x;", "    if (c >= (long long)n0 * n1) return;", "    const int i1 = (int)(c % n1);"]),
    ("32", ["    const unsigned int cu = blockIdx.x * 256u + threadIdx.x;", "    if (cu >= (unsigned int)n0 * (unsigned int)n1) return;",
            "    const int i1 = (int)(cu % (unsigned int)n1);", "    const long long c = cu;"]),
):
    src = head[0] + "{" + "\n".join(index + body[idx + 1:])
    src = src.replace(nv.name, "flat")
    fn = cp.RawModule(code="typedef double real;\n" + src, options=("-std=c++17",)).get_function("flat")
    runs[f"flat{tag} 256"] = lambda fn=fn: fn(((cells + 255) // 256,), (256,), (f["u"], *(f[o] for o in outs), np.int32(n0), np.int32(n1)))
ref = None
for name, run in runs.items():
    for o in outs:
        f[o][...] = np.nan
    run()
    got = [cp.asnumpy(f[o]) for o in outs]
    ref = ref or got
    report(name, timed(run), case.bytes_per_cell, cells, all(np.array_equal(a, b) for a, b in zip(got, ref)))

# heat3d: 128 threads x 8 cells over the flattened interior (Triton's shape) vs rows
w = next(w for w in GPU_MATRIX if w.name == "heat3d")
case = build_case(w)
plan, grid = case.plan, case.grid
f = {kk: cp.asarray(v) for kk, v in case.fields.items()}
scal = tuple(np.int32(n) for n in grid.shape) + (np.int32(grid.ghost),)
k = codegen.sweep_kernel(plan, "rows", grid.dtype, (1, 4, 256))
expr = k.source.split("if (in0) v0 = ")[1].split(";")[0].replace("c0", "c")
rows = cp.RawModule(code="typedef float real;\n" + k.source, options=("-std=c++17",)).get_function(k.name)
runs = {"heat3d rows (1,4,256)": lambda: rows(k.grid(grid.shape), k.block, tuple(f[n] for n in k.args) + scal)}
FLAT = r"""
typedef float real;
template<int T, int C>
__global__ void __launch_bounds__(T) flat(real* __restrict__ f_u_new, const real* __restrict__ f_u, const int n0, const int n1, const int n2, const int g)
{
    const long long s1 = (long long)n2 + 2 * g;
    const long long s0 = s1 * ((long long)n1 + 2 * g);
    const unsigned int first = blockIdx.x * (unsigned)(T * C) + threadIdx.x, total = (unsigned)n0 * n1 * n2;
    real v[C]; long long cc[C];
    #pragma unroll
    for (int k = 0; k < C; ++k) {
        const unsigned int idx = first + k * T;
        const unsigned int i2 = idx % n2, r = idx / n2, i1 = r % n1, i0 = r / n1;
        const long long c = ((long long)i0 + g) * s0 + ((long long)i1 + g) * s1 + (i2 + g);
        cc[k] = c;
        if (idx < total) v[k] = EXPR;
    }
    #pragma unroll
    for (int k = 0; k < C; ++k) if (first + k * T < total) f_u_new[cc[k]] = v[k];
}
""".replace("EXPR", expr)
shapes = [(128, 8), (256, 4), (128, 4), (256, 8), (512, 2)]
names = [f"flat<{t},{c}>" for t, c in shapes]
mod = cp.RawModule(code=FLAT, options=("-std=c++17",), name_expressions=names)
for (t, c), name in zip(shapes, names):
    fn = mod.get_function(name)
    runs[f"heat3d {name}"] = lambda fn=fn, t=t, c=c: fn(((grid.cells + t * c - 1) // (t * c),), (t,), (f[plan.out], f["u"]) + scal)
ref = None
for name, run in runs.items():
    f[plan.out][...] = np.nan
    run()
    got = cp.asnumpy(f[plan.out])
    ref = got if ref is None else ref
    report(name, timed(run), case.bytes_per_cell, grid.cells, np.array_equal(got, ref, equal_nan=True))
