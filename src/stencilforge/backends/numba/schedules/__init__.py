"""Numba's sweep kernels, one module per family: `row` (the whole expression in one loop), `wide` (split into
loops over row buffers) and `march` (several steps a pass)."""

from __future__ import annotations

from ....grid import Grid
from ....plan import Sweep
from ..kernel import FUSED_VIEW_LIMIT, row_views
from . import row, wide


def sweep_source(sweep: Sweep, grid: Grid) -> str:
    """Source of a kernel writing the sweep over the grid's interior."""
    return row.source(sweep) if len(row_views(sweep)) <= FUSED_VIEW_LIMIT else wide.source(sweep, grid)
