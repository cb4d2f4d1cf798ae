"""`stencilforge tune`: strategies x tile shapes for one workload (or a linear pass of a problem file) on this GPU,
winner cached.

A search over tile shapes: every candidate is checked against
the NumPy oracle and our default result exactly as in `bench` (a tile that
computes garbage fast never wins), timed with CUDA events, and the table is
sorted by throughput. Candidates that the code generator refuses (too many
threads, too much shared memory) are listed as skipped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

from ..backends import get_backend
from ..backends.cuda.codegen import code_signature
from ..errors import StencilforgeError
from ..plan import AxisOperator, Sweep
from ..tuning import cache_key, store_choice
from .measure import MeasureOptions, cupy_event_clock, gpu_copy_bandwidth, gpu_device, now_iso, wall_clock
from .suite import BackendRunner, BenchOptions, Impl, measure_impl
from .workloads import Case, Workload, build_case


def _threads_ok(n: int) -> bool:
    return 64 <= n <= 1024


def _tiles(plan: Sweep | AxisOperator, strategy: str) -> list[tuple[int, ...]]:
    """Tile shapes to try for one strategy (C order, x last and a multiple of 32), by the strategy's tile meaning."""
    if isinstance(plan, AxisOperator):
        return _operator_tiles(plan, strategy)
    return _sweep_tiles_2d(strategy) if plan.ndim == 2 else _sweep_tiles_3d(strategy)


def _operator_tiles(op: AxisOperator, strategy: str) -> list[tuple[int, ...]]:
    if strategy == "naive":
        return [(1, 256), (4, 64), (8, 32), (2, 128), (4, 128)]
    if strategy == "flat":  # threads per block
        return [(64,), (128,), (256,), (512,)]
    if strategy == "rows":  # rows per thread x threads along x
        return [(r, x) for r in (1, 2, 4, 8) for x in (128, 256, 512)]
    if strategy == "rows_vec":  # rows per thread x threads along x, each thread a vector of cells
        return [(r, x) for r in (1, 2, 4) for x in (64, 128, 256, 512)]
    if strategy == "pencil" and op.axis == 1:  # rows x segment length, one thread per cell
        return [(r, x) for r in (1, 2, 4, 8) for x in (64, 128, 256, 512) if _threads_ok(r * x)]
    if strategy == "pencil":  # cells marched down the column x columns
        return [(c, x) for c in (32, 64, 128, 256) for x in (64, 128, 256)]
    return []


def _sweep_tiles_2d(strategy: str) -> list[tuple[int, ...]]:
    if strategy == "naive":
        return [(y, x) for y in (1, 2, 4, 8, 16) for x in (32, 64, 128, 256) if _threads_ok(y * x)]
    if strategy == "tiled":
        return [(y, x) for y in (4, 8, 16, 32) for x in (32, 64, 128) if _threads_ok(y * x)]
    if strategy == "rows":
        return [(y, x) for y in (1, 2, 4, 8) for x in (256, 512, 1024)]
    if strategy == "rows_vec":  # as rows, x in threads of a vector of cells each
        return [(y, x) for y in (1, 2, 4, 8) for x in (64, 128, 256)]
    if strategy.startswith("streaming") or strategy == "pipelined":  # planes marched x row segment
        return [(c, x) for c in (64, 256, 1024) for x in (128, 256, 512, 1024)]
    return []


def _sweep_tiles_3d(strategy: str) -> list[tuple[int, ...]]:
    if strategy == "naive":
        return [(z, y, x) for z in (1, 2, 4) for y in (1, 4, 8) for x in (32, 64, 128) if 128 <= z * y * x <= 1024]
    if strategy == "tiled":
        return [(z, y, x) for z in (2, 4, 8) for y in (4, 8) for x in (32, 64) if _threads_ok(z * y * x)]
    if strategy == "rows":
        return [(z, y, x) for z in (1, 2) for y in (1, 2, 4, 8) for x in (128, 256, 512)]
    if strategy == "rows_vec":  # as rows, x in threads of a vector of cells each
        return [(z, y, x) for z in (1, 2, 4) for y in (1, 2, 4, 8) for x in (32, 64, 128)]
    if strategy == "streaming_vec":  # as streaming, in cells; a thread takes 2-4 along x, so rows can be wider
        return [(c, y, x) for c in (64, 96, 128, 256) for y in (2, 4, 8, 16) for x in (32, 64, 128, 256) if 256 <= y * x <= 1024]
    if strategy.startswith("streaming"):  # planes marched x in-plane tile
        return [(c, y, x) for c in (32, 64, 128, 256, 512) for y in (4, 8, 16, 32) for x in (32, 64) if _threads_ok(y * x)]
    if strategy == "pipelined":  # as streaming, plus wide rows (fewer halo cells per row for a short stencil)
        return [(c, y, x) for c in (32, 64, 128) for y in (2, 4, 8, 16) for x in (32, 64, 128, 256) if 256 <= y * x <= 1024]
    return []


Trial = tuple[str, tuple[int, ...]]


