"""`stencilforge tune`: strategies x tile shapes for one workload (or a linear pass of a problem file) on this GPU,
schedules of a problem file's generated passes (`tune_passes`); winners cached.

A search over tile shapes: every candidate is checked against
the NumPy oracle and our default result exactly as in `bench` (a tile that
computes garbage fast never wins), timed with CUDA events, and the table is
sorted by throughput. Candidates that the code generator refuses (too many
threads, too much shared memory) are listed as skipped.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..backends import get_backend
from ..backends.cuda.backend import pass_kernel
from ..backends.cuda.codegen import code_signature
from ..backends.cuda.tune import pass_variants
from ..errors import StencilforgeError
from ..ir.analysis import Pass, slot_name
from ..plan import AxisOperator, Sweep
from ..printers.cuda import half_slots
from ..simulation import Simulation
from ..tuning import cache_key, pass_key, store_choice, store_entry
from .measure import CallRunner, MeasureOptions, cupy_event_clock, gpu_copy_bandwidth, gpu_device, now_iso, time_runner, wall_clock
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


@dataclass(frozen=True)
class PassTuneResult:
    label: str  # the problem and the pass's outputs
    device: str
    rows: list  # {schedule, status, median_ms, teff_gbps, pct_copy}: ok by time first, the default among them
    winner: dict | None
    key: str
    budget_exhausted: bool


def _schedule_label(schedule: dict) -> str:
    block = "x".join(map(str, schedule["block"]))
    along = f"{schedule['planes_per_thread']} planes" if schedule["planes_per_thread"] else f"{schedule['rows']} rows"
    columns = "words" if schedule["words"] else f"{schedule['vector']} columns"
    return f"{block} threads, {along}, {columns}"


def tune_passes(problem, budget_s: float = 60.0, measure: MeasureOptions | None = None, progress=None,
                store: bool = True) -> list[PassTuneResult]:
    """Search the schedules of each generated pass of a problem (`backends.cuda.tune.pass_variants`) on its
    grid, from its state after one step, and cache each pass's winner for `auto`; `budget_s` per pass."""
    try:
        backend = get_backend("cuda")
    except StencilforgeError as exc:
        raise StencilforgeError(f"tune searches CUDA schedules and needs the cuda backend: {exc}") from None
    device = gpu_device()
    copy = gpu_copy_bandwidth(2**29, MeasureOptions(repeats=3, target_s=0.05))["gbps"]
    sim = Simulation(problem, backend)
    sim.step(1)
    results = []
    for index, stage in enumerate(problem.analysis.stages):
        if isinstance(stage, Pass) and index not in sim.sweeps:
            label = f"{problem.name}: {', '.join(eq.label for eq in stage.equations)}"
            rows, exhausted = _pass_rows(sim, stage, label, copy, budget_s, measure or MeasureOptions(repeats=5, target_s=0.03),
                                         progress or (lambda msg: None))
            key = pass_key(device["name"], pass_kernel(stage, sim.lattice, problem.constants, sim.pass_images(stage)).source,
                           sim.lattice.shape, sim.lattice.dtype)
            winner = rows[0] if rows and rows[0]["status"] == "ok" else None
            if winner is not None and store:
                schedule = dict(winner["schedule"], block=list(winner["schedule"]["block"]))
                store_entry(key, {"schedule": schedule, "workload": label, "median_ms": winner["median_ms"], "copy_gbps": copy,
                                  "date": now_iso()})
            results.append(PassTuneResult(label, device["name"], rows, winner, key, exhausted))
    return results


def _pass_rows(sim: Simulation, stage: Pass, label: str, copy_gbps: float, budget_s: float, measure: MeasureOptions,
               say: Callable[[str], None]) -> tuple[list[dict], bool]:
    """Each schedule of `stage` checked bit for bit against the first (the default), its outputs NaN-poisoned
    before each run, ghost cells included (a slot the pass updates in place gets its saved values back), then
    timed with CUDA events, median of repeats; sorted by time. Leaves the simulation's arrays as it found them."""
    import cupy

    arrays, lattice, constants = sim.arrays(), sim.lattice, sim.problem.constants
    written = [slot_name(s) for s in stage.writes]
    read = {slot_name(s) for s in stage.reads}
    saved = {n: arrays[n].copy() for n in written}
    half = half_slots(stage)
    nbytes = math.prod(lattice.shape) * sum(2 if n in half else lattice.dtype.itemsize for n in [*written, *read])
    sync = cupy.cuda.Device().synchronize
    images = sim.pass_images(stage)

    def one(run) -> dict:
        for n in written:
            arrays[n][...] = saved[n] if n in read else np.nan
        run(arrays, sim.params, sim.t)
        sync()
        return {n: arrays[n].copy() for n in written}

    rows: list[dict] = []
    reference: dict | None = None
    start, exhausted = time.perf_counter(), False
    for i, schedule in enumerate(pass_variants(stage, lattice.ndim, lattice.padded_shape[-1])):
        if rows and time.perf_counter() - start > budget_s:
            exhausted = True
            break
        row = {"schedule": schedule, "label": _schedule_label(schedule), "default": i == 0}
        say(f"{label}: {row['label']}")
        try:
            run = sim.backend.equation_pass(stage, lattice, constants, images=images, **schedule)
            got = one(run)
        except StencilforgeError as exc:
            rows.append({**row, "status": "skipped", "note": str(exc)})
            continue
        if reference is None:
            reference = got
        elif not all(cupy.array_equal(got[n], reference[n], equal_nan=True) for n in written):
            rows.append({**row, "status": "wrong", "note": "differs from the default schedule's bits"})
            continue
        seconds = time_runner(CallRunner(functools.partial(run, arrays, sim.params, sim.t), sync, cupy_event_clock), measure).median
        gbps = nbytes / seconds / 1e9
        rows.append({**row, "status": "ok", "median_ms": seconds * 1e3, "teff_gbps": gbps, "pct_copy": 100 * gbps / copy_gbps})
    for n in written:
        arrays[n][...] = saved[n]
    rows.sort(key=lambda r: (r["status"] != "ok", r.get("median_ms") or 0.0))
    return rows, exhausted
