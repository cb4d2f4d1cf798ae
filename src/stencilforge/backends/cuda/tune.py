"""The `auto` strategy: the winner `stencilforge tune` stored for this device, else a heuristic.

`choose` never needs a GPU (without a device name it skips the tuning cache),
so `show-kernel` and CI use it too. The heuristic follows measurements on an H100
and, where they differ, an H200, told apart by the device's facts (files under
benchmarks/results, named in `choose`; summary in docs/performance.md).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from ...ir.analysis import accesses, slot_name
from ...plan import AxisOperator, Sweep
from ...printers import cuda as printers_cuda
from ...tuning import cached_choice
from .codegen import code_signature, default_tile
from .facts import DeviceFacts
from .schedules.fused import PAIR_TILE
from .schedules.march import streaming_applicable
from .schedules.rows import row_vector_width
from .schedules.streaming_vec import vector_width

log = logging.getLogger(__name__)


# Derivatives d1 + d2 along x: `rows_vec` (vectors of cells per thread, more bytes in flight) overtakes `flat`
# on a device whose copy bandwidth per SM lies above this, between the H100 (where flat leads) and the H200
# (where rows_vec leads); both measured in benchmarks/results/derivatives-cuda-h{100,200}-552f1c6.json.
FUSED_ROWS_VEC_GBPS_PER_SM = 27.0

# float32 star sweeps along rows (x neighbours in the cell's row) run `rows_vec`: 16-byte loads, ahead of rows and
# pipelined on an H100 and an H200 in 2D and 3D. In 2D, a device with more copy bandwidth per SM than
# FUSED_ROWS_VEC_GBPS_PER_SM (the H200) needs more bytes in flight per thread: 4 rows per thread there, 1 on the
# H100 (the best of 8 tiles on each; rows-vec-2d-h{100,200}-2026-11-24.json; 3D: vec4-3d-h{100,200}-2026-11-24.json).
# On the H100 the one-field sweep that skips its centre (Jacobi's Laplace sweep) keeps rows, which led rows_vec there
# in the bench (h100-bench-2d-rows-vec.json).
ROWS_VEC_2D_TILES = {"fewer bytes per SM": (1, 128), "more bytes per SM": (4, 128)}

# 2D star sweeps of radius 1 take five steps per pass, in tiles of 16 rows x 128 threads; the rest two, in
# PAIR_TILE. Measured on an H100 over 2..8 steps, four tiles and jacobi2d, heat2d (both dtypes) and poisson2d
# (benchmarks/results/fused-steps-h100-2026-11-24.json): five steps in that tile were best or within a few
# points of the best for each; past five, the recomputed halo and the shuffles cost more than the bytes saved.
# The five-step kernel is bound by latency at the compiler's 128 registers per thread; asking for 6 blocks per SM
# (float32) or 4 (float64) was faster for every workload measured on both an H100 and an H200
# (fused-occupancy-h100-2026-11-24.json, fused-occupancy-h200-2026-11-24.json); more spills.
FUSED_2D_R1 = (5, (16, 128))
FUSED_2D_R1_BLOCKS = {4: 6, 8: 4}  # by the dtype's item size


# Generated 3D passes that read two or more fields above or below the cell: 32 x 8 threads, each computing two
# consecutive planes of its cell (the z-neighbours it reads twice stay in registers; rows along y leave more
# L2 traffic per field). Faster for a two-field 3D Gray-Scott on both an H100 and an H200; one field (heat3d)
# keeps rows along y, where planes were slower on the H100
# (benchmarks/results/planes-h100-2026-11-24.json, planes-h200-2026-11-24.json).
PASS_3D_PLANES = {"block": (32, 8), "planes_per_thread": 2}

# Passes over fields stored in float16: a thread's loads are 2 bytes, so it takes more cells to keep the bytes
# in flight: 32 x 8 threads, each 4 rows (2D) or 4 planes (3D) of 2 columns a block's width apart. Fastest of
# 48 (2D) and 36 (3D) variants for heat2d 16384^2 and heat3d 512^3 and a radius-8 wave at 512^3 on an H100
# (benchmarks/results/half-schedules-h100-2026-11-24.json).
PASS_HALF = {2: {"block": (32, 8), "rows": 4, "vector": 2}, 3: {"block": (32, 8), "planes_per_thread": 4, "vector": 2}}
# Passes where every array is float16 and a padded row holds whole 4-byte words: each thread reads and writes the
# two cells of one word, in 2D 4 rows on 128 x 2 threads, in 3D 4 planes on 32 x 8 threads. Faster than 2-byte loads
# for heat2d 16384^2, heat3d 512^3 and a radius-8 wave at 512^3 on an H100 and an H200, and the best of the word
# schedules measured (benchmarks/results/half-packed-*, half-words-h200-*, half-words3d-h{100,200}-2026-11-24.json).
PASS_HALF_WORDS = {2: {"block": (128, 2), "rows": 4, "words": True}, 3: {"block": (32, 8), "planes_per_thread": 4, "words": True}}


# 2D float32 passes that read one field at neighbours (heat, advection): 4 rows per thread, faster for heat at 4096^2
# and 16384^2 on an H100 and an H200; two or more fields (Gray-Scott) keep the printer's 2, where 4 lost
# (benchmarks/results/pass-rows-h{100,200}-2026-11-24.json).
PASS_2D_ONE_FIELD = {"rows": 4}


def pass_schedule(p, ndim: int, row_cells: int) -> dict:
    """Keyword arguments of `printers.cuda.pass_source` and `launch_grid` for a generated pass whose padded rows
    hold `row_cells` cells (see PASS_3D_PLANES, PASS_HALF, PASS_HALF_WORDS, PASS_2D_ONE_FIELD); empty for the
    printer's defaults."""
    fields = [f for eq in p.equations for f in [eq.target.field, *(a.field for a in accesses(eq.expr))]]
    if ndim in PASS_HALF_WORDS and all(f.half for f in fields) and row_cells % 2 == 0:
        return dict(PASS_HALF_WORDS[ndim])
    if ndim in PASS_HALF and any(f.half for f in fields):
        return dict(PASS_HALF[ndim])
    if ndim == 2:
        return dict(PASS_2D_ONE_FIELD) if len({name for name, _ in p.halo}) == 1 else {}
    above_below = {slot_name((a.field.name, a.level)) for eq in p.equations for a in accesses(eq.expr)
                   if len(a.offset) == 3 and a.offset[0]}
    return dict(PASS_3D_PLANES) if ndim == 3 and len(above_below) >= 2 else {}


