"""One benchmark run: ceilings first, then every workload for ours and every peer, checked before timed.

Correctness gate, for every implementation (ours and the peers'), before any
time is taken: one step from the shared random fields is compared with the
NumPy oracle on sampled boxes (corners and centre, halos included), and the
state after a second step is compared over the whole array with our first
correct result. Errors are max |got - ref| / max |ref|, against a tolerance
per dtype. An implementation outside it is reported as wrong and not timed.
"""

from __future__ import annotations

import functools
import gc
import itertools
import sys
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..backends import get_backend
from ..backends.base import with_walls
from ..backends.numpy_ref import evaluate_axis_operator, evaluate_sweep
from ..errors import StencilforgeError
from ..grid import Grid
from ..metrics import throughput
from .coldstart import ProblemFile, cold_start_rows
from .loop import LoopWorkload, loop_rows
from .measure import (
    MeasureOptions,
    cpu_copy_bandwidth,
    cpu_device,
    cpu_peak_gflops,
    cupy_event_clock,
    git_commit,
    gpu_copy_bandwidth,
    gpu_device,
    gpu_peak_gflops,
    now_iso,
    time_runner,
    time_runners,
    versions,
    wall_clock,
)
from .peers import DEFAULT_CPU, DEFAULT_GPU, PEERS, Peer, Unsupported
from .projection import ProjectionWorkload, projection_rows
from .small import SmallWorkload, small_rows
from .workloads import Case, Workload, build_case

TOLERANCE = {"float32": 1e-4, "float64": 1e-10}
SCHEMA = "stencilforge-bench/1"


@dataclass(frozen=True)
class BenchOptions:
    workloads: tuple[Workload, ...]
    backend: str = "auto"
    strategies: tuple[str, ...] | None = None  # cuda only; None: every applicable strategy and auto
    peers: tuple[str, ...] | None = None  # None: the defaults for the device
    measure: MeasureOptions = MeasureOptions()
    copy_bytes: int | None = None
    seed: int = 0
    extra_peers: tuple[Peer, ...] = ()
    loops: tuple[LoopWorkload, ...] = ()  # time-loop rows: the API's time per step next to its kernels
    cold_start: tuple[LoopWorkload | ProblemFile, ...] = ()  # a fresh process's time to its first step, on empty and on primed caches
    cold_start_without: tuple[str, ...] = ()  # packages the cold-start processes cannot import
    cold_start_repeats: int = 1  # cold and warm processes per row; the median is reported
    projection: tuple[ProjectionWorkload, ...] = ()  # a solve in each step, ours against the array libraries' CG
    small: tuple[SmallWorkload, ...] = ()  # small grids, where the host's work is a step's cost, against array loops
    progress: Callable[[str], None] | None = field(default=None, compare=False)


