"""The residual: the sum of squares of a sweep over the interior, in float64 partial sums per block."""

from __future__ import annotations

from ....plan import Sweep
from ..kernel import Kernel, at_offset, cell_expression, centre_index, kernel_params, strides, sweep_args

REDUCE_THREADS = 256
REDUCE_BLOCKS = 1024


def reduce_sweep(sweep: Sweep, dtype, name: str) -> Kernel:
    """sum over the interior of (sweep rhs)^2 in double, one partial sum per block (deterministic)."""
    nd = sweep.ndim
    expr = cell_expression(sweep, dtype, lambda f, o: f"f_{f}[{at_offset('c', o)}]")
    last = nd - 1
    lines = [
        f'extern "C" __global__ void __launch_bounds__({REDUCE_THREADS}) {name}({kernel_params(sweep, True)})',
        "{",
        f"    __shared__ double warp_sum[{REDUCE_THREADS // 32}];",
        *("    " + s for s in strides(nd)),
        "    double acc = 0.0;",
    ]
    rows = " * ".join(f"(long long)n{a}" for a in range(last))
    lines.append(f"    for (long long row = blockIdx.x; row < {rows}; row += gridDim.x) {{")
    if nd == 3:
        lines.append("        const int i0 = (int)(row / n1), i1 = (int)(row - (long long)i0 * n1);")
    else:
        lines.append("        const int i0 = (int)row;")
    lines.append(f"        for (int i{last} = threadIdx.x; i{last} < n{last}; i{last} += {REDUCE_THREADS}) {{")
    lines.append("            " + centre_index(nd))
    lines.append(f"            const real v = {expr};")
    lines.append("            acc += (double)v * (double)v;")
    lines.append("        }")
    lines.append("    }")
    lines += [
        "    for (int d = 16; d > 0; d >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, d);",
        "    if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = acc;",
        "    __syncthreads();",
        "    if (threadIdx.x < 32) {",
        f"        acc = threadIdx.x < {REDUCE_THREADS // 32} ? warp_sum[threadIdx.x] : 0.0;",
        "        for (int d = 16; d > 0; d >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, d);",
        "        if (threadIdx.x == 0) partial[blockIdx.x] = acc;",
        "    }",
        "}",
    ]
    return Kernel(name, "\n".join(lines) + "\n", "reduce", (), (REDUCE_THREADS, 1, 1), (), sweep_args(sweep, True))
