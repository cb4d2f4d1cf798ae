"""The one time loop every backend uses: boundaries, sweep, sources, swap, checks, observers.

Time is always t0 + n * dt with n the global step number, so a run resumed at
step n reproduces the uninterrupted run bit for bit.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Protocol

import numpy as np

from .errors import StencilforgeError
from .grid import row_pitch
from .metrics import error_norms, throughput
from .problems import Setup

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, "float | None"], None]


class Observer(Protocol):
    """Called after every `every`-th global step and once more with the final state (snapshots,
    checkpoints), so the last step is never lost; `every` None: the final state only. Closed when the loop ends."""

    every: int | None

    def __call__(self, step: int, t: float, fields: dict, backend) -> None: ...

    def close(self) -> None: ...


class Domain(Protocol):
    """This process's block of a decomposed run (stencilforge.distributed.MPIDomain).

    Halo exchanges live in the backend the domain wraps; the loop only needs
    the faces where boundary conditions apply and global forms of its checks.
    """

    faces: tuple
    global_shape: tuple[int, ...]

    def all(self, flag: bool) -> bool: ...

    def error_norms(self, numeric, exact) -> dict: ...

    def summary(self, wall: float) -> dict: ...


class StopRequest:
    """Set from a signal handler; the loop finishes its current step, writes the final outputs and stops."""

    def __init__(self):
        self.signum: int | None = None

    def set(self, signum: int) -> None:
        self.signum = signum

    def is_set(self) -> bool:
        return self.signum is not None


@dataclass(frozen=True)
class LoopOptions:
    steps: int | None = None
    tol: float | None = None
    check_every: int = 100
    progress: ProgressFn | None = None
    progress_interval_s: float = 0.1
    observers: tuple = ()
    start_step: int = 0
    domain: Domain | None = None
    fuse_steps: bool = True  # two steps per pass where the backend offers it (cuda with auto, numba) and nothing looks between
    stop: StopRequest | None = None
    status: Callable[[str | None], None] | None = None  # a phase before stepping starts (JIT compile); None when it ends
    stall_checks: int = 20  # with tol: stop when the residual has not reached a new minimum in this many checks (0: never)


@dataclass
class Result:
    """Final fields (interior views, in the backend's array type) and a summary dict."""

    fields: dict
    summary: dict = field(default_factory=dict)


def _validate(setup: Setup, opts: LoopOptions) -> int:
    if opts.steps is not None and (not isinstance(opts.steps, (int, np.integer)) or opts.steps < 0):
        raise StencilforgeError(f"steps must be a non-negative integer, got {opts.steps}")
    if opts.tol is not None:
        if setup.residual is None:
            raise StencilforgeError(f"{setup.name} has no residual: --tol applies to poisson2d only")
        if not opts.tol > 0 or not math.isfinite(opts.tol):
            raise StencilforgeError(f"tol must be a positive number, got {opts.tol}")
    if opts.check_every < 1:
        raise StencilforgeError("check_every must be at least 1")
    if opts.stall_checks < 0:
        raise StencilforgeError(f"stall_checks must be 0 (off) or more, got {opts.stall_checks}")
    return int(opts.steps) if opts.steps is not None else setup.default_steps


def close_observers(observers) -> None:
    """Close every observer, even after one fails; then raise the first failure."""
    failure = None
    for obs in observers:
        try:
            obs.close()
        except Exception as exc:  # each observer's own error type; all must still be closed
            failure = failure or exc
    if failure is not None:
        raise failure


def _step_function(setup: Setup, backend):
    if setup.sweep is not None:
        return backend.sweep(setup.sweep, setup.grid)
    apply = backend.axis_operator(setup.operator, setup.grid.dtype, setup.grid.shape)
    names = [setup.operator.inp] + [d.out for d in setup.operator.outputs]

    def step(f):
        apply(*(f[n] for n in names))

    return step


def _pair_function(setup: Setup, backend, opts: LoopOptions, dynamic: list):
    """The backend's two-steps-in-one-pass sweep, where it gives the same fields as two steps.

    The pair takes the middle state's ghost cells from the output buffer's,
    so the walls must be known ahead: static, or Dirichlet values that do not
    read the field (the loop fills the output's ghosts with the next step's
    walls first). It also needs no sources, one process, and a sweep that
    composes with its swap (Sweep.composes_with). After a pair the
    swapped-out buffer holds the state two steps back, not one; so the loop
    lands on every checked or observed step, and on the last, with a single
    step, and whatever a check, an observer, a checkpoint or the result sees
    is what single steps give.
    """
    sweep = setup.sweep
    if not opts.fuse_steps or opts.domain is not None or setup.sources or not hasattr(backend, "sweep_pair"):
        log.info("%s: one step per pass: %s", setup.name, "single steps were asked for" if not opts.fuse_steps else
                 "the run is decomposed" if opts.domain is not None else "it has sources" if setup.sources else
                 f"the {backend.name} backend has no two-step kernels")
        return None
    if sweep is None or not sweep.composes_with(setup.swap):
        log.info("%s: one step per pass: its step is not one sweep between the two levels of one field", setup.name)
        return None
    if any(name not in setup.swap or setup.boundaries[name].reads_interior for name, _ in dynamic):
        log.info("%s: one step per pass: a wall that changes in time reads the field", setup.name)
        return None
    pair = backend.sweep_pair(sweep, setup.grid)
    if pair is not None:  # a backend that has no pair for this sweep says why
        log.info("%s: two steps per pass", setup.name)
    return pair


def run(setup: Setup, backend, opts: LoopOptions = LoopOptions()) -> Result:
    """Run the loop; the observers are closed however it ends (their queued writes finish first)."""
    try:
        return _run(setup, backend, opts)
    finally:
        close_observers(opts.observers)


def _run(setup: Setup, backend, opts: LoopOptions) -> Result:
    if opts.steps is None and opts.tol is None and setup.default_tol is not None:
        opts = replace(opts, tol=setup.default_tol)
    steps = _validate(setup, opts)
    xp = backend.xp
    grid = setup.grid
    if hasattr(backend, "check_fits"):
        backend.check_fits(sum(arr.nbytes for arr in setup.fields.values()))
    if setup.sweep is not None:  # sweeps take ghosted fields in the backend's layout; axis operators dense arrays
        fields = {name: backend.field(arr, grid.ghost) for name, arr in setup.fields.items()}
    else:
        fields = {name: backend.asarray(arr) for name, arr in setup.fields.items()}
    # the loop steps its own arrays: a Setup run twice starts from the same state
    fields = {name: arr.copy() if arr is setup.fields[name] else arr for name, arr in fields.items()}
    first = opts.start_step
    domain = opts.domain

    def time_at(n: int) -> float:
        return setup.t0 + n * setup.dt

    dynamic = []
    for name, bc in setup.boundaries.items():
        fill = bc.bind(grid, xp, domain.faces if domain is not None else None, row_pitch(fields[name]))
        if bc.static:
            for target in {name, *(setup.swap or ())} & set(fields):
                fill(fields[target], time_at(first))
        else:
            dynamic.append((name, fill))

    if opts.status is not None:
        opts.status("compiling kernels (first run only)")
    compile_start = time.perf_counter()
    step = _step_function(setup, backend)  # JIT backends compile here, before the clock starts
    pair = _pair_function(setup, backend, opts, dynamic)
    residual_fn = backend.sum_squares(setup.residual, grid) if setup.residual is not None else None
    compile_s = time.perf_counter() - compile_start
    if opts.status is not None:
        opts.status(None)

    readers = [(name, fill) for name, fill in dynamic if setup.boundaries[name].reads_interior]

    def relative_residual(m: int) -> float:
        """At step m, with walls that copy the interior (Neumann, periodic) refilled first: the
        ghosts hold the previous iterate's images until the next step fills them."""
        for name, fill in readers:
            fill(fields[name], time_at(m))
        return math.sqrt(residual_fn(fields)) / setup.rhs_norm

    def locally_finite() -> bool:
        return bool(xp.isfinite(fields[setup.solution]).all())

    def check_finite(n: int, last_ok: int) -> None:
        finite = locally_finite()
        if not (finite if domain is None else domain.all(finite)):
            raise StencilforgeError(
                f"{setup.name} blew up: NaN or Inf found at step {n} (finite at step {last_ok}); "
                "reduce dt or check the inputs"
            )

    def checked(m: int) -> bool:
        return (m - first) % opts.check_every == 0

    def eventful(m: int) -> bool:
        """Whether anything looks at the fields after step m (a check or an observer)."""
        return checked(m) or any(obs.every and m % obs.every == 0 for obs in opts.observers)

    def stop_requested(m: int) -> bool:
        """A signal arrived: alone, at once; decomposed, at the next check, on every rank together."""
        if opts.stop is None:
            return False
        if domain is None:
            return opts.stop.is_set()
        return checked(m) and not domain.all(not opts.stop.is_set())

    residual = None
    residual_at = None
    stop = "steps"
    recent: list[float] = []  # the last stall_checks residuals
    best_before = math.inf  # the lowest residual before them
    fused = 0
    n = first
    last_ok = first
    last_report = time.perf_counter()
    kernel_start = backend.kernel_seconds() if hasattr(backend, "kernel_seconds") else None
    # The first step's walls and the NaN test run once before the clock starts: both leave the fields
    # as they are, and on a GPU their first call loads the array library's kernels (a fresh process on
    # an H100 lost about 0.4 s of wall time to first calls), which is set-up, not stepping. The test's
    # answer is not needed yet.
    for name, fill in dynamic:
        fill(fields[name], time_at(first))
    locally_finite()
    backend.synchronize()
    start = time.perf_counter()
    if opts.progress is not None:
        opts.progress(0, steps, None)  # stepping starts now: rates count from here
    partner = dict(zip(setup.swap, reversed(setup.swap))) if setup.swap is not None else {}
    after_pair = False
    while n < first + steps:
        fuse = pair is not None and n + 2 < first + steps and not (eventful(n + 1) or eventful(n + 2))
        t = time_at(n)
        for name, fill in dynamic:
            fill(fields[name], t)
            if fuse:  # the middle state's walls, read from the output buffer's ghost cells
                fill(fields[partner[name]], time_at(n + 1))
            elif after_pair:  # the buffer this step writes: single steps would have left step n - 1's walls in it
                fill(fields[partner[name]], time_at(n - 1))
        after_pair = fuse
        if fuse:
            pair(fields)
            fused += 2
            n += 2
        else:
            step(fields)
            for src in setup.sources:
                fields[src.field][src.index] += src.scale * src.wavelet(t)
            n += 1
        if setup.swap is not None:
            a, b = setup.swap
            fields[a], fields[b] = fields[b], fields[a]
        if checked(n):
            check_finite(n, last_ok)
            last_ok = n
            if opts.tol is not None:
                residual, residual_at = relative_residual(n), n
                if opts.stall_checks:
                    recent.append(residual)
                    if len(recent) > opts.stall_checks:
                        best_before = min(best_before, recent.pop(0))
        for obs in opts.observers:
            if obs.every and n % obs.every == 0:
                obs(n, time_at(n), fields, backend)
        if residual_at == n and residual < opts.tol:
            stop = "converged"
            break
        if residual_at == n and recent and len(recent) == opts.stall_checks and not min(recent) < best_before:
            stop = "stalled"
            break
        if stop_requested(n):
            stop = "signal"
            break
        if opts.progress is not None:
            now = time.perf_counter()
            if now - last_report >= opts.progress_interval_s:
                last_report = now
                opts.progress(n - first, steps, residual)
    backend.synchronize()
    wall = time.perf_counter() - start
    if n != last_ok:
        check_finite(n, last_ok)
    done = n - first
    converged = None
    if residual_fn is not None:
        if residual_at != n:
            residual = relative_residual(n)
        converged = bool(opts.tol is not None and residual < opts.tol)
    if opts.progress is not None:
        opts.progress(done, steps, residual)
    for obs in opts.observers:  # the final state, unless the loop just wrote it
        if n > first and not (obs.every and n % obs.every == 0):
            obs(n, time_at(n), fields, backend)

    out = {name: arr[grid.interior] for name, arr in fields.items()}
    shape = grid.shape if domain is None else domain.global_shape
    summary = {
        "problem": setup.name,
        "backend": backend.name,
        "shape": list(shape),
        "dtype": grid.dtype.name,
        "steps": done,
        "step": n,
        "t": time_at(n),
        "wall_s": wall,
        "compile_s": compile_s,
        "bytes_per_cell": setup.bytes_per_cell,
        **throughput(math.prod(shape), done, wall, setup.bytes_per_cell, setup.flops_per_cell),
        "params": setup.params,
        "stop": stop,
    }
    if stop == "signal":
        summary["signal"] = opts.stop.signum
    if domain is not None:
        summary.update(domain.summary(wall))
    if kernel_start is not None:
        summary["kernel_s"] = backend.kernel_seconds() - kernel_start
    if getattr(backend, "strategy", None) is not None:
        summary["strategy"] = backend.strategy
    if pair is not None:
        summary["fused_steps"] = fused
    if setup.residual is not None:
        summary.update(residual=residual, converged=converged, iterations=done, tol=opts.tol)
    if setup.exact is not None:
        exact = setup.exact(time_at(n))
        if domain is not None:
            per_field = {name: domain.error_norms(backend.to_host(out[name]), ref) for name, ref in exact.items()}
        else:  # reduced where the exact solution was evaluated: on the device for problems built there
            per_field = {name: error_norms(backend.to_host(out[name]), ref) if isinstance(ref, np.ndarray)
                         else error_norms(out[name], ref, xp) for name, ref in exact.items()}
        summary["error"] = {
            "max_abs": max(e["max_abs"] for e in per_field.values()),
            "rel_l2": max(e["rel_l2"] for e in per_field.values()),
        }
        if len(per_field) > 1:
            summary["error"]["fields"] = per_field
    return Result(out, summary)