# ---------------------------------------------------------------- correctness


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| / max |ref|; infinite when `got` has NaN or Inf where `ref` is finite."""
    got = np.asarray(got)
    if got.shape != ref.shape:
        return float("inf")
    scale = float(np.max(np.abs(ref))) or 1.0
    err = float(np.max(np.abs(got - ref))) / scale
    return err if np.isfinite(err) else float("inf")


def _boxes(shape: tuple[int, ...], size: int):
    """Interior boxes at every corner and the centre (start, length per axis)."""
    lengths = tuple(min(n, size) for n in shape)
    corners = itertools.product(*[(0, n - b) for n, b in zip(shape, lengths)])
    centre = tuple((n - b) // 2 for n, b in zip(shape, lengths))
    return [(start, lengths) for start in dict.fromkeys([*corners, centre])]


def oracle_error(case: Case, after_one_step: dict[str, np.ndarray], box: int = 32) -> float:
    """Max relative error of one step against the NumPy oracle, evaluated on sampled boxes only
    (the full oracle would take minutes on the GPU matrix)."""
    plan, grid = case.plan, case.grid
    worst, pairs = 0.0, []
    if case.is_sweep:
        got = after_one_step[case.outputs[0]]
        g = grid.ghost
        for start, lengths in _boxes(grid.shape, box):
            halo = tuple(slice(s, s + b + 2 * g) for s, b in zip(start, lengths))
            inner = tuple(slice(s + g, s + g + b) for s, b in zip(start, lengths))
            sub = Grid(lengths, grid.spacing, grid.dtype, g, grid.lower)
            expected = evaluate_sweep(plan, sub, {n: case.fields[n][halo] for n in plan.inputs})
            pairs.append((got[inner], expected))
    else:
        n_across = case.grid.shape[1 - plan.axis]
        picks = sorted({*range(min(4, n_across)), n_across // 2, *range(max(0, n_across - 4), n_across)})
        take = (lambda a: a[picks, :]) if plan.axis == 1 else (lambda a: a[:, picks])
        u = np.ascontiguousarray(take(case.fields["u"]))
        outs = [np.empty_like(u) for _ in plan.outputs]
        evaluate_axis_operator(plan, u, outs)
        pairs = [(take(after_one_step[d.out]), o) for d, o in zip(plan.outputs, outs)]
    for got_part, expected in pairs:
        worst = max(worst, relative_error(got_part, expected))
    return worst


def oracle_error_fused(case: Case, after: dict[str, np.ndarray], steps: int, box: int = 32) -> float:
    """The oracle applied `steps` times on sampled boxes, for implementations that advance several steps per pass.

    The middle states are evaluated on the box grown by steps - 1 ghost widths
    (where the grid allows) and keep the ghost cells' values beyond the interior:
    the bench never refills ghost cells, so they are static walls for every implementation.
    """
    plan, grid = case.plan, case.grid
    g, margin = grid.ghost, (steps - 1) * grid.ghost
    (u,) = plan.stencil_inputs
    got = after[case.outputs[0]]
    worst = 0.0
    for start, lengths in _boxes(grid.shape, box):
        lo = [max(0, s - margin) for s in start]
        hi = [min(n, s + b + margin) for s, b, n in zip(start, lengths, grid.shape)]
        sub = Grid(tuple(h - a for a, h in zip(lo, hi)), grid.spacing, grid.dtype, g, grid.lower)
        local = {n: case.fields[n][tuple(slice(a, h + 2 * g) for a, h in zip(lo, hi))] for n in plan.inputs}
        state = local[u]
        for _ in range(steps - 1):
            middle = state.copy()
            middle[sub.interior] = evaluate_sweep(plan, sub, {**local, u: state})
            state = middle
        last = evaluate_sweep(plan, sub, {**local, u: state})
        expected = last[tuple(slice(s - a, s - a + b) for s, a, b in zip(start, lo, lengths))]
        worst = max(worst, relative_error(got[tuple(slice(s + g, s + g + b) for s, b in zip(start, lengths))], expected))
    return worst


def reference_error(ref: dict | None, got: dict) -> float | None:
    if ref is None:
        return None
    return max(relative_error(got[k], ref[k]) for k in ref)


# ---------------------------------------------------------------- our implementations


@dataclass
class BackendRunner:
    """Our backend on the case: fields uploaded once, buffers swapped by name after each sweep."""

    case: Case
    engine: object
    clock: Callable = wall_clock

    def __post_init__(self) -> None:
        case, engine = self.case, self.engine
        # the case's fields must stay pristine: `field` copies, in the layout the time loop gives sweeps; the CPU
        # backends' asarray returns the same array
        if case.is_sweep:
            self.fields = {k: engine.field(v, case.grid.ghost) for k, v in case.fields.items()}
            self.kernel = self._step = engine.sweep(case.plan, case.grid)
        else:
            self.fields = {k: engine.asarray(v.copy()) for k, v in case.fields.items()}
            apply = self.kernel = engine.axis_operator(case.plan, case.grid.dtype, case.grid.shape)
            outs = [d.out for d in case.plan.outputs]
            self._step = lambda f: apply(f["u"], *(f[o] for o in outs))

    def run(self, steps: int) -> None:
        f = self.fields
        for _ in range(steps):
            self._step(f)
            if self.case.swap:
                a, b = self.case.swap
                f[a], f[b] = f[b], f[a]

    def sync(self) -> None:
        self.engine.synchronize()

    def latest(self) -> dict[str, np.ndarray]:
        self.sync()
        return {n: np.array(self.engine.to_host(self.fields[n]), copy=True) for n in self.case.outputs}


class FusedRunner(BackendRunner):
    """Ours advancing several steps per pass (the time loop's path where walls are static): steps left
    over are single sweeps. Raises Unsupported where the backend cannot fuse the workload's sweep."""

    def __post_init__(self) -> None:
        super().__post_init__()
        case = self.case
        fusable = self.engine.fuses_steps and case.is_sweep and case.plan.composes_with(case.swap)
        fused = self.engine.sweep_fused(case.plan, case.grid) if fusable else None
        if fused is None:
            raise Unsupported("this backend does not fuse steps of this sweep (one star-stencil field swapped with the output)")
        self._fused, self.steps_per_pass = fused, fused.steps
        if self.engine.name == "cuda":
            self.resolved = (fused.strategy, fused.tile)

    def run(self, steps: int) -> None:
        passes, single = divmod(steps, self.steps_per_pass)
        f = self.fields
        a, b = self.case.swap
        for _ in range(passes):
            self._fused(with_walls(f, self.case.plan, self.steps_per_pass))  # the bench's walls stay put
            f[a], f[b] = f[b], f[a]
        if single:
            super().run(single)


@dataclass(frozen=True)
class Impl:
    """One row to measure: ours with a strategy, or a peer."""

    name: str
    kind: str  # "ours" or "peer"
    strategy: str | None
    make: Callable[[Case], object]
    description: str = ""
    tile: tuple[int, ...] | None = None


def _cuda_strategies(case: Case, requested: tuple[str, ...] | None) -> list[str]:
    from ..backends.cuda import codegen

    own = codegen.applicable_strategies(case.plan, case.workload.dtype)
    if requested is None:
        return [*own, "auto"]
    return [s for s in requested if s in own or s == "auto"]


def _ours(case: Case, opts: BenchOptions, backend_name: str) -> list[Impl]:
    if backend_name != "cuda":
        impls = [Impl("stencilforge", "ours", backend_name, lambda c: BackendRunner(c, get_backend(backend_name)))]
        if case.is_sweep and case.plan.composes_with(case.swap) and get_backend(backend_name).fuses_steps:
            impls.append(Impl("stencilforge", "ours", "fused", lambda c: FusedRunner(c, get_backend(backend_name))))
        return impls
    impls = []
    for s in _cuda_strategies(case, opts.strategies):
        impls.append(Impl("stencilforge", "ours", s, lambda c, s=s: BackendRunner(c, get_backend("cuda", strategy=s), cupy_event_clock)))
    if case.is_sweep and (opts.strategies is None or "fused" in opts.strategies):
        impls.append(Impl("stencilforge", "ours", "fused", lambda c: FusedRunner(c, get_backend("cuda"), cupy_event_clock)))
    return impls


def _peer_impls(opts: BenchOptions, gpu: bool) -> list[Impl]:
    names = opts.peers if opts.peers is not None else (DEFAULT_GPU if gpu else DEFAULT_CPU)
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise StencilforgeError(f"unknown peer {unknown[0]!r}: choose from {', '.join(PEERS)}")
    chosen = [PEERS[n] for n in names] + list(opts.extra_peers)
    return [Impl(p.name, "peer", None, p.runner, p.description) for p in chosen]


def _release() -> None:
    """Return device memory cached by the array libraries between implementations."""
    gc.collect()
    if "cupy" in sys.modules:
        sys.modules["cupy"].get_default_memory_pool().free_all_blocks()
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        sys.modules["torch"].cuda.empty_cache()


# ---------------------------------------------------------------- the run


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _row(case: Case, impl: Impl) -> dict:
    w = case.workload
    return {
        "workload": w.name,
        "label": w.label,
        "shape": list(w.shape),
        "dtype": w.dtype,
        "impl": impl.name,
        "kind": impl.kind,
        "strategy": impl.strategy,
        "resolved_strategy": None,
        "tile": None,
        "status": None,
        "note": "",
        "check": {},
    }


def _metrics(case: Case, timing, copy_gbps: float) -> dict:
    rates = throughput(case.cells, 1, timing.median, case.bytes_per_cell, case.flops_per_cell)
    return {
        "median_ms": timing.median * 1e3,
        "min_ms": timing.min * 1e3,
        "max_ms": timing.max * 1e3,
        "samples_ms": [s * 1e3 for s in timing.samples],
        "repeats": len(timing.samples),
        "steps_per_repeat": timing.steps_per_repeat,
        **rates,
        "pct_copy": 100.0 * rates["teff_gbps"] / copy_gbps if copy_gbps else None,
    }


def measure_impl(
    case: Case, impl: Impl, ref: dict | None, opts: BenchOptions, copy_gbps: float, backend: str
) -> tuple[dict, dict | None]:
    """One row: build, check, time. Returns the row and the implementation's state after two steps
    (None where it was not taken: a failure, or a pass of more than two steps)."""
    row, runner, after_two = _checked(case, impl, ref, backend)
    try:
        if runner is not None:
            _timed(row, case, functools.partial(time_runner, runner, opts.measure), copy_gbps)
        return row, after_two if row["status"] == "ok" else None
    finally:
        runner = None  # its arrays go before the next implementation's are made
        _release()


def _timed(row: dict, case: Case, timing: Callable, copy_gbps: float) -> None:
    """The row's times from `timing()`; a runner that crashes is a failed row, not the end of the run."""
    try:
        row.update(_metrics(case, timing(), copy_gbps))
        row["status"] = "ok"
    except Exception as exc:
        row.update(status="failed", note=f"{type(exc).__name__}: {_first_line(exc)}")


def _checked(case: Case, impl: Impl, ref: dict | None, backend: str):
    """(row, runner, state after two steps): the implementation built and checked against the oracle and
    `ref`, its runner ready to time; or the row saying why not (skipped, failed, wrong) and no runner."""
    row = _row(case, impl)
    tol = TOLERANCE[case.workload.dtype]
    try:
        runner = impl.make(case)
        if impl.kind == "ours" and backend == "cuda":
            row["resolved_strategy"], row["tile"] = getattr(runner, "resolved", None) or (runner.kernel.strategy, tuple(runner.kernel.tile))
    except (Unsupported, StencilforgeError) as exc:
        row.update(status="skipped", note=str(exc))
        return row, None, None
    except Exception as exc:  # e.g. a peer library failing to import or compile
        row.update(status="failed", note=f"{type(exc).__name__}: {_first_line(exc)}")
        return row, None, None
    try:
        per_pass = getattr(runner, "steps_per_pass", 1)
        after_two: dict | None
        if per_pass > 1:  # checked against the oracle over one pass; against the other rows (two steps) where a pass is two
            runner.run(per_pass)
            after = runner.latest()
            oracle = oracle_error_fused(case, after, per_pass)
            after_two = after if per_pass == 2 else None
        else:
            runner.run(1)
            oracle = oracle_error(case, runner.latest())
            runner.run(1)
            after_two = runner.latest()
        versus = reference_error(ref, after_two) if after_two is not None else None
    except Exception as exc:  # a peer (or one of our strategies) that crashes is a row, not the end of the run
        row.update(status="failed", note=f"{type(exc).__name__}: {_first_line(exc)}")
        return row, None, None
    row["check"] = {"oracle_error": oracle, "reference_error": versus, "tolerance": tol}
    if oracle > tol or (versus is not None and versus > tol):
        what = "the NumPy oracle" if oracle > tol else "stencilforge's result"
        worst = oracle if oracle > tol else versus
        row.update(status="wrong", note=f"disagrees with {what} (relative error {worst:.2e} > {tol:g}); not timed")
        return row, None, None
    if ref is None and impl.kind == "peer":
        row["note"] = "no correct stencilforge result to compare with; checked against the oracle only"
    return row, runner, after_two


def _announce(say, case: Case, impl: Impl) -> None:
    say(f"{case.workload.label}: {impl.name}" + (f" ({impl.strategy})" if impl.strategy else ""))


def _measure_one_at_a_time(case: Case, impls: list[Impl], opts: BenchOptions, copy_gbps: float, backend: str, say) -> list[dict]:
    """Each implementation built, checked and timed before the next is made: on a GPU, a 16384^2 workload
    and its peers' arrays would not fit together."""
    ref, rows = None, []
    for impl in impls:
        _announce(say, case, impl)
        row, after_two = measure_impl(case, impl, ref, opts, copy_gbps, backend)
        if ref is None and impl.kind == "ours" and row["status"] == "ok":
            ref = after_two
        rows.append(row)
    return rows


def _measure_interleaved(case: Case, impls: list[Impl], opts: BenchOptions, copy_gbps: float, backend: str, say) -> list[dict]:
    """Every implementation built and checked first, then timed in rounds that visit each once (`time_runners`),
    so a shared machine's drift in speed falls on all rows alike; a crash while timing falls back to timing
    each row alone."""
    ref, rows, ready = None, [], []
    for impl in impls:
        _announce(say, case, impl)
        row, runner, after_two = _checked(case, impl, ref, backend)
        if runner is not None and ref is None and impl.kind == "ours":
            ref = after_two
        rows.append(row)
        if runner is not None:
            ready.append((row, runner))
    try:
        timings = time_runners([runner for _, runner in ready], opts.measure)
        for (row, _), timing in zip(ready, timings):
            _timed(row, case, lambda timing=timing: timing, copy_gbps)
    except Exception:
        for row, runner in ready:
            _timed(row, case, functools.partial(time_runner, runner, opts.measure), copy_gbps)
    del ready
    _release()
    return rows


def _finish_workload(rows: list[dict]) -> None:
    """Ratios measured in this run: each row's time over our best time for the workload."""
    ours = [r["median_ms"] for r in rows if r["kind"] == "ours" and r["status"] == "ok"]
    best = min(ours) if ours else None
    for r in rows:
        r["time_vs_best_ours"] = r["median_ms"] / best if best and r["status"] == "ok" else None


def run_bench(opts: BenchOptions) -> dict:
    say = opts.progress or (lambda msg: None)
    engine = get_backend(opts.backend)
    gpu = engine.name == "cuda"
    device = gpu_device() if gpu else cpu_device()
    say(f"device: {device['name']}; measuring copy bandwidth")
    copy_bytes = opts.copy_bytes or (2**30 if gpu else 2**28)
    copy = (gpu_copy_bandwidth if gpu else cpu_copy_bandwidth)(copy_bytes, opts.measure)
    dtypes = sorted({w.dtype for w in opts.workloads} | {"float32"})
    peak = {dt: (gpu_peak_gflops if gpu else cpu_peak_gflops)(dt, opts.measure) for dt in dtypes}
    say(f"copy {copy['gbps']:.1f} GB/s ({copy['method']}); compute peak " + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peak.items()))
    results, workloads = [], []
    peers = _peer_impls(opts, gpu)
    for w in opts.workloads:
        case = build_case(w, opts.seed)
        cache = device.get("cache_bytes")
        workloads.append({
            "workload": w.name, "label": w.label, "problem": case.problem, "shape": list(w.shape), "dtype": w.dtype,
            "cells": case.cells, "bytes_per_cell": case.bytes_per_cell, "flops_per_cell": case.flops_per_cell,
            "arithmetic_intensity": case.flops_per_cell / case.bytes_per_cell, "footprint_bytes": case.footprint_bytes,
            "cache_ratio": case.footprint_bytes / cache if cache else None, "params": case.params,
        })
        measure = _measure_one_at_a_time if gpu else _measure_interleaved
        rows = measure(case, _ours(case, opts, engine.name) + peers, opts, copy["gbps"], engine.name, say)
        for row in rows:
            row.update(cells=case.cells, bytes_per_cell=case.bytes_per_cell, flops_per_cell=case.flops_per_cell,
                       arithmetic_intensity=case.flops_per_cell / case.bytes_per_cell)
        _finish_workload(rows)
        results.extend(rows)
        del case
        _release()
    loops = loop_rows(opts.loops, engine.name, opts.measure.repeats, opts.measure.target_s, say)
    starts = cold_start_rows(opts.cold_start, engine.name, say, opts.cold_start_without, opts.cold_start_repeats)
    chosen = opts.peers if opts.peers is not None else (DEFAULT_GPU if gpu else DEFAULT_CPU)
    projections = projection_rows(opts.projection, engine.name, chosen, opts.measure.repeats, say)
    smalls = small_rows(opts.small, engine.name, chosen, opts.measure.repeats, say)
    return {
        "schema": SCHEMA,
        "date": now_iso(),
        "git": git_commit(),
        "device": device,
        "versions": versions(),
        "backend": engine.name,
        "options": {
            "repeats": opts.measure.repeats, "target_s": opts.measure.target_s, "seed": opts.seed,
            "strategies": list(opts.strategies) if opts.strategies else None,
            "peers": [p.name for p in peers],
            "timer": (
                "CUDA events around each batch (JAX peers: wall clock around block_until_ready); our backend's"
                " per-launch kernel clock is off, as in the API (the time loop turns it on for kernel_s)"
            )
            if gpu
            else "time.perf_counter",
            "tolerance": TOLERANCE,
        },
        "ceilings": {"copy": copy, "peak_gflops": peak, "peak_method": "FMA-chain kernel" if gpu else "BLAS matmul 1024^3"},
        "workloads": workloads,
        "results": results,
        "time_loop": loops,
        "cold_start": starts,
        "projection": projections,
        "small": smalls,
    }
