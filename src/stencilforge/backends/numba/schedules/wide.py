"""Sweeps too wide for one vectorised loop: the expression split by `_row_loops` into loops over per-thread row
buffers held in L1, in the same order of operations; in 1D and 2D within `row`'s loop nest, in 3D over flat ranges of
a tile's rows (`_wide_source`), with constant offsets on large grids (`constant_shape`)."""

from __future__ import annotations

import re

from ....grid import Grid
from ....plan import Sweep
from ..kernel import FUSED_VIEW_LIMIT, HEADER, WIDE, Schedule, prologue, term_groups
from .row import loop_nest

WIDE_LOOP_VIEWS = 56  # views per loop of `_wide_source`: wave3d r8 in one loop, fastest of 14 to 56 (cpu-grouped-order-2026-11-27.json)
Y_TILE = 32  # rows along axis 1 per tile of `_wide_source`: its planes' rows around the tile stay in L2 (32 and 16 close)


def _row_loops(sweep: Sweep, cnames: list[str], views: dict, budget: int = FUSED_VIEW_LIMIT) -> tuple[list[str], str]:
    """The statements of loops over j, and the right-hand side left for a last loop, each loop reading
    at most `budget` row views (the buffers and the store included).

    A term wider than the limit is summed in the row buffer `part`, left to right, a loop
    taking as many of its weight groups as fit; the terms' running total is carried as an
    expression into the next loop while it fits, else stored in `acc`. Every addition
    happens in the oracle's order, so the result is bitwise that of one fused expression.
    """
    centre = (0,) * sweep.ndim
    loops: list[str] = []
    pending: str | None = None
    pending_reads: set[str] = set()

    def store() -> None:
        nonlocal pending, pending_reads
        loops.append(f"acc[j] = {pending}")
        pending, pending_reads = "acc[j]", {"acc"}

    def add(expr: str, reads: set) -> None:
        nonlocal pending, pending_reads
        if pending is not None and len(pending_reads | reads) + 1 > budget:
            store()
        pending = expr if pending is None else f"{pending} + {expr}"
        pending_reads = pending_reads | reads

    for term, groups in zip(sweep.terms, term_groups(sweep, cnames, views)):
        factor = views[(term.factor, centre)] if term.factor is not None else None
        extra = 1 if factor is not None else 0
        term_reads = set().union(*(r for _, r in groups))
        if len(term_reads) + extra + 1 > budget:  # the store, the factor: the term needs `part`
            if "part" in pending_reads:
                store()
            room = budget - 2 - extra - len(pending_reads)  # alongside part, the store and the pending total
            room = room if 2 * room >= budget else budget - 2 - extra  # else `add` stores the total first
            k, tail_reads = len(groups), set[str]()
            while len(tail_reads | groups[k - 1][1]) <= room:  # the last groups that fit go in the term's loop
                k -= 1
                tail_reads |= groups[k][1]
            chunks: list[list[str]] = [[]]
            chunk_reads: set[str] = set()
            for expr, reads in groups[:k]:  # the rest through part, each loop as many groups as fit beside it
                if chunks[-1] and len(chunk_reads | reads) > budget - 1:
                    chunks.append([])
                    chunk_reads = set()
                chunks[-1].append(expr)
                chunk_reads |= reads
            loops += [f"part[j] = {'part[j] + ' if n else ''}" + " + ".join(chunk) for n, chunk in enumerate(chunks)]
            body, reads = " + ".join(["part[j]", *(e for e, _ in groups[k:])]), {"part"} | tail_reads
        else:
            body, reads = " + ".join(e for e, _ in groups), term_reads
        if factor is not None:
            body, reads = f"({body}) * {factor}[j]", reads | {factor}
        add(f"({body})", reads)
    assert pending is not None, "a sweep has at least one term"
    return loops, pending


def _constant_offsets(views: dict, padded: tuple[int, ...], stmts: list[str], value: str) -> tuple[list[str], list[str], str]:
    """(the view lines, `stmts` and `value` rewritten): each field read through one view from its lowest offset, indexed at
    j plus the offset's distance from it, a constant for arrays of the `padded` shape. LLVM then addresses every
    load from one register and a displacement; 51 separate views kept their pointers on the stack and reloaded
    them every vector (wave3d; cpu-wide-offsets-2026-11-27.json). Unsigned indices, so no test for wrapping."""
    w, p = padded[2], padded[1] * padded[2]
    offsets = {name: (field, o[0] * p + o[1] * w + o[2]) for (field, o), name in views.items()}
    low = {field: min(off for f, off in offsets.values() if f == field) for field, _ in offsets.values()}
    texts = [*stmts, value]
    for name, (field, off) in offsets.items():
        texts = [re.sub(rf"\b{name}\[j\]", f"lo_{field}[np.uint64(j) + np.uint64({off - low[field]})]", t) for t in texts]
    return [f"lo_{field} = x_{field}[base + ({lo}):]" for field, lo in low.items()], texts[:-1], texts[-1]