def candidates(plan: Sweep | AxisOperator, dtype="float32") -> tuple[list[Trial], list[Trial]]:
    """(strategy, tile) pairs worth trying, as (defaults, others): every strategy the code generator offers
    for the plan and dtype with its default tile, which a search tries first so that one cut short by its
    budget has still tried each strategy; then the other shapes of `_tiles`, grouped by strategy (a
    strategy new to `_tiles` gets its default only)."""
    from ..backends.cuda import codegen

    defaults, others = [], []
    for strategy in codegen.applicable_strategies(plan, dtype):
        default = tuple(codegen.default_tile(plan, strategy, dtype))
        defaults.append((strategy, default))
        others += [(strategy, t) for t in dict.fromkeys(_tiles(plan, strategy)) if t != default]
    return defaults, others


def ranked(trials: list[Trial], rows: list[dict]) -> list[Trial]:
    """`trials` with the strategies that measured fastest in `rows` (sorted, ok first) first, so the budget
    goes to the tiles of the leaders; the order within a strategy is kept."""
    rank: dict[str, int] = {}
    for r in rows:
        if r["status"] == "ok":
            rank.setdefault(r["resolved_strategy"] or r["strategy"], len(rank))
    return sorted(trials, key=lambda c: rank.get(c[0], len(rank)))


@dataclass(frozen=True)
class TuneResult:
    workload: Workload
    device: str
    rows: list  # bench rows, sorted: ok by throughput first, then the rest
    winner: dict | None
    key: str | None
    budget_exhausted: bool


def search(
    case: Case,
    trials: list[tuple[str, tuple[int, ...] | None]],
    engine_for: Callable[[str, tuple[int, ...] | None], object],
    measure: MeasureOptions,
    backend: str,
    copy_gbps: float | None = None,
    clock=None,
    budget_s: float | None = None,
    progress: Callable[[str], None] | None = None,
    then: Callable[[list[dict]], Sequence[tuple[str, tuple[int, ...] | None]]] | None = None,
) -> tuple[list[dict], bool]:
    """Check and time each (strategy, tile), then each of `then(rows so far, sorted)`; rows sorted by median
    time. After the first, stops once the budget is spent."""
    opts = BenchOptions((case.workload,), backend=backend, measure=measure)
    say = progress or (lambda msg: None)
    ref, start = None, time.perf_counter()
    rows: list[dict] = []

    def by_time() -> list[dict]:
        return sorted(rows, key=lambda r: (r["status"] != "ok", r.get("median_ms") or 0.0))

    def queue():  # lazy: `then` sees the rows of the trials before it
        yield from trials
        if then is not None:
            yield from then(by_time())

    for strategy, tile in queue():
        if budget_s is not None and rows and time.perf_counter() - start > budget_s:
            return by_time(), True
        say(f"{strategy} {tile}")
        make = lambda c, s=strategy, t=tile: BackendRunner(c, engine_for(s, t), clock or wall_clock)  # noqa: E731
        impl = Impl("stencilforge", "ours", strategy, make, tile=tile)
        row, after_two = measure_impl(case, impl, ref, opts, copy_gbps or 0.0, backend)
        if row["tile"] is None and tile is not None:
            row["tile"] = tuple(tile)
        if ref is None and row["status"] == "ok":
            ref = after_two
        rows.append(row)
    return by_time(), False


def tune(
    workload: Workload | Case, budget_s: float = 60.0, measure: MeasureOptions | None = None, progress=None, store: bool = True
) -> TuneResult:
    """Search the cuda backend's strategies and tiles for one workload, or one case (`workloads.pass_cases`: a linear
    pass of a problem of one's own), and cache the winner: a run whose pass has the plan's structure takes it."""
    try:
        get_backend("cuda")
    except StencilforgeError as exc:
        raise StencilforgeError(f"tune searches CUDA strategies and tile shapes and needs the cuda backend: {exc}") from None
    measure = measure or MeasureOptions(repeats=3, target_s=0.03)
    device = gpu_device()
    copy = gpu_copy_bandwidth(2**29, MeasureOptions(repeats=3, target_s=0.05))
    case = workload if isinstance(workload, Case) else build_case(workload)
    workload = case.workload
    defaults, others = candidates(case.plan, workload.dtype)
    rows, exhausted = search(
        case, [("auto", None), *defaults], lambda s, t: get_backend("cuda", strategy=s, tile=t), measure, "cuda",
        copy["gbps"], cupy_event_clock, budget_s, progress, then=lambda done: ranked(others, done),
    )
    winner = rows[0] if rows and rows[0]["status"] == "ok" else None
    key = None
    code = code_signature(case.plan, workload.dtype)
    if winner is not None and store:
        strategy = winner["resolved_strategy"] or winner["strategy"]
        key = store_choice(
            device["name"], case.plan, workload.shape, workload.dtype, code, strategy, winner["tile"],
            {"workload": workload.label, "median_ms": winner["median_ms"], "teff_gbps": winner["teff_gbps"],
             "pct_copy": winner["pct_copy"], "copy_gbps": copy["gbps"], "date": now_iso()},
        )
    elif winner is not None:
        key = cache_key(device["name"], case.plan, workload.shape, workload.dtype, code)
    return TuneResult(workload, device["name"], rows, winner, key, exhausted)