def pass_defaults(p, ndim: int, row_cells: int) -> dict:
    """The whole schedule `pass_schedule` gives a generated pass, every keyword of `backend.pass_kernel` spelled out."""
    chosen: dict[str, Any] = {"block": printers_cuda.BLOCK, "rows": None, "vector": 1, "planes_per_thread": None, "words": False}
    chosen.update(pass_schedule(p, ndim, row_cells))
    return _spelled(chosen, ndim)


def _spelled(schedule: dict, ndim: int) -> dict:
    """`schedule` with its block a tuple (in 1D one row of threads, what a 1D pass launches), and where it names
    neither rows nor planes per thread the printer's default rows: two spellings of one kernel compare equal."""
    rows = schedule["rows"] if schedule["rows"] is not None or schedule["planes_per_thread"] else printers_cuda.ROWS[ndim]
    block = tuple(schedule["block"]) if ndim > 1 else (schedule["block"][0], 1)
    return {**schedule, "block": block, "rows": rows}


def pass_variants(p, ndim: int, row_cells: int) -> list[dict]:
    """Schedules of a generated pass for `stencilforge tune` to time, the default (`pass_defaults`) first: blocks
    of 64 to 1024 threads, 1 to 8 rows (3D: planes) per thread and 1 or 2 columns; float16 passes keep their
    word or cell layout. Each computes every cell with the same operations, so each gives the default's bits."""
    default = pass_defaults(p, ndim, row_cells)
    blocks = [(x, y) for x in (32, 64, 128, 256, 512) for y in (1, 2, 4, 8, 16) if 64 <= x * y <= 1024]
    if ndim == 1:
        blocks = [(x, 1) for x in (64, 128, 256, 512, 1024)]
    vectors = (1,) if default["words"] else (1, 2)
    shapes: list[dict] = []
    if ndim == 1:
        shapes = [{"vector": v} for v in (1, 2, 4)]
    elif ndim == 2:
        shapes = [{"rows": r, "vector": v} for r in (1, 2, 4, 8) for v in vectors]
    else:
        shapes = [{"rows": r, "vector": v} for r in (1, 2, 4) for v in vectors]
        shapes += [{"planes_per_thread": k, "vector": v} for k in (1, 2, 4, 8) for v in vectors]
    out = [default]
    for shape in shapes:
        for block in blocks:
            variant = _spelled({**default, "rows": None, "planes_per_thread": None, **shape, "block": block}, ndim)
            if variant not in out:
                out.append(variant)

    def distance(v: dict) -> tuple:  # the neighbours of the default first, so a search cut short has tried them
        threads = math.prod(v["block"]) / math.prod(default["block"])
        return sum(v[k] != default[k] for k in v), abs(math.log2(threads))

    return sorted(out, key=distance)


def fused_choice(sweep: Sweep, dtype="float32") -> tuple[int, tuple[int, ...], int | None]:
    """(steps per fused pass, tile, blocks per SM to ask for or None) for a sweep that fuses (see FUSED_2D_R1)."""
    if sweep.ndim == 2 and sweep.radius == 1:
        return (*FUSED_2D_R1, FUSED_2D_R1_BLOCKS.get(np.dtype(dtype).itemsize))
    return 2, PAIR_TILE[sweep.ndim], None


