"""streaming_vec: streaming with 4 (float) or 2 (double) cells per thread along x, every load,
store and shared-memory access a vector."""

from __future__ import annotations

import math

import numpy as np

from ....errors import StencilforgeError
from ....plan import Sweep
from ..kernel import Kernel, Schedule, cell_expression, ctype, field_radii, kernel_params, strides, sweep_args
from .march import (
    fit_unroll,
    halo_cells,
    halo_slot,
    march_head,
    march_layout,
    marches,
    place_3d,
    queue_shift,
    resident_threads,
)

VECTOR_TYPES = {("float", 4): "float4", ("float", 2): "float2", ("double", 2): "double2"}
LANES = "xyzw"


def vector_width(sweep: Sweep, dtype) -> int:
    """Cells per thread of `streaming_vec`: the widest vector of the dtype (16 bytes at most) that
    divides the x radius of a 3D sweep, or 0 where none does (then only `streaming` applies)."""
    if sweep.ndim != 3:
        return 0
    rx = max((r[-1] for r in field_radii(sweep).values()), default=0)
    return next((width for (c, width) in VECTOR_TYPES if c == ctype(dtype) and rx % width == 0), 0)


def streaming_vector_sweep(sweep: Sweep, dtype, tile: tuple[int, int, int], name: str) -> Kernel:
    """streaming with `vector_width` consecutive cells per thread along x, every access a vector.

    The plane tile is cut into chunks of `vector` cells: a thread owns one
    chunk, its column queue holds vectors, and the shared plane (halo included,
    whose x width is a multiple of the chunk) is read one vector per chunk,
    so a radius-8 row segment for 4 cells is 5 loads instead of 64. Global
    loads and stores are whole vectors: the launcher runs this kernel only
    where the ghost width and the x extent are multiples of the width (rows
    then start aligned) and falls back to scalar streaming elsewhere. Fewer
    instructions and registers per cell, which makes it auto's kernel for
    long even-radius stencils (benchmarks/results/h100-bench-74bc822.json).
    """
    vector = vector_width(sweep, dtype)
    if not vector:
        raise StencilforgeError("strategy streaming_vec needs a 3D sweep with an even x radius; use streaming")
    lay = march_layout(sweep, tile)
    (ty_cells, tx_cells), radii, staged, star = lay.plane_tile, lay.radii, lay.staged, lay.star
    if tx_cells % vector:
        raise StencilforgeError(f"strategy streaming_vec needs a tile whose x extent is a multiple of {vector}, got {tuple(tile)}")
    vt = VECTOR_TYPES[(ctype(dtype), vector)]
    lanes = LANES[:vector]
    tx = tx_cells // vector
    threads = ty_cells * tx
    width = {f: tx + 2 * radii[f][2] // vector for f in staged}
    rows = {f: ty_cells + 2 * radii[f][1] for f in staged}
    unroll = fit_unroll(lay.unroll, sum(rows[f] * width[f] for f in staged) * vector * np.dtype(dtype).itemsize, "streaming_vec", tile)
    resident = resident_threads(3, lay.column_radius) // vector
    lines = [
        f'extern "C" __global__ void __launch_bounds__({threads}, {max(1, resident // threads)}) {name}({kernel_params(sweep)})',
        "{",
    ]
    for f in staged:
        lines.append(f"    __shared__ {vt} s_{f}[2][{unroll}][{rows[f] * width[f]}];")
    lines += [
        "    const int tx = threadIdx.x, ty = threadIdx.y;",
        f"    const int tid = ty * {tx} + tx;",
        f"    const int b2 = blockIdx.x * {tx_cells}, b1 = blockIdx.y * {ty_cells};",
        f"    const int i2 = b2 + {vector} * tx, i1 = b1 + ty;",
        "    const bool active = i1 < n1 && i2 < n2;",
        *("    " + s for s in strides(3)),
        f"    const long long s0v = s0 / {vector}, s1v = s1 / {vector};",
        f"    const long long col = ((long long)i1 + g) * s1v + (i2 + g) / {vector};",
    ]
    for n in sweep_args(sweep):
        const = "" if n == sweep.out else "const "
        lines.append(f"    {const}{vt}* __restrict__ v_{n} = reinterpret_cast<{const}{vt}*>(f_{n});")
    slots = {}
    for f in staged:
        ry, rx = radii[f][1], radii[f][2]
        rects = halo_cells((ty_cells, tx), (ry, rx // vector), star)
        total = sum(al * bl for _, _, al, _, bl in rects)
        slots[f] = math.ceil(total / threads)
        lines.append(f"    const bool lc_{f} = active || (i1 < n1 + {ry} && i2 < n2 + {rx});")
        for m in range(slots[f]):
            lines += halo_slot(f, m, threads, rects, place_3d(f, m, (ry, rx), total, width[f], vector))
    centre = {f: f"(ty + {radii[f][1]}) * {width[f]} + tx + {radii[f][2] // vector}" for f in staged}
    lines += march_head(lay, slots, unroll, vt, f"make_{vt}({', '.join(['0'] * vector)})", "v", "s0v", "z", centre)
    for k in range(unroll):
        planes: dict[tuple[str, int, int], str] = {}

        def access(f, o, c, k=k, planes=planes):
            if f not in radii:
                return f"v_{f}_{k}.{lanes[c]}"
            if o[0] != 0 or not any(o[1:]):
                return f"q_{f}_{radii[f][0] + o[0] + k}.{lanes[c]}"
            ry, rx = radii[f][1], radii[f][2]
            e = rx + o[2] + c
            key = (f, ry + o[1], e // vector)
            if key not in planes:
                planes[key] = f"t_{f}_{k}_{key[1]}_{key[2]}"
            return f"{planes[key]}.{lanes[e % vector]}"

        values = [f"            const real r{c} = {cell_expression(sweep, dtype, lambda f, o, c=c: access(f, o, c))};"
                  for c in range(vector)]
        lines.append("        {" if k == 0 else f"        if (z + {k} < z1) {{")
        for (f, row, cx), var in planes.items():
            lines.append(f"            const {vt} {var} = s_{f}[st][{k}][(ty + {row}) * {width[f]} + tx + {cx}];")
        lines += values
        lanes_out = ", ".join(f"r{c}" for c in range(vector))
        lines.append(f"            if (active) v_{sweep.out}[p + col + {k} * s0v] = make_{vt}({lanes_out});")
        lines.append("        }")
    lines += queue_shift(radii, unroll) + ["    }", "}"]
    block = (tx, ty_cells, 1)
    return Kernel(name, "\n".join(lines) + "\n", "streaming_vec", tile, block, tuple(tile), sweep_args(sweep), vector=vector,
                  ghost_vectors=True)


def _vectors(sweep: Sweep, dtype) -> str | None:
    if vector_width(sweep, dtype):
        return marches(sweep, dtype)
    return marches(sweep, dtype) or "strategy streaming_vec needs a 3D sweep with an even x radius; use streaming"


def _tile(sweep: Sweep, dtype) -> tuple[int, ...]:
    """Chunks of 64 planes, not 256 (benchmarks/results/h100-wave3d-streaming-vec-chunks-and-narrow.json). In
    float32, r > 4 takes 8 x 32 cells (h100-wave3d-vec-tiles-{512,1024}-9092a3d.json); r4 keeps 4 x 128, where
    8 x 32 spills under the launch bounds; float64 takes 16 x 64 (measured at commit d507bb0)."""
    if sweep.ndim == 2:
        return (64, 256)
    if np.dtype(dtype).itemsize == 8:
        return (64, 16, 64)
    return (64, 8, 32) if sweep.radius > 4 else (64, 4, 128)


SCHEDULE = Schedule("streaming_vec", lambda sweep, dtype, tile, name, limits: streaming_vector_sweep(sweep, dtype, tile, name),
                    tile=_tile, threads=lambda sweep, dtype, tile: math.prod(tile[1:]) // max(1, vector_width(sweep, dtype)),
                    applies=_vectors, scalar="streaming")
