"""Ceiling of wave3d's traffic: 3 streams read, 1 written (prev = 2u - prev + vel*u, pointwise) in float4, 512^3 padded."""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed
ceiling = copy_bandwidth()["memcpy_gbps"]
n = 528 * 528 * 528
u, p, v = (cp.random.uniform(-1, 1, n, dtype=cp.float32) for _ in range(3))
k = cp.RawKernel(r"""
extern "C" __global__ void r3w1(const float4* __restrict__ u, float4* __restrict__ p, const float4* __restrict__ v, const long long n)
{
    const long long i = blockIdx.x * 256LL + threadIdx.x;
    if (i < n) { const float4 a = u[i], b = p[i], c = v[i];
      p[i] = make_float4(2*a.x - b.x + c.x*a.x, 2*a.y - b.y + c.y*a.y, 2*a.z - b.z + c.z*a.z, 2*a.w - b.w + c.w*a.w); }
}""", "r3w1")
m = n // 4
run = lambda: k(((m + 255) // 256,), (256,), (u, p, v, np.int64(m)))
sec = timed(run)
print(f"memcpy {ceiling:.0f} GB/s; 3 reads + 1 write float4: {sec*1e3:.3f} ms {100 * n * 16 / sec / 1e9 / ceiling:.1f}% of copy")
