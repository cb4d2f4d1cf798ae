"""rows: naive's reads, but each thread of a one-row block writes a column of a few cells in
consecutive rows (and planes), their loads issued together; consecutive blocks cover consecutive
rows, so the grid walks memory in address order and the neighbouring rows come from L1/L2.

rows_vec: the same for sweeps whose x neighbours lie in the cell's own row, with a vector of
cells (16 bytes) per thread and row: each neighbouring row or plane is one vector load, the x
neighbours past the vector are scalar loads. Four times the bytes per load keep the L2 busy with
fewer requests, where `rows` is bound by L2 throughput (benchmarks/results/ncu-3d-h200-2026-11-24.txt).
"""

from __future__ import annotations

import numpy as np

from ....plan import Sweep
from ..kernel import Kernel, Schedule, at_offset, cell_expression, ctype, kernel_params, spatial, strides, sweep_args

LANES = "xyzw"


def _column_head(sweep: Sweep, tile: tuple[int, ...], name: str, width: int, value: str) -> tuple[list[str], int]:
    """The opening of a `rows` or `rows_vec` kernel and its number of cells: a block of one row of tile[-1]
    threads, each writing `width` cells along x in tile[:-1] consecutive planes/rows; per cell k whether it
    is inside (in{k}), its index (c{k}) and its value, declared as `value` with {k}."""
    nd, tx = sweep.ndim, tile[-1]
    x = f"i{nd - 1}"
    first = f"blockIdx.x * {tx} + threadIdx.x" if width == 1 else f"{width} * (blockIdx.x * {tx} + threadIdx.x)"
    lines = [
        f'extern "C" __global__ void __launch_bounds__({tx}) {name}({kernel_params(sweep)})',
        "{",
        f"    const int {x} = {first};",
        f"    if ({x} >= n{nd - 1}) return;",
        *("    " + s for s in strides(nd)),
    ]
    if nd == 3:
        lines += [
            f"    const int y0 = blockIdx.y * {tile[1]}, z0 = blockIdx.z * {tile[0]};",
            "    const long long c = ((long long)z0 + g) * s0 + ((long long)y0 + g) * s1 + (i2 + g);",
        ]
    else:
        lines += [f"    const int y0 = blockIdx.y * {tile[0]};", "    const long long c = ((long long)y0 + g) * s0 + (i1 + g);"]
    cells = list(np.ndindex(*tile[:-1]))
    for k, off in enumerate(cells):
        if nd == 3:
            inside, shift = f"z0 + {off[0]} < n0 && y0 + {off[1]} < n1", f"{off[0]} * s0 + {off[1]} * s1"
        else:
            inside, shift = f"y0 + {off[0]} < n0", f"{off[0]} * s0"
        lines += [f"    const bool in{k} = {inside};", f"    const long long c{k} = c + {shift};", "    " + value.format(k=k)]
    return lines, len(cells)


def rows_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """A block of one row of threads; each thread writes its column in tile[:-1] consecutive rows/planes.

    Every value is computed before any is stored, so the loads of all the
    thread's cells are in flight together (__restrict__ lets the compiler
    hoist them); blockIdx.x runs along x and blockIdx.y along rows, which
    walks the arrays in address order like a flat elementwise kernel.
    """
    lines, cells = _column_head(sweep, tile, name, 1, "real v{k};")
    for k in range(cells):
        expr = cell_expression(sweep, dtype, lambda f, o, k=k: f"f_{f}[{at_offset(f'c{k}', o)}]")
        lines.append(f"    if (in{k}) v{k} = {expr};")
    lines += [f"    if (in{k}) f_{sweep.out}[c{k}] = v{k};" for k in range(cells)]
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "rows", tile, (tile[-1], 1, 1), tile, sweep_args(sweep))


def row_vector_width(sweep: Sweep, dtype) -> int:
    """Cells per thread and row of `rows_vec`: 16 bytes of the dtype, for a 2D or 3D sweep whose entries off
    the cell's row have no x offset (a star along x); 0 where it does not apply."""
    if sweep.ndim not in (2, 3) or any(o[-1] and any(o[:-1]) for t in sweep.terms for o, _ in t.stencil.entries):
        return 0
    return {"float": 4, "double": 2}[ctype(dtype)]


