"""Hand experiment: heat3d with a row-column march (R rows per thread, register z-queue, U planes per trip,
in-plane neighbours through L1, no shared memory). Checked against rows' output, timed with CUDA events."""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge.backends.cuda import codegen
from stencilforge.bench.workloads import GPU_MATRIX, build_case

SRC = r"""
template<int R, int U, int TX, int CHUNK>
__global__ void __launch_bounds__(TX) march(float* __restrict__ out, const float* __restrict__ u, int n0, int n1, int n2, int g)
{
    const int i2 = blockIdx.x * TX + threadIdx.x;
    if (i2 >= n2) return;
    const int y0 = blockIdx.y * R, z0 = blockIdx.z * CHUNK, z1 = min(z0 + CHUNK, n0);
    const long long s1 = (long long)n2 + 2 * g, s0 = s1 * ((long long)n1 + 2 * g);
    long long base = ((long long)z0 + g) * s0 + ((long long)y0 + g) * s1 + (i2 + g);
    float q[U + 2][R];
    #pragma unroll
    for (int k = 0; k < R; ++k) { q[0][k] = u[base - s0 + k * s1]; q[1][k] = u[base + k * s1]; }
    for (int z = z0; z < z1; z += U, base += U * s0) {
        float ym[U], yp[U], xm[U][R], xp[U][R];
        #pragma unroll
        for (int j = 0; j < U; ++j) {
            const long long b = base + j * s0;
            #pragma unroll
            for (int k = 0; k < R; ++k) q[j + 2][k] = u[b + s0 + k * s1];
            ym[j] = u[b - s1];
            yp[j] = u[b + R * s1];
            #pragma unroll
            for (int k = 0; k < R; ++k) { xm[j][k] = u[b + k * s1 - 1]; xp[j][k] = u[b + k * s1 + 1]; }
        }
        #pragma unroll
        for (int j = 0; j < U; ++j) {
            if (z + j >= z1) break;
            #pragma unroll
            for (int k = 0; k < R; ++k) {
                if (y0 + k >= n1) break;
                const float ydn = k > 0 ? q[j + 1][k - 1] : ym[j];
                const float yup = k < R - 1 ? q[j + 1][k + 1] : yp[j];
                out[base + j * s0 + k * s1] = 1.500000060e-01f * q[j][k] + 1.500000060e-01f * ydn + 1.500000060e-01f * xm[j][k]
                    + 1.000000015e-01f * q[j + 1][k] + 1.500000060e-01f * xp[j][k] + 1.500000060e-01f * yup + 1.500000060e-01f * q[j + 2][k];
            }
        }
        #pragma unroll
        for (int k = 0; k < R; ++k) { q[0][k] = q[U][k]; q[1][k] = q[U + 1][k]; }
    }
}
"""
VARIANTS = [(4, 2, 256, 64), (4, 2, 256, 32), (4, 4, 256, 64), (2, 4, 256, 64), (2, 2, 256, 64), (8, 2, 128, 64),
            (4, 2, 128, 64), (4, 1, 256, 64), (4, 2, 512, 64), (2, 2, 512, 32), (4, 2, 256, 128), (1, 4, 512, 64)]

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")
w = next(w for w in GPU_MATRIX if w.name == "heat3d")
case = build_case(w)
plan, grid = case.plan, case.grid
f = {k: cp.asarray(v) for k, v in case.fields.items()}
scal = tuple(np.int32(n) for n in grid.shape) + (np.int32(grid.ghost),)
k = codegen.sweep_kernel(plan, "rows", grid.dtype, (1, 4, 256))
assert "1.500000060e-01f" in k.source and "1.000000015e-01f" in k.source, "coefficients changed"
fn = cp.RawModule(code="typedef float real;\n" + k.source, options=("-std=c++17",)).get_function(k.name)
rows = lambda: fn(k.grid(grid.shape), k.block, tuple(f[n] for n in k.args) + scal)  # noqa: E731
f[plan.out][...] = np.nan
rows()
ref = cp.asnumpy(f[plan.out])
sec = timed(rows)
print(f"rows (1,4,256)        {sec * 1e3:7.4f} ms {100 * grid.cells * 8 / sec / 1e9 / ceiling:5.1f}%")
names = [f"march<{r},{u},{t},{c}>" for r, u, t, c in VARIANTS]
mod = cp.RawModule(code=SRC, options=("-std=c++17",), name_expressions=names)
n0, n1, n2 = grid.shape
for (r, u, t, c), name in zip(VARIANTS, names):
    g = mod.get_function(name)
    launch = lambda g=g, r=r, t=t, c=c: g(((n2 + t - 1) // t, (n1 + r - 1) // r, (n0 + c - 1) // c), (t,), (f[plan.out], f["u"]) + scal)  # noqa: E731
    f[plan.out][...] = np.nan
    launch()
    same = np.array_equal(cp.asnumpy(f[plan.out]), ref, equal_nan=True)
    sec = timed(launch)
    print(f"{name:22s} {sec * 1e3:7.4f} ms {100 * grid.cells * 8 / sec / 1e9 / ceiling:5.1f}%  {'same' if same else 'DIFFERENT'}  regs {g.num_regs}", flush=True)
