"""The `auto` strategy: the winner `stencilforge tune` stored for this device, else a heuristic.

`choose` never needs a GPU (without a device name it skips the tuning cache),
so `show-kernel` and CI use it too. The
heuristic follows the H100 measurements in docs/performance.md
(benchmarks/results/cuda_h100_*.json).
"""

from __future__ import annotations

from ...plan import AxisOperator, Sweep
from ...tuning import cached_choice
from .codegen import default_tile, streaming_applicable


def choose(plan: Sweep | AxisOperator, grid_shape, dtype, device_name: str | None = None) -> tuple[str, tuple[int, ...]]:
    """(strategy, tile) for a plan on an interior of `grid_shape` (C order).

    A tuned winner for `device_name` comes first. Otherwise the heuristic:

    Derivatives along x: the fused row pencil (92-96% of copy bandwidth in
    float64). Along y: one thread per cell, which measured faster than the
    marching column pencil for the fused pair (95% vs 86%); L2 already serves
    the neighbouring rows. Sweeps: `streaming` (shared-memory plane, register
    column) whenever the stencil leaves the plane only along the column,
    which every star stencil does; it was the fastest for radius 8 and, with
    prefetching, for the 7-point stencil (75% against 64% naive; `pipelined`,
    cp.async stages several planes ahead, measured 74-75%). In 2D,
    `pipelined` on rows of 512 for a single stencil field, `streaming` when
    another field is read at the cell. Otherwise `tiled`.
    """
    if device_name is not None:
        hit = cached_choice(device_name, plan, grid_shape, dtype)
        if hit is not None:
            strategy, tile = hit
            return strategy, tile if tile is not None else default_tile(plan, strategy)
    if isinstance(plan, AxisOperator):
        strategy = "pencil" if plan.axis == plan.ndim - 1 else "naive"
    elif streaming_applicable(plan) is None:
        # 2D at 16384^2: heat2d pipelined 91.4% of copy on the H100 (streaming 89.3%), heat2d and jacobi2d
        # 83% on the H200 (78%); poisson2d also reads f at the cell: streaming 90.3% there, pipelined 86.4%
        one_field = not set(plan.inputs) - set(plan.stencil_inputs)
        strategy = "pipelined" if plan.ndim == 2 and one_field else "streaming"
    else:
        strategy = "tiled"
    return strategy, default_tile(plan, strategy)
