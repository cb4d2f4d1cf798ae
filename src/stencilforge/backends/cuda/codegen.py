"""CUDA C generated from the plan: which schedules apply to a plan, their default tiles, and the
one entry point per kind of kernel (sweep, derivative operator, residual).

The schedules live one module each in `schedules/`; what they share (the `Kernel`
record, the printer of a cell's right-hand side, indexing) in `kernel.py`.
Strategies for a `Sweep` (ghosted fields, interior written): naive, rows, rows_vec, tiled,
streaming, streaming_vec, streaming_l1, pipelined (and the fused steps of
`schedules.fused`); for an `AxisOperator`: naive, flat, rows, rows_vec, pencil.
"""

from __future__ import annotations

import hashlib
import math
from typing import Callable

import numpy as np

from ...errors import StencilforgeError
from ...plan import AxisOperator, Sweep, Term
from ...stencil import Stencil
from .kernel import HOPPER, MAX_THREADS, Kernel, Limits, check_names
from .schedules.march import MARCHING_STRATEGIES, streaming_applicable
from .schedules.naive import naive_sweep
from .schedules.operators import flat_operator, naive_operator, pencil_operator, rows_operator, rows_vector_operator
from .schedules.pipelined import pipelined_sweep
from .schedules.rows import row_vector_width, rows_sweep, rows_vector_sweep
from .schedules.streaming import streaming_cached_sweep, streaming_sweep
from .schedules.streaming_vec import streaming_vector_sweep, vector_width
from .schedules.tiled import tiled_sweep

SWEEP_STRATEGIES = ("naive", "rows", "rows_vec", "tiled", "streaming", "streaming_vec", "streaming_l1", "pipelined")
SCALAR_OF = {"rows_vec": "rows", "streaming_vec": "streaming"}  # what runs where a vector kernel's rows do not fit
OPERATOR_STRATEGIES = ("naive", "flat", "rows", "rows_vec", "pencil")
STRATEGIES = tuple(dict.fromkeys(SWEEP_STRATEGIES + OPERATOR_STRATEGIES))


def code_signature(plan: Sweep | AxisOperator, dtype) -> str:
    """A digest of what every applicable strategy generates for the plan's structure (default
    tiles, every coefficient 1): a tuned winner is kept only while the code it was measured on is
    (the device, whose limits also shape the code, is a key of its own)."""
    if isinstance(plan, Sweep):
        unit = Sweep(plan.out, tuple(Term(t.field, Stencil.from_dict({o: 1.0 for o, _ in t.stencil.entries}), t.factor)
                                     for t in plan.terms))
        sources = [sweep_kernel(unit, s, dtype).source for s in applicable_strategies(unit, dtype)]
    else:
        sources = [operator_kernel(plan, s, dtype).source for s in applicable_strategies(plan, dtype)]
    return hashlib.sha256("\0".join(sources).encode()).hexdigest()[:16]


def applicable_strategies(plan: Sweep | AxisOperator, dtype) -> tuple[str, ...]:
    """The strategies offered for a plan: all of its kind, less the vector ones where no vector of
    cells fits (`streaming_vec`: an odd x radius or 2D; `rows_vec`: x neighbours off the cell's row,
    derivatives along y) and the marching ones where the stencil leaves the column
    (`streaming_applicable`: box stencils)."""
    if isinstance(plan, AxisOperator):
        return tuple(s for s in OPERATOR_STRATEGIES if s != "rows_vec" or plan.axis == plan.ndim - 1)
    marching = streaming_applicable(plan) is None
    return tuple(
        s for s in SWEEP_STRATEGIES
        if (s != "streaming_vec" or vector_width(plan, dtype)) and (s != "rows_vec" or row_vector_width(plan, dtype))
        and (marching or s not in MARCHING_STRATEGIES)
    )


def default_tile(plan: Sweep | AxisOperator, strategy: str, dtype="float32") -> tuple[int, ...]:
    """Tile shapes (C order) that fill a block with 256-512 threads and keep x contiguous."""
    if isinstance(plan, AxisOperator):
        if strategy == "naive":
            return (8, 32)
        if strategy == "flat":  # fused d1+d2 along x: 128 threads, the fastest on the H100 (h100-derivatives-flat.txt)
            return (128,)
        if strategy == "rows":  # fused d1+d2 along x: 1x128 led 4x256 on the H100 (measured when rows was added; no file kept)
            return (1, 128)
        if strategy == "rows_vec":  # d1 along x: 1x256 the fastest on the H100 (h100-derivatives-rows-vec.json)
            return (1, 256)
        return (4, 256) if plan.axis == 1 else (64, 128)
    nd = plan.ndim
    if strategy == "naive":
        return (8, 32) if nd == 2 else (2, 4, 32)
    if strategy == "tiled":
        return (16, 32) if nd == 2 else (4, 8, 32)
    if strategy == "rows":  # the tiles of the rows results in h100-strategies-*-42f63af.json
        return (4, 512) if nd == 2 else (1, 4, 256)
    if strategy == "rows_vec":  # 3D: the best of 8 tiles for heat3d 512^3 float32 on an H100 and an H200 (vec4-3d-h{100,200}-*);
        return (1, 128) if nd == 2 else (2, 4, 64)  # 2D: the H100's best (auto picks by device: tune.ROWS_VEC_2D_TILES)
    if nd == 2:  # H100 and H200: pipelined gains on rows of 512, streaming does not (docs/performance.md)
        return (64, 512) if strategy == "pipelined" else (64, 256)
    if strategy == "streaming":  # 2 x 256 planes for short halos; long ones: 256 planes of 32 x 32 (H100, commit 824fd67)
        return (64, 2, 256) if plan.radius <= 2 else (256, 32, 32)
    if strategy == "streaming_vec":
        # Chunks of 64 planes, not 256 (benchmarks/results/h100-wave3d-streaming-vec-chunks-and-narrow.json).
        # In float32, r > 4 takes 8 x 32 cells (h100-wave3d-vec-tiles-{512,1024}-9092a3d.json); r4 keeps 4 x 128,
        # where 8 x 32 spills under the launch bounds; float64 takes 16 x 64 (measured at commit d507bb0).
        if np.dtype(dtype).itemsize == 8:
            return (64, 16, 64)
        return (64, 8, 32) if plan.radius > 4 else (64, 4, 128)
    if strategy == "pipelined":  # no other tile measured clearly faster on the H100 (commit 46ef0f7)
        return (64, 4, 128) if plan.radius <= 2 else (64, 16, 32)
    return (32, 8, 64)


