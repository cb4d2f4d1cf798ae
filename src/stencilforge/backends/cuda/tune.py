"""The `auto` strategy: a fixed heuristic per plan kind, ndim and radius.

`choose` is the one place a tuning cache can later be consulted before the
heuristic; it never needs a GPU, so `show-kernel` and CI use it too. The
heuristic follows the measurements recorded in docs/performance.md.
"""

from __future__ import annotations

from ...plan import AxisOperator, Sweep
from .codegen import default_tile, streaming_applicable


def choose(plan: Sweep | AxisOperator, grid_shape, dtype) -> tuple[str, tuple[int, ...]]:
    """(strategy, tile) for a plan on an interior of `grid_shape`.

    Axis operators: the fused pencil. Sweeps: streaming whenever the stencil
    reaches off-plane only along the column (every star stencil), since it
    reads each value from DRAM once whatever the radius; otherwise the
    shared-memory tile.
    """
    if isinstance(plan, AxisOperator):
        strategy = "pencil"
    elif streaming_applicable(plan) is None:
        strategy = "streaming"
    else:
        strategy = "tiled"
    return strategy, default_tile(plan, strategy, dtype)
