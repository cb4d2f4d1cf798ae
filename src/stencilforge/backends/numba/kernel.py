"""What numba's sweep kernels share: the `Schedule` record each registers, the generated module's header, the row
views a sweep reads, the right-hand side at row position j in the oracle's order, the coefficient array, and the
kernel's def line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...grid import Grid
from ...plan import Sweep

HEADER = ("import numba\nimport numpy as np\n\nfrom stencilforge.backends.vector_width import wide_vectors\n\n"
          "JIT = numba.njit(parallel=True, cache=True, nogil=True)\nSERIAL = numba.njit(cache=True, nogil=True)\n\n")
# The first statement of a sweep kernel's loops' functions: 512-bit vectors where the CPU has them (`vector_width`).
WIDE = "wide_vectors()"
FUSED_VIEW_LIMIT = 16  # row views one vectorised loop reads while LLVM's runtime alias checks hold


def _always(sweep: Sweep, grid: Grid) -> None:
    return None


@dataclass(frozen=True)
class Schedule:
    """One way to write a sweep's kernel, as `schedules/` registers it.

    `applies(sweep, grid)`: None where it applies, else why not (one line, for the log and errors).
    `build(sweep, grid)`: the kernel's source; a schedule of several steps a pass (`schedules.MARCHES`) builds
    `build(sweep, grid, steps)`, `steps(grid)` of them by default.
    """

    name: str
    build: Callable[..., str]
    applies: Callable[[Sweep, Grid], str | None] = _always
    steps: Callable[[Grid], int] = lambda grid: 1


def one_loop(sweep: Sweep, kernel: str) -> str | None:
    """None where the sweep's row views fit one vectorised loop (FUSED_VIEW_LIMIT), else why `kernel` refuses it."""
    n = len(row_views(sweep))
    return None if n <= FUSED_VIEW_LIMIT else f"numba's {kernel} reads at most {FUSED_VIEW_LIMIT} row views (one vectorised loop), not {n}"


def iterates_within(sweep: Sweep, grid: Grid, kernel: str) -> str | None:
    """None where the sweep iterates one field (`Sweep.iterates_one_field`) within the ghost layer and one loop, as a
    kernel of several steps a call needs; else why `kernel` refuses it."""
    if not sweep.iterates_one_field:
        return f"numba's {kernel} takes sweeps of one field read around the cell that do not read their output"
    if grid.ghost < sweep.radius:
        return f"numba's {kernel} needs a ghost layer as wide as the reach: {grid.ghost} is below the radius {sweep.radius}"
    return one_loop(sweep, kernel)


def tag(o: int) -> str:
    """A signed offset as part of an identifier (-2 -> m2)."""
    return f"m{-o}" if o < 0 else f"p{o}"


def _view_name(field: str, offset: tuple[int, ...]) -> str:
    return f"v_{field}_" + "_".join(tag(o) for o in offset)


def row_views(sweep: Sweep) -> dict[tuple[str, tuple[int, ...]], str]:
    """One 1D row view per (field, offset) the sweep reads, in a fixed order."""
    views: dict[tuple[str, tuple[int, ...]], str] = {}
    centre = (0,) * sweep.ndim
    for term in sweep.terms:
        for offset, _ in term.stencil.entries:
            views.setdefault((term.field, offset), _view_name(term.field, offset))
        if term.factor is not None:
            views.setdefault((term.factor, centre), _view_name(term.factor, centre))
    return views


def term_groups(sweep: Sweep, coeff_names: list[str], views: dict) -> list[list[tuple[str, set[str]]]]:
    """Per term, its weight groups (`Stencil.weight_groups`) at row position j as (expression, views read):
    c * v[j] alone, else c * (a[j] + b[j] + ...), consuming coefficient names in group order."""
    it = iter(coeff_names)
    terms = []
    for term in sweep.terms:
        groups = []
        for _, offsets in term.stencil.weight_groups():
            names = [views[(term.field, o)] for o in offsets]
            values = " + ".join(f"{v}[j]" for v in names)
            groups.append((f"{next(it)} * {values if len(names) == 1 else f'({values})'}", set(names)))
        terms.append(groups)
    return terms


def sweep_expression(sweep: Sweep, coeff_names: list[str], views: dict) -> str:
    """The right-hand side at row position j, in the oracle's order."""
    centre = (0,) * sweep.ndim
    parts = []
    for term, groups in zip(sweep.terms, term_groups(sweep, coeff_names, views)):
        terms = " + ".join(expr for expr, _ in groups)
        if term.factor is not None:
            terms = f"({terms}) * {views[(term.factor, centre)]}[j]"
        parts.append(f"({terms})")
    return " + ".join(parts)


def sweep_coefficients(sweep: Sweep, dtype) -> np.ndarray:
    """The kernels' coefficient array: each weight group's weight, in group order."""
    return np.array([float(c) for t in sweep.terms for c, _ in t.stencil.weight_groups()], dtype=dtype)


def shifted(index: str, o: int) -> str:
    """`index` moved by the offset o, as generated source."""
    return f"{index} + {o}" if o > 0 else (f"{index} - {-o}" if o < 0 else index)


def prologue(sweep: Sweep, carriers: tuple[str, ...] = ()) -> tuple[list[str], list[str], dict]:
    """The kernel's def line (`carriers`: the arrays holding a fused kernel's later middle states' walls) and
    coefficient locals, the coefficient names and the row views, shared by the single-step and the fused
    kernels so all evaluate the same expression."""
    cnames = [f"c{k}" for k in range(sum(len(t.stencil.weight_groups()) for t in sweep.terms))]
    args = ["out"] + [f"f_{n}" for n in sweep.inputs] + list(carriers) + ["coef", "g"]
    lines = [f"@JIT\ndef kernel({', '.join(args)}):"] + [f"    {c} = coef[{k}]" for k, c in enumerate(cnames)]
    return lines, cnames, row_views(sweep)