def choose(plan: Sweep | AxisOperator, grid_shape, dtype, device_name: str | None = None,
           facts: DeviceFacts | None = None) -> tuple[str, tuple[int, ...]]:
    """(strategy, tile) for a plan on an interior of `grid_shape` (C order).

    A tuned winner for `device_name` comes first. Otherwise the heuristic:

    - Derivatives along x: `rows_vec` (a vector of cells per thread) for one
      output (benchmarks/results/h100-derivatives-rows-vec.json); for the
      fused d1+d2 `flat` (one thread per cell over the flattened array) unless
      the device's copy bandwidth per SM (`facts`) needs the bytes in flight
      of `rows_vec` (FUSED_ROWS_VEC_GBPS_PER_SM). Along y: one thread per
      cell (`naive`); L2 already serves the neighbouring rows
      (h100-derivatives-flat.txt).
    - 3D star sweeps: `rows_vec` for a float32 one-field stencil of radius 1,
      ahead of `rows` on an H100 and an H200 (heat3d,
      vec4-3d-h{100,200}-2026-11-24.json); else `rows` for radius <= 2, which
      leads or ties `streaming` in float32 and float64 at 256^3 and 512^3
      (h100-strategies-heat3d-{256,512}-42f63af.json); for longer stencils,
      whose reads through L1 make `rows` slow, `streaming_vec` where the x
      radius fits whole vectors, else `streaming` (h100-bench-74bc822.json).
    - 2D star sweeps: `rows_vec` for float32 stencils of radius 1, in a tile
      chosen by the device's copy bandwidth per SM (ROWS_VEC_2D_TILES), except
      a one-field sweep that skips its centre on the H100 class;
      otherwise `rows`, except `pipelined` for a float32 single-field
      stencil that reads its centre cell, the one case it wins
      (h100-strategies-2d-{4096,16384}-42f63af.json, h100-auto-2d-53a2889.json).
    - Any other stencil: `tiled`.
    """
    what = f"derivatives along axis {plan.axis}" if isinstance(plan, AxisOperator) else f"the {plan.ndim}D sweep of {plan.out}"
    tile: tuple[int, ...] | None = None  # a rule's own tile, else the strategy's default
    if device_name is not None:
        hit = cached_choice(device_name, plan, grid_shape, dtype, code_signature(plan, dtype))
        if hit is not None:
            strategy, tile = hit
            log.info("strategy auto: %s for %s, the winner `stencilforge tune` stored for %s", strategy, what, device_name)
            return strategy, tile if tile is not None else default_tile(plan, strategy, dtype)
    if isinstance(plan, AxisOperator):
        if plan.axis != plan.ndim - 1:
            strategy, why = "naive", "a strided axis"
        elif len(plan.outputs) == 1:
            strategy, why = "rows_vec", "one output along rows"
        elif facts is not None and facts.gbps_per_sm >= FUSED_ROWS_VEC_GBPS_PER_SM:
            strategy, why = "rows_vec", f"outputs fused along rows, {facts.gbps_per_sm:.1f} GB/s per SM to keep busy"
        else:
            strategy, why = "flat", "outputs fused along rows"
    elif (blocked := streaming_applicable(plan)) is None:
        one_field = not set(plan.inputs) - set(plan.stencil_inputs)
        wide = facts is not None and facts.gbps_per_sm >= FUSED_ROWS_VEC_GBPS_PER_SM
        centre = any(not any(o) for t in plan.terms for o, _ in t.stencil.entries)
        vectors = plan.radius == 1 and np.dtype(dtype) == np.float32 and row_vector_width(plan, dtype)
        if plan.ndim == 2 and vectors and (wide or centre or not one_field):
            strategy, tile = "rows_vec", ROWS_VEC_2D_TILES["more bytes per SM" if wide else "fewer bytes per SM"]
            why = f"a float32 2D star of radius 1, {f'{facts.gbps_per_sm:.1f} GB/s' if facts else 'no device facts'} per SM"
        elif plan.ndim == 2:
            strategy = "pipelined" if one_field and centre and np.dtype(dtype) == np.float32 else "rows"
            why = "a float32 one-field 2D stencil reading its centre" if strategy == "pipelined" else "a 2D sweep"
        elif vectors and one_field:
            strategy, why = "rows_vec", "a float32 one-field 3D stencil of radius 1, vectors of cells along rows"
        else:
            strategy = "rows" if plan.radius <= 2 else "streaming_vec" if vector_width(plan, dtype) else "streaming"
            why = f"a 3D stencil of radius {plan.radius}" + (", vectors of cells fit" if strategy == "streaming_vec" else "")
    else:
        strategy, why = "tiled", blocked
    tile = tile or default_tile(plan, strategy, dtype)
    log.info("strategy auto: %s %s for %s (%s; no tuned winner)", strategy, tile, what, why)
    return strategy, tile
