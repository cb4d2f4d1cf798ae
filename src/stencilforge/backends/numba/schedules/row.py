"""Sweeps whose row views fit one loop (FUSED_VIEW_LIMIT): at each row, one innermost loop over 1D row views that
all share the index j evaluates the whole expression; with no offset arithmetic inside the loop LLVM vectorises it
(see docs/performance.md)."""

from __future__ import annotations

from ....grid import Grid
from ....plan import Sweep
from ..kernel import HEADER, WIDE, Schedule, one_loop, prologue, shifted, sweep_expression


def loop_nest(sweep: Sweep, lines: list[str], views: dict, stmts: list[str], value: str, buffers: bool) -> str:
    """The kernel after its prologue `lines`: the outer axes' loops (the first in parallel), the row views at each
    row, a loop over j per statement of `stmts` (through the row buffers `acc` and `part`, one pair per thread where
    `buffers`), then the output row = `value`."""
    nd = sweep.ndim
    lines.append(f"    m = out.shape[{nd - 1}] - 2 * g")
    for a in range(nd - 1):
        loop = "numba.prange" if a == 0 else "range"
        lines.append(f"{'    ' * (a + 1)}for i{a} in {loop}(g, out.shape[{a}] - g):")
        if a == 0:
            lines.append(f"        {WIDE}")
        if a == 0 and buffers:
            lines.append("        acc = np.empty(m, dtype=out.dtype)")
            lines.append("        part = np.empty(m, dtype=out.dtype)")
    indent = "    " * nd
    outer = [f"i{a}" for a in range(nd - 1)]

    def row(offset: tuple[int, ...]) -> str:
        lo = shifted("g", offset[-1])
        return ", ".join([shifted(i, o) for i, o in zip(outer, offset[:-1])] + [f"{lo}:{lo} + m"])

    for (field, offset), name in views.items():
        lines.append(f"{indent}{name} = f_{field}[{row(offset)}]")
    loop = "numba.prange" if nd == 1 else "range"
    for stmt in stmts:
        lines.append(f"{indent}for j in {loop}(m):")
        lines.append(f"{indent}    {stmt}")
    lines.append(f"{indent}o = out[{row((0,) * nd)}]")
    lines.append(f"{indent}for j in {loop}(m):")
    lines.append(f"{indent}    o[j] = {value}")
    return HEADER + "\n".join(lines) + "\n"


def source(sweep: Sweep, grid: Grid) -> str:
    lines, cnames, views = prologue(sweep)
    return loop_nest(sweep, lines, views, [], sweep_expression(sweep, cnames, views), buffers=False)


SCHEDULE = Schedule("row", source, lambda sweep, grid: one_loop(sweep, "row kernel"))