def _check_tile(tile, expected: int, strategy: str, threads: Callable[[tuple[int, ...]], int]) -> tuple[int, ...]:
    try:
        tile = tuple(int(t) for t in tile)
    except (TypeError, ValueError):
        raise StencilforgeError(f"tile must be a sequence of integers, got {tile!r}") from None
    if len(tile) != expected or any(t < 1 for t in tile):
        raise StencilforgeError(f"strategy {strategy} needs a tile of {expected} positive integers, got {tile}")
    if threads(tile) > MAX_THREADS:
        raise StencilforgeError(f"tile {tile} gives {threads(tile)} threads per block; the limit is {MAX_THREADS}")
    return tile


def sweep_kernel(sweep: Sweep, strategy: str, dtype, tile=None, limits: Limits = HOPPER) -> Kernel:
    """The kernel writing `sweep.out` over the interior with one strategy, its shared memory within
    `limits` (the backend passes its device's; without a device, sm_90's)."""
    check_names(set(sweep.inputs) | {sweep.out})
    if strategy not in SWEEP_STRATEGIES:
        raise StencilforgeError(f"strategy {strategy!r} does not apply to a stencil sweep: choose one of {', '.join(SWEEP_STRATEGIES)}")
    if sweep.ndim not in (2, 3):
        raise StencilforgeError(f"the cuda backend supports 2D and 3D sweeps, not {sweep.ndim}D")
    tile = default_tile(sweep, strategy, dtype) if tile is None else tile
    name = f"sf_{strategy}_{sweep.out}"
    if strategy in ("streaming", "streaming_vec", "streaming_l1", "pipelined"):
        cells = max(1, vector_width(sweep, dtype)) if strategy == "streaming_vec" else 1
        tile = _check_tile(tile, sweep.ndim, strategy, lambda t: math.prod(t[1:]) // cells)
        if strategy == "pipelined":
            return pipelined_sweep(sweep, dtype, tile, name, limits)
        build = {"streaming": streaming_sweep, "streaming_vec": streaming_vector_sweep, "streaming_l1": streaming_cached_sweep}[strategy]
        return build(sweep, dtype, tile, name)
    if strategy == "rows":
        return rows_sweep(sweep, dtype, _check_tile(tile, sweep.ndim, strategy, lambda t: t[-1]), name)
    if strategy == "rows_vec":
        if not row_vector_width(sweep, dtype):
            raise StencilforgeError(f"strategy rows_vec needs a sweep whose x neighbours lie in the cell's row; {sweep.out}'s does not")
        return rows_vector_sweep(sweep, dtype, _check_tile(tile, sweep.ndim, strategy, lambda t: t[-1]), name)
    tile = _check_tile(tile, sweep.ndim, strategy, math.prod)
    if strategy == "naive":
        return naive_sweep(sweep, dtype, tile, name)
    return tiled_sweep(sweep, dtype, tile, name, limits)


def operator_kernel(op: AxisOperator, strategy: str, dtype, tile=None) -> Kernel:
    if strategy not in OPERATOR_STRATEGIES:
        raise StencilforgeError(
            f"strategy {strategy!r} does not apply to a derivative operator: choose one of {', '.join(OPERATOR_STRATEGIES)}"
        )
    tile = default_tile(op, strategy) if tile is None else tile
    name = f"sf_{strategy}_axis{op.axis}_" + "_".join(d.out for d in op.outputs)
    if strategy == "naive":
        return naive_operator(op, dtype, _check_tile(tile, 2, strategy, math.prod), name)
    if strategy == "flat":
        return flat_operator(op, dtype, _check_tile(tile, 1, strategy, math.prod), name)
    if strategy == "rows":
        return rows_operator(op, dtype, _check_tile(tile, 2, strategy, lambda t: t[1]), name)
    if strategy == "rows_vec":
        return rows_vector_operator(op, dtype, _check_tile(tile, 2, strategy, lambda t: t[1]), name)
    return pencil_operator(op, dtype, _check_tile(tile, 2, strategy, lambda t: t[1]), name)
