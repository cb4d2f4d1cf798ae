"""The `auto` strategy: the winner `stencilforge tune` stored for this device, else a heuristic.

`choose` never needs a GPU (without a device name it skips the tuning cache),
so `show-kernel` and CI use it too. The
heuristic follows the H100 measurements in docs/performance.md
(benchmarks/results/h100-*.json).
"""

from __future__ import annotations

import logging

import numpy as np

from ...plan import AxisOperator, Sweep
from ...tuning import cached_choice
from .codegen import code_signature, default_tile, streaming_applicable, vector_width

log = logging.getLogger(__name__)


def choose(plan: Sweep | AxisOperator, grid_shape, dtype, device_name: str | None = None) -> tuple[str, tuple[int, ...]]:
    """(strategy, tile) for a plan on an interior of `grid_shape` (C order).

    A tuned winner for `device_name` comes first. Otherwise the heuristic, from
    the H100 measurements in docs/performance.md (rounds 1-4):

    Derivatives along x: one output, `rows_vec` (a vector of cells per thread:
    d1 99% of copy bandwidth in float64, `rows` 93%); the fused pair d1+d2,
    `flat`, one thread per cell over the flattened array (97.3%; rows 96.7%,
    rows_vec 96.4%, the shared-memory pencil 95.7%).
    Along y: one thread per cell, which measured faster than the marching
    column pencil for the fused pair (95% vs 86%); L2 already serves the
    neighbouring rows. Sweeps whose stencil leaves the plane only along the
    column (every star stencil): in 3D, `rows` for radius <= 2 (heat3d 77.5%
    against streaming's 75%) and `streaming` (shared-memory plane, register
    column) for longer stencils, where rows' reads through L1 fall to 30-36%
    (wave3d r8: streaming 67-68%), with vectors of cells where the x radius
    is even (streaming_vec in chunks of 64 planes, on rows on 128-byte lines:
    r8 80% at 512^3 and 1024^3, r6 83%, r4 90%). Round 14 kept `rows` for
    heat3d: streaming leads by 0.4 points only in float32 at 512^3 and trails
    by 1.4 at 256^3 and by 5.7-14 in float64. In 2D, `rows` (jacobi2d 96%
    against pipelined's 93% in float32; every float64 sweep 95-100% against
    84-96%; poisson2d 98%), except `pipelined` on rows of 512 for a float32
    single-field stencil that reads its centre cell (heat2d 92.8% against
    rows' 88.5% at 16384^2, 82.3% against 81.0% at 4096^2). Otherwise `tiled`.
    """
    what = f"derivatives along axis {plan.axis}" if isinstance(plan, AxisOperator) else f"the {plan.ndim}D sweep of {plan.out}"
    if device_name is not None:
        hit = cached_choice(device_name, plan, grid_shape, dtype, code_signature(plan, dtype))
        if hit is not None:
            strategy, tile = hit
            log.info("strategy auto: %s for %s, the winner `stencilforge tune` stored for %s", strategy, what, device_name)
            return strategy, tile if tile is not None else default_tile(plan, strategy, dtype)
    if isinstance(plan, AxisOperator):
        strategy = "naive" if plan.axis != plan.ndim - 1 else "rows_vec" if len(plan.outputs) == 1 else "flat"
        why = "a strided axis" if strategy == "naive" else "one output along rows" if strategy == "rows_vec" else "outputs fused along rows"
    elif (blocked := streaming_applicable(plan)) is None:
        one_field = not set(plan.inputs) - set(plan.stencil_inputs)
        if plan.ndim == 2:
            centre = any(not any(o) for t in plan.terms for o, _ in t.stencil.entries)
            strategy = "pipelined" if one_field and centre and np.dtype(dtype) == np.float32 else "rows"
            why = "a float32 one-field 2D stencil reading its centre" if strategy == "pipelined" else "a 2D sweep"
        else:
            strategy = "rows" if plan.radius <= 2 else "streaming_vec" if vector_width(plan, dtype) else "streaming"
            why = f"a 3D stencil of radius {plan.radius}" + (", vectors of cells fit" if strategy == "streaming_vec" else "")
    else:
        strategy, why = "tiled", blocked
    log.info("strategy auto: %s for %s (%s; no tuned winner)", strategy, what, why)
    return strategy, default_tile(plan, strategy, dtype)