def _wide_source(sweep: Sweep, lines: list[str], cnames: list[str], views: dict, padded: tuple[int, ...] | None = None) -> str:
    """3D sweeps too wide for one loop: each task takes a range of planes along axis 0 and, for each tile of
    Y_TILE rows along axis 1, walks its planes, evaluating the tile's rows of a plane as one flat range of the
    flattened fields with the loops of `_row_loops` (the ghost columns between the rows are evaluated as
    scratch, never stored): a loop per row paid its views' set-up and LLVM's alias checks on every row
    (cpu-wave3d-flat-2026-11-25.json).

    The result goes through `acc`, not straight to `out`: the output may be an input read at the
    cell (wave3d's u.prev), and a loop whose store overlaps one of its loads fails LLVM's runtime
    alias check and runs scalar; and out's ghost columns must keep their values.
    Loops of WIDE_LOOP_VIEWS views measured fastest: in weight groups, wave3d's Laplacian is a chain of
    8 dependent additions, not 48, and all 51 views in one loop beat the row buffer's passes.
    Tiles hold at least the stencil's reach of rows (`n1 // r`, a bound only radii above Y_TILE meet): kept from
    when kernels wrote walls, so the source and its cached kernels stay as they were.
    """
    r = sweep.radius
    stmts, value = _row_loops(sweep, cnames, views, WIDE_LOOP_VIEWS)
    lines[0] = lines[0].replace("):", ", nt):")
    if padded is not None:
        lines += [f"    if out.shape[1] != {padded[1]} or out.shape[2] != {padded[2]}:",
                  "        raise ValueError('a kernel compiled for another grid')"]
    lines += [
        "    w = out.shape[2]",
        "    p = out.shape[1] * w",
        "    m = w - 2 * g",
        "    n0 = out.shape[0] - 2 * g",
        "    n1 = out.shape[1] - 2 * g",
        *[f"    x_{n} = f_{n}.reshape(-1)" for n in sweep.inputs],
        "    span = (n0 + nt - 1) // nt",
        "    tasks = (n0 + span - 1) // span",
        f"    ny = max(1, min(n1 // {Y_TILE}, n1 // {r}))",
        "    rows = (n1 + ny - 1) // ny",
        "    for t in numba.prange(tasks):",
        f"        {WIDE}",
        "        z0 = g + t * span",
        "        z1 = min(g + n0, z0 + span)",
        "        acc = np.empty(rows * w, dtype=out.dtype)",
        "        part = np.empty(rows * w, dtype=out.dtype)",
        "        for yt in range(ny):",
        "            y0 = g + yt * n1 // ny",
        "            y1 = g + (yt + 1) * n1 // ny",
        "            n = (y1 - y0 - 1) * w + m",
        "            for i0 in range(z0, z1):",
    ]
    indent = "                "
    lines.append(f"{indent}base = i0 * p + y0 * w + g")
    if padded is not None:
        view_lines, stmts, value = _constant_offsets(views, padded, stmts, value)
    else:
        view_lines = []
        for (field, offset), name in views.items():
            shift = "".join(f" {'+' if o > 0 else '-'} {abs(o)}{s}" for o, s in zip(offset, (" * p", " * w", "")) if o)
            view_lines.append(f"{name} = x_{field}[base{shift}:base{shift} + n]")
    lines += [f"{indent}{line}" for line in view_lines]
    for stmt in stmts:
        lines.append(f"{indent}for j in range(n):")
        lines.append(f"{indent}    {stmt}")
    lines.append(f"{indent}for j in range(n):")
    lines.append(f"{indent}    acc[j] = {value}")
    lines.append(f"{indent}for k in range(y1 - y0):")
    lines.append(f"{indent}    out[i0, y0 + k, g:g + m] = acc[k * w:k * w + m]")
    return HEADER + "\n".join(lines) + "\n"


CONSTANT_SHAPE_CELLS = 2**20  # grids from this size get wide 3D kernels compiled for their shape (`_constant_offsets`)


def constant_shape(grid: Grid) -> tuple[int, ...] | None:
    """The padded shape a wide 3D kernel of this grid is compiled for: large grids only, where a compile per
    shape pays; small ones (tests, coarse levels) share one kernel for every shape."""
    return grid.padded_shape if grid.ndim == 3 and grid.cells >= CONSTANT_SHAPE_CELLS else None


def source(sweep: Sweep, grid: Grid) -> str:
    lines, cnames, views = prologue(sweep)
    if sweep.ndim == 3:
        return _wide_source(sweep, lines, cnames, views, constant_shape(grid))
    stmts, value = _row_loops(sweep, cnames, views)
    return loop_nest(sweep, lines, views, stmts, value, buffers=True)


def applies(sweep: Sweep, grid: Grid) -> str | None:
    """Every 2D and 3D sweep; `row`'s 1D loop nest allocates no row buffers."""
    return None if sweep.ndim > 1 else "numba's wide kernel takes 2D and 3D sweeps, not 1D"


SCHEDULE = Schedule("wide", source, applies)