def _row(lead: tuple[int, ...]) -> str:
    return "_".join(str(d + 8) for d in lead)  # offsets of at most 8: the longest stencil


def rows_vector_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """`rows` with a vector of cells per thread: tile (Z, R, X) or (R, X) is X threads, each writing a vector
    of cells in Z planes x R rows. Every value is formed by `cell_expression` from the lanes of the loaded
    vectors, so the bits are `rows`'. The backend runs `rows` instead where a row's interior does not start
    on a vector."""
    nd, width, tx = sweep.ndim, row_vector_width(sweep, dtype), tile[-1]
    vt = f"{ctype(dtype)}{width}"
    reach: dict[str, int] = {}  # x reach per field read at x neighbours
    rows: dict[tuple[str, tuple[int, ...]], None] = {}  # (field, offsets off the row) of every row read
    for t in sweep.terms:
        for o, _ in t.stencil.entries:
            rows.setdefault((t.field, o[:-1]))
            if o[-1]:
                reach[t.field] = max(reach.get(t.field, 0), abs(o[-1]))
        if t.factor is not None:
            rows.setdefault((t.factor, (0,) * (nd - 1)))
    lines, cells = _column_head(sweep, tile, name, width, f"{vt} r{{k}};")
    centre = _row((0,) * (nd - 1))
    for k in range(cells):
        lines.append(f"    if (in{k}) {{")
        for f, lead in rows:
            lines.append(f"        const {vt} v{k}_{f}_{_row(lead)} = *(const {vt}*)(f_{f} + {at_offset(f'c{k}', lead + (0,))});")
        for f, r in reach.items():
            for d in range(1, r + 1):
                lines += [f"        const real m{k}_{f}_{d} = f_{f}[c{k} - {d}];",
                          f"        const real p{k}_{f}_{d} = f_{f}[c{k} + {width - 1 + d}];"]

        def lane(f, o, j, k=k):
            if any(o[:-1]):
                return f"v{k}_{f}_{_row(o[:-1])}.{LANES[j]}"
            x = j + o[-1]
            return f"m{k}_{f}_{-x}" if x < 0 else f"p{k}_{f}_{x - width + 1}" if x >= width else f"v{k}_{f}_{centre}.{LANES[x]}"

        values = [cell_expression(sweep, dtype, lambda f, o, j=j: lane(f, o, j)) for j in range(width)]
        lines += [f"        r{k} = make_{vt}({', '.join(values)});", "    }"]
    lines += [f"    if (in{k}) *({vt}*)(f_{sweep.out} + c{k}) = r{k};" for k in range(cells)]
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "rows_vec", tile, (tx, 1, 1), tuple(tile[:-1]) + (tx * width,),
                  sweep_args(sweep), vector=width)


def _along_rows(sweep: Sweep, dtype) -> str | None:
    if row_vector_width(sweep, dtype):
        return None
    return spatial(sweep, dtype) or f"strategy rows_vec needs a sweep whose x neighbours lie in the cell's row; {sweep.out}'s does not"


# The tiles of the rows results in h100-strategies-*-42f63af.json.
ROWS = Schedule("rows", lambda sweep, dtype, tile, name, limits: rows_sweep(sweep, dtype, tile, name),
                tile=lambda sweep, dtype: (4, 512) if sweep.ndim == 2 else (1, 4, 256),
                threads=lambda sweep, dtype, tile: tile[-1], applies=spatial)
# 3D: the best of 8 tiles for heat3d 512^3 float32 on an H100 and an H200 (vec4-3d-h{100,200}-*); 2D: the H100's
# best (auto picks by device: tune.ROWS_VEC_2D_TILES).
ROWS_VEC = Schedule("rows_vec", lambda sweep, dtype, tile, name, limits: rows_vector_sweep(sweep, dtype, tile, name),
                    tile=lambda sweep, dtype: (1, 128) if sweep.ndim == 2 else (2, 4, 64),
                    threads=lambda sweep, dtype, tile: tile[-1], applies=_along_rows, scalar="rows")
