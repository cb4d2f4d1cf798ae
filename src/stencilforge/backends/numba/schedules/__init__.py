"""Numba's sweep kernels, one module per schedule, each declaring the sweeps it applies to (`kernel.Schedule`).
SWEEPS write one step a pass: `row` the whole expression in one loop, `wide` in loops over row buffers; MARCHES
several: `loop` a small grid's steps with the time loop inside the call, `march` a larger one's through rings of
planes. `NumbaBackend` and show-kernel take the first of a tuple that applies; adding a schedule is its module
and its entry here."""

from __future__ import annotations

from ....errors import StencilforgeError
from ....grid import Grid
from ....plan import Sweep
from ..kernel import Schedule
from . import loop, march, row, wide

SWEEPS = (row.SCHEDULE, wide.SCHEDULE)
MARCHES = (loop.SCHEDULE, march.SCHEDULE)


def choose(schedules: tuple[Schedule, ...], sweep: Sweep, grid: Grid) -> Schedule:
    """The first of `schedules` that applies to the sweep on the grid; where none does, a StencilforgeError
    whose one line is each one's reason."""
    reasons = []
    for s in schedules:
        why = s.applies(sweep, grid)
        if why is None:
            return s
        reasons.append(why)
    raise StencilforgeError("; ".join(reasons))


def takes(sweep: Sweep, grid: Grid) -> bool:
    """Whether some schedule of `SWEEPS` applies to the sweep (else its pass runs as a generated one)."""
    return any(s.applies(sweep, grid) is None for s in SWEEPS)


def sweep_source(sweep: Sweep, grid: Grid) -> str:
    """Source of a kernel writing the sweep over the grid's interior."""
    return choose(SWEEPS, sweep, grid).build(sweep, grid)
