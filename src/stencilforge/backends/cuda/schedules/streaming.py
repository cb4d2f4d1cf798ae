"""streaming and streaming_l1: the plane march with the in-plane halo in shared memory, or, without
shared memory or barriers, with in-plane neighbours read through the L1 cache."""

from __future__ import annotations

import math

import numpy as np

from ....plan import Sweep
from ..kernel import Kernel, Schedule, at_offset, kernel_params, strides
from .march import (
    _march_outputs,
    fit_unroll,
    in_box,
    march_head,
    march_kernel,
    march_layout,
    march_setup,
    marches,
    plane_threads,
    resident_threads,
)


def streaming_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """2.5D: march along axis 0 with a register queue per stencil field and the plane in shared memory.

    tile = (chunk, ty, tx) in 3D or (chunk, tx) in 2D: the block is (tx, ty)
    threads and walks `chunk` planes, re-reading 2r planes at each chunk start.
    Planes go UNROLL at a time (2 for a column radius above 4), and the loads
    of the next group (column, halo and pointwise values) are issued into
    registers before the barrier and the arithmetic of the current one, so DRAM
    requests stay in flight while the block waits and computes (ncu: barrier
    and long-scoreboard stalls dominated without it). Shared planes are double
    buffered, so one barrier per group suffices. The halo cells each thread
    loads are fixed per block and computed once.
    """
    lay = march_layout(sweep, tile)
    nd, plane_tile, radii, staged, star, threads, boxes = lay.nd, lay.plane_tile, lay.radii, lay.staged, lay.star, lay.threads, lay.boxes
    unroll = fit_unroll(lay.unroll, sum(math.prod(b) for b in boxes.values()) * np.dtype(dtype).itemsize, "streaming", tile)
    min_blocks = max(1, resident_threads(nd, lay.column_radius) // threads)
    lines = [
        f'extern "C" __global__ void __launch_bounds__({threads}, {min_blocks}) {name}({kernel_params(sweep)})',
        "{",
    ]
    for f in staged:
        lines.append(f"    __shared__ real s_{f}[2][{unroll}][{math.prod(boxes[f])}];")
    setup, slots = march_setup(nd, plane_tile, radii, boxes, star)
    lines += setup
    centre = {f: in_box(radii[f][1:], boxes[f], (0,) * nd) for f in staged}
    lines += [f"    const bool lc_{f} = active || edge_{f};" for f in staged]
    lines += march_head(lay, slots, unroll, "real", "0", "f", "s0", "z" if nd == 3 else "y", centre)
    lines += _march_outputs(
        sweep, dtype, radii, unroll, "active", lambda f, o, k: f"s_{f}[st][{k}][{in_box(radii[f][1:], boxes[f], o)}]"
    )
    return march_kernel(name, lines, "streaming", sweep, tile)


def streaming_cached_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """2.5D without shared memory: the column in a register queue, in-plane neighbours read through L1.

    No barriers, so warps never wait for each other and the loads of UNROLL
    planes stay in flight; the in-plane neighbours of a tile were just loaded by
    adjacent warps and hit L1/L2. Measured against `streaming` in
    docs/performance.md. Same tile convention as `streaming`.
    """
    lay = march_layout(sweep, tile)
    nd, chunk, plane_tile, radii = lay.nd, lay.chunk, lay.plane_tile, lay.radii
    staged, points, threads = lay.staged, lay.points, lay.threads
    unroll = lay.unroll
    min_blocks = max(1, 1024 // threads)  # at least 1024 resident threads: caps registers at 64
    lines = [
        f'extern "C" __global__ void __launch_bounds__({threads}, {min_blocks}) {name}({kernel_params(sweep)})',
        "{",
    ]
    if nd == 3:
        ty, tx = plane_tile
        lines += [
            f"    const int i2 = blockIdx.x * {tx} + threadIdx.x, i1 = blockIdx.y * {ty} + threadIdx.y;",
            "    if (i1 >= n1 || i2 >= n2) return;",
            *("    " + s for s in strides(3)),
            "    const long long col = ((long long)i1 + g) * s1 + (i2 + g);",
        ]
    else:
        (tx,) = plane_tile
        lines += [
            f"    const int i1 = blockIdx.x * {tx} + threadIdx.x;",
            "    if (i1 >= n1) return;",
            *("    " + s for s in strides(2)),
            "    const long long col = i1 + g;",
        ]
    chunk_axis = "z" if nd == 3 else "y"
    lines += [
        f"    const int z0 = blockIdx.{chunk_axis} * {chunk};",
        f"    const int z1 = min(z0 + {chunk}, n0);",
        "    long long p = ((long long)z0 + g) * s0;",
    ]
    for f in staged:
        rz = radii[f][0]
        lines.append(f"    real {', '.join(f'q_{f}_{j} = 0' for j in range(2 * rz + unroll))};")
        for j in range(2 * rz):
            lines.append(f"    q_{f}_{j} = f_{f}[p + col + {j - rz} * s0];")
    for f in points:
        lines.append(f"    real {', '.join(f'v_{f}_{k} = 0' for k in range(unroll))};")
    lines.append(f"    for (int z = z0; z < z1; z += {unroll}, p += {unroll} * s0) {{")
    for k in range(unroll):
        lines.append("        {" if k == 0 else f"        if (z + {k} < z1) {{")
        for f in staged:
            rz = radii[f][0]
            lines.append(f"            q_{f}_{2 * rz + k} = f_{f}[p + col + {rz + k} * s0];")
        for f in points:
            lines.append(f"            v_{f}_{k} = f_{f}[p + col + {k} * s0];")
        lines.append("        }")
    lines += _march_outputs(sweep, dtype, radii, unroll, None, lambda f, o, k: f"f_{f}[{at_offset(f'p + col + {k} * s0', o)}]")
    return march_kernel(name, lines, "streaming_l1", sweep, tile)


def _streaming_tile(sweep: Sweep, dtype) -> tuple[int, ...]:
    """2D: H100 and H200 gain nothing on rows longer than 256 (docs/performance.md). 3D: 2 x 256 planes for short
    halos; long ones: 256 planes of 32 x 32 (H100, commit 824fd67)."""
    if sweep.ndim == 2:
        return (64, 256)
    return (64, 2, 256) if sweep.radius <= 2 else (256, 32, 32)


STREAMING = Schedule("streaming", lambda sweep, dtype, tile, name, limits: streaming_sweep(sweep, dtype, tile, name),
                     tile=_streaming_tile, threads=plane_threads, applies=marches)
STREAMING_L1 = Schedule("streaming_l1", lambda sweep, dtype, tile, name, limits: streaming_cached_sweep(sweep, dtype, tile, name),
                        tile=lambda sweep, dtype: (64, 256) if sweep.ndim == 2 else (32, 8, 64), threads=plane_threads,
                        applies=marches)
