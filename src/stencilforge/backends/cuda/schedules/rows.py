"""rows: naive's reads, but each thread of a one-row block writes a column of a few cells in
consecutive rows (and planes), their loads issued together; consecutive blocks cover consecutive
rows, so the grid walks memory in address order and the neighbouring rows come from L1/L2."""

from __future__ import annotations

import numpy as np

from ....plan import Sweep
from ..kernel import Kernel, at_offset, cell_expression, kernel_params, strides, sweep_args


def _row_cells(tile: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The (plane, row) offsets of the cells one `rows` thread writes, for a tile (Z, R, X) or (R, X)."""
    return [tuple(c) for c in np.ndindex(*tile[:-1])]


def rows_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """A block of one row of threads; each thread writes its column in tile[:-1] consecutive rows/planes.

    Every value is computed before any is stored, so the loads of all the
    thread's cells are in flight together (__restrict__ lets the compiler
    hoist them); blockIdx.x runs along x and blockIdx.y along rows, which
    walks the arrays in address order like a flat elementwise kernel.
    """
    nd = sweep.ndim
    tx = tile[-1]
    out = f"f_{sweep.out}"
    last = f"n{nd - 1}"
    lines = [
        f'extern "C" __global__ void __launch_bounds__({tx}) {name}({kernel_params(sweep, False)})',
        "{",
        f"    const int i{nd - 1} = blockIdx.x * {tx} + threadIdx.x;",
        f"    if (i{nd - 1} >= {last}) return;",
        *("    " + s for s in strides(nd)),
    ]
    if nd == 3:
        lines += [
            f"    const int y0 = blockIdx.y * {tile[1]}, z0 = blockIdx.z * {tile[0]};",
            "    const long long c = ((long long)z0 + g) * s0 + ((long long)y0 + g) * s1 + (i2 + g);",
        ]
    else:
        lines += [f"    const int y0 = blockIdx.y * {tile[0]};", "    const long long c = ((long long)y0 + g) * s0 + (i1 + g);"]
    cells = []
    for k, off in enumerate(_row_cells(tile)):
        if nd == 3:
            inside, shift = f"z0 + {off[0]} < n0 && y0 + {off[1]} < n1", f"{off[0]} * s0 + {off[1]} * s1"
        else:
            inside, shift = f"y0 + {off[0]} < n0", f"{off[0]} * s0"
        lines += [f"    const bool in{k} = {inside};", f"    const long long c{k} = c + {shift};", f"    real v{k};"]
        cells.append(k)
    for k in cells:
        expr = cell_expression(sweep, dtype, lambda f, o, k=k: f"f_{f}[{at_offset(f'c{k}', o)}]")
        lines.append(f"    if (in{k}) v{k} = {expr};")
    lines += [f"    if (in{k}) {out}[c{k}] = v{k};" for k in cells]
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "rows", tile, (tx, 1, 1), tile, sweep_args(sweep, False))
