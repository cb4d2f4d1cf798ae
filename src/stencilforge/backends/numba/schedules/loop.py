"""Several time steps of a small grid's sweep in one call, the time loop inside the compiled code: where a step's
arithmetic takes less time than the host's work to launch it (a few thousand cells), k steps a call cut that
work k-fold. Each step is `row`'s loop nest, compiled serial (a parallel region costs more than such a grid's
step), so the result has the bits of k single steps; the middle states live in two scratch arrays whose ghost
cells are copied from the arrays the caller filled them in (out's for the first middle state, the `fused_walls`
arrays for the later ones, the input itself where the walls stay put)."""

from __future__ import annotations

import math

from ....grid import Grid
from ....plan import Sweep
from ...base import fused_walls
from ..kernel import Schedule, iterates_within, prologue, sweep_expression
from .row import loop_nest

# padded cells per dimension up to which a grid's steps loop inside one call: beyond them the march's parallel passes
# win (benchmarks/results/cpu-small-steps-loop-2026-12-02.json, loop_against_march)
LOOP_CELLS = {1: 2**15, 2: 3 * 2**13, 3: 2**13}
LOOP_STEPS = 32  # steps a call: 8 and 16 left more of a call's host cost per step, 64 gained a few per cent (same file, steps_a_call)


def _ghost_copies(nd: int) -> list[str]:
    """Lines copying every ghost slab of `src` into `dst` (ghost width g), axis by axis."""
    lines = []
    for a in range(nd):
        for part in ("0:g", f"dst.shape[{a}] - g:"):
            index = ", ".join(part if b == a else ":" for b in range(nd))
            lines.append(f"    dst[{index}] = src[{index}]")
    return lines


def source(sweep: Sweep, grid: Grid, steps: int) -> str:
    (u,) = sweep.stencil_inputs
    lines, cnames, views = prologue(sweep)
    one = loop_nest(sweep, lines, views, [], sweep_expression(sweep, cnames, views), buffers=False)
    one = one.replace("@JIT\ndef kernel(", "@SERIAL\ndef one(", 1)
    carriers = tuple(fused_walls(s, sweep.out) for s in range(2, steps))
    inputs = [f"f_{n}" for n in sweep.inputs]
    call = ", ".join("src" if n == u else f"f_{n}" for n in sweep.inputs)
    driver = [
        "@SERIAL",
        "def ghosts(dst, src, g):",
        *_ghost_copies(sweep.ndim),
        "",
        "",
        "@SERIAL",
        f"def kernel({', '.join(['out', *inputs, *carriers, 'coef', 'g'])}):",
        "    a = np.empty_like(out)",
        "    b = np.empty_like(out)",
        f"    src = f_{u}",
    ]
    if carriers:
        driver.append(f"    walls = ({', '.join(carriers)},)")
    driver += [
        f"    for s in range(1, {steps}):",
        "        dst = a if s % 2 else b",
        "        if s == 1:",
        "            ghosts(dst, out, g)",
    ]
    if carriers:
        driver += ["        else:", "            ghosts(dst, walls[s - 2], g)"]
    driver += [f"        one(dst, {call}, coef, g)", "        src = dst", f"    one(out, {call}, coef, g)"]
    return one + "\n\n" + "\n".join(driver) + "\n"


def applies(sweep: Sweep, grid: Grid) -> str | None:
    """Grids of at most LOOP_CELLS padded cells (per dimension), whose sweep iterates one field within the ghost
    layer in one loop (as `march`)."""
    padded, most = math.prod(grid.padded_shape), LOOP_CELLS[grid.ndim]
    if padded > most:
        return f"numba's loop takes {grid.ndim}D grids of at most {most} cells with their ghosts, not {padded}"
    return iterates_within(sweep, grid, "loop")


SCHEDULE = Schedule("loop", source, applies, lambda grid: LOOP_STEPS)
