"""The one time loop every problem and backend uses: stepping, checks, progress, observers, stop requests.

Time is always t0 + n * dt with n the global step number, so a run resumed at
step n reproduces the uninterrupted run bit for bit.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol

import numpy as np

from .errors import BlowUp, StencilforgeError
from .optional import require
from .points import Traces
from .resources import available_bytes
from .version import __version__

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, "float | None", str], None]  # (done, total, residual, the solves' note: `Stepper.note`)


class Observer(Protocol):
    """Called after every `every`-th global step and once more with the final state (snapshots,
    checkpoints), so the last step is never lost; `every` None: the final state only. Closed when the loop ends."""

    every: int | None

    def __call__(self, step: int, t: float, fields: dict, backend) -> None: ...

    def close(self) -> None: ...


class Until(Protocol):
    """A stop rule bound to the stepper's state (`rules.RuleCheck`), evaluated at every check; `text` names it."""

    text: str

    def __call__(self) -> tuple[bool, float | None, float | None]:
        """(whether it holds, its left side's value, its right side's) after the step just taken."""


class StopRequest:
    """Set from a signal handler; the loop finishes its current step, writes the final outputs and stops."""

    def __init__(self):
        self.signum: int | None = None

    def set(self, signum: int) -> None:
        self.signum = signum

    def is_set(self) -> bool:
        return self.signum is not None


@contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """SIGINT and SIGTERM ask the loop to stop after the current step; a second one acts as usual.
    Off the main thread, where Python delivers no signals, the request is never set."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum, frame):
        request.set(signum)
        for sig, action in previous.items():
            signal.signal(sig, action)

    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield request
    finally:
        for sig, action in previous.items():
            signal.signal(sig, action)


def where_saved(summary: Mapping) -> str:
    """Where a run's final state went, for the line that says why it ended early."""
    files = summary.get("outputs", {})
    parts = []
    if "snapshots" in files:
        parts.append(f"{files['snapshots']['count']} snapshot(s) in {files['snapshots']['path']}")
    if "checkpoint" in files:
        parts.append(f"checkpoint at step {files['checkpoint']['step']} in {files['checkpoint']['path']}")
    return "; ".join(parts) if parts else "no outputs were asked for"


def stopped_line(summary: Mapping) -> str:
    """The one line a run stopped by a signal ends with."""
    return f"stopped by {signal.Signals(summary['signal']).name} at step {summary['step']}; {where_saved(summary)}"


def missed_line(summary: Mapping) -> str:
    """The one line a run stopped by a missed solve (strict solves) ends with."""
    m = summary["missed"]
    return (f"{m['what']}: the relative residual {m['residual']:.3e} after {m['cycles']} cycles at step {m['step']} {m['why']}; "
            f"the run stopped after it (strict solves); {where_saved(summary)}")


@dataclass(frozen=True)
class LoopOptions:
    steps: int | None = None
    tol: float | None = None
    check_every: int = 100
    progress: ProgressFn | None = None
    progress_interval_s: float = 0.1
    observers: tuple = ()
    start_step: int = 0
    fuse_steps: bool = True  # several steps per pass where the backend offers it (cuda with auto, numba) and nothing looks between
    stop: StopRequest | None = None
    status: Callable[[str | None], None] | None = None  # a phase before stepping starts (JIT compile); None when it ends
    stall_checks: int = 20  # with tol: stop when the residual has not reached a new minimum in this many checks (0: never)
    keep_finite: bool = False  # copy the watched fields at each check that finds them finite, for BlowUp.finite_fields (sf.run's)
    until: Until | None = None  # stop at the first check where it holds (sf.run's until=)
    strict_solves: bool = False  # stop after the first step whose solve missed its tolerance (else it is counted)


@dataclass
class Result:
    """What every run returns (`sf.run`, `sf.solve`, the CLI): the final fields by name (interior views, in
    the backend's array type; under MPI whole on rank 0 and None elsewhere) and a summary dict.

    Every summary has `problem`, `backend`, `shape`, `dtype`, `steps` (taken by this run), `step` and `t`
    (where it ended), `wall_s`, `gcells_per_s`, `teff_gbps`, `params`, `stop` (why it ended: "steps",
    "converged", "stalled", "until", "signal", with `signal` its number, or "solve": a solve missed its tolerance
    with strict solves, `missed` saying which, where and why) and `errors` (field -> largest absolute
    error against the exact solution; empty without one). A run with a residual adds `residual`,
    `converged`, `iterations` and `tol`; one with a stop rule, `until` (the rule, its sides' values and whether it
    held at the last check, and that check's step); one that wrote files, `outputs`; a decomposed one, `procs` and
    `ranks`. A multigrid solve counts its cycles as steps (`cycles`) and has no `t`. `coords`: each axis's point
    coordinates by name (x the last axis), where the run knows its grid. `traces`: what the problem's receivers
    recorded (`sf.Traces`; under MPI on rank 0), None without receivers; a run with a snapshot file writes them there too.
    """

    fields: dict
    summary: dict = field(default_factory=dict)
    coords: dict = field(default_factory=dict)
    traces: Traces | None = None

    def to_xarray(self):
        """The final fields as an xarray Dataset on their coordinates (dimensions in array order, x last; host
        arrays), with the problem, time, step, parameters and version as attributes; with traces, `traces` on
        (trace_time, receiver), with `trace_step` and each receiver's `receiver_field` and `receiver_x`, ... as
        coordinates, as a NetCDF snapshot file names them. Needs xarray."""
        from .interop import to_module
        from .io.netcdf import RECEIVER, TRACE_TIME, receiver_coords

        xr = require("xarray", "Result.to_xarray")
        dims = tuple(self.coords)
        data = {name: (dims, to_module(arr, np)) for name, arr in self.fields.items() if arr is not None}
        coords = {name: (name, values) for name, values in self.coords.items()}
        if self.traces is not None:
            tr = self.traces
            data["traces"] = ((TRACE_TIME, RECEIVER), tr.values)
            coords.update({TRACE_TIME: (TRACE_TIME, tr.times), "trace_step": (TRACE_TIME, tr.steps), **receiver_coords(tr.fields, tr.at)})
        s = self.summary
        attrs = {"problem": s.get("problem", ""), "step": s.get("step", 0), "stencilforge_version": __version__,
                 **({"t": s["t"]} if "t" in s else {}),
                 **{f"param_{k}": v for k, v in s.get("params", {}).items() if isinstance(v, (int, float, str))}}
        return xr.Dataset(data, coords=coords, attrs=attrs)


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


def never_fuses(opts: LoopOptions, default_steps: int) -> str | None:
    """Why the loop would never take a fused pass (it fuses steps n + 1 and n + 2 at least, only where
    nothing looks at either and n + 2 is not the last), or None: then a stepper need not build one."""
    if not opts.fuse_steps:
        return "single steps were asked for"
    steps = opts.steps if opts.steps is not None else default_steps
    if steps < 3:
        return f"a run of {steps} step{'s' if steps != 1 else ''}"
    if opts.check_every < 3 or any(obs.every and obs.every < 3 for obs in opts.observers):
        return "the state is looked at every step or every other step"
    return None


def fusion_window(opts: LoopOptions) -> int:
    """The most steps one pass may take and still fall between two of the loop's looks at the state (its checks and
    its observers): one less than the shortest interval between them."""
    return min([opts.check_every, *(obs.every for obs in opts.observers if obs.every)]) - 1


class Stepper(Protocol):
    """What the loop advances (`simulation.PassStepper`: a problem's passes, solves and one-sided derivatives).
    Steps are numbered globally from `first`."""

    name: str
    backend: object  # what observers are handed
    first: int
    decomposed: bool  # several processes: stop requests are agreed at checks
    default_steps: int
    has_residual: bool
    watched: tuple[str, ...]  # the fields `finite` tests (what a step changes), which BlowUp.finite_fields keeps

    @property
    def per_pass(self) -> int:
        """Steps the next fused pass would advance: 1 where the stepper has none, or while its kernel is still
        compiling in the background (the loop takes single steps until then)."""

    @property
    def whole_after_pass(self) -> bool:
        """Whether a fused pass leaves every time level as single steps leave it (a graph of single steps), so that
        the run may look at the state, or end, right after one; a fused kernel leaves an older state behind."""

    def compile(self) -> None:
        """Build the kernels (JIT backends compile here, before the clock starts)."""

    def warm(self) -> None:
        """Run once what the first step's set-up runs (walls, the finite test) without changing the fields."""

    def advance(self, n: int, fuse: bool) -> int:
        """Step from global step n; where `fuse` (nothing looks at n + 1 .. n + per_pass, or before its last step where
        `whole_after_pass`) it takes a fused pass. Returns the count."""

    def state(self) -> dict:
        """The arrays observers copy from (ghost layers included)."""

    def time_at(self, n: int) -> float: ...

    def finite(self) -> bool:
        """Whether the watched fields hold no NaN or Inf, on every process."""

    def nonfinite(self) -> dict[str, str]:
        """After `finite` said no: on this process, each watched field holding NaN or Inf -> "interior", "walls"
        (its Dirichlet walls' values) or "interior and walls"."""

    def agree(self, flag: bool) -> bool:
        """`flag` on every process (one process: `flag`)."""

    def residual(self, n: int) -> float:
        """The relative residual of the state at step n."""

    def missed(self):
        """The run's first solve that missed its tolerance (`solvers.stepped.Miss`), or None; the same on every process."""

    def note(self, n: int) -> str:
        """For the progress line at step n: the solves' cycles per step since the last note ('' without solves)."""

    def fields(self) -> dict:
        """The final fields, interior only, in the backend's array type."""

    def report(self, n: int, wall: float) -> dict:
        """The stepper's own summary keys at step n (errors against an exact solution, kernel choices)."""


def _validate(stepper: Stepper, opts: LoopOptions) -> int:
    if opts.steps is not None and (not isinstance(opts.steps, (int, np.integer)) or opts.steps < 0):
        raise StencilforgeError(f"steps must be a non-negative integer, got {opts.steps}")
    if opts.tol is not None:
        if not stepper.has_residual:
            raise StencilforgeError(f"{stepper.name} has no residual: --tol applies to poisson2d only")
        if not opts.tol > 0 or not math.isfinite(opts.tol):
            raise StencilforgeError(f"tol must be a positive number, got {opts.tol}")
    if opts.check_every < 1:
        raise StencilforgeError("check_every must be at least 1")
    if opts.stall_checks < 0:
        raise StencilforgeError(f"stall_checks must be 0 (off) or more, got {opts.stall_checks}")
    return int(opts.steps) if opts.steps is not None else stepper.default_steps


class Monitor:
    """What looks at the state between steps: finite and residual checks (with the stall test),
    observers, stop requests and progress. `after(n)` says why the loop must stop, if it must.

    With `keep_finite` it keeps a copy of the watched fields as the last check that found them finite saw
    them (at the start, the initial state where it is finite), where the backend computes: a blow-up then hands
    the state just before it to the caller, at the cost of one more array per watched field and a copy per check.
    """

    def __init__(self, stepper: Stepper, opts: LoopOptions, steps: int):
        self.stepper, self.opts, self.steps = stepper, opts, steps
        self.first = stepper.first
        self.last_ok = self.first
        self.residual: float | None = None
        self.residual_at: int | None = None
        self.recent: list[float] = []  # the last stall_checks residuals
        self.best_before = math.inf  # the lowest residual before them
        self.until = None if opts.until is None else until_entry(opts.until.text, False, None, None, None)
        self.last_report = time.perf_counter()
        self.kept = self._keeper() if opts.keep_finite else None
        self.kept_at: int | None = None  # the step whose watched fields `kept` holds
        if opts.keep_finite and stepper.finite():  # the loop takes the initial state as finite; only a finite one is kept
            self._finite_at(self.first)

    def _watched(self) -> dict:
        fields = self.stepper.fields()
        return {name: fields[name] for name in self.stepper.watched}

    def _keeper(self) -> dict | None:
        """Arrays for the last finite state, where they take at most half the memory available (on a device, its
        own): they only help after a failure, so they leave room for what the run allocates later (its output
        buffers), and a host that runs out of memory may kill the process rather than fail the allocation. Else
        None, and the log says why."""
        backend: Any = self.stepper.backend
        fields = self._watched()
        need = sum(arr.nbytes for arr in fields.values())
        try:
            if backend.device:
                backend.check_fits(2 * need)
            else:
                free = available_bytes()
                if free is not None and need > free // 2:
                    raise StencilforgeError(f"{free / 1e9:.2f} GB available")
            return {name: backend.xp.empty_like(arr) for name, arr in fields.items()}
        except (StencilforgeError, MemoryError) as exc:  # a device backend checks its pool; a host runs out
            log.info("%s: the last finite state (%.2f GB) is not kept: it would take more than half the memory available (%s)",
                     self.stepper.name, need / 1e9, exc)
            return None

    def _finite_at(self, n: int, keep: bool = True) -> None:
        """Step n's state was found finite: it is the last finite one (with `keep`, copied where it is kept)."""
        self.last_ok = n
        if keep and self.kept is not None:
            fields = self._watched()
            for name, arr in self.kept.items():
                arr[...] = fields[name]
            self.kept_at = n

    def checked(self, m: int) -> bool:
        return (m - self.first) % self.opts.check_every == 0

    def eventful(self, m: int) -> bool:
        """Whether anything looks at the fields after step m (a check or an observer)."""
        return self.checked(m) or any(obs.every and m % obs.every == 0 for obs in self.opts.observers)

    def check_finite(self, n: int, keep: bool = True) -> None:
        """Raise BlowUp if step n's fields hold NaN or Inf; `keep`: copy them where they are kept (a later
        step may still blow up)."""
        stepper = self.stepper
        if stepper.finite():
            self._finite_at(n, keep)
            return
        where = {} if stepper.decomposed else stepper.nonfinite()
        walls = sorted(name for name, part in where.items() if "walls" in part)
        if walls:
            hint = f"the Dirichlet wall values of {', '.join(walls)} are NaN or Inf: check them"
        else:
            hint = "reduce dt or check the inputs"
        found = f" in {', '.join(f'{name} ({part})' for name, part in sorted(where.items()))}" if where else ""
        backend: Any = stepper.backend
        fields = {name: backend.to_host(arr) for name, arr in stepper.fields().items()}
        kept = ({name: backend.to_host(arr) for name, arr in self.kept.items()}
                if self.kept is not None and self.kept_at == self.last_ok else None)
        held = ", whose state the exception's finite_fields hold" if kept is not None else ""
        raise BlowUp(f"{stepper.name} blew up: NaN or Inf found at step {n}{found} (finite at step {self.last_ok}, "
                     f"the last check{held}); {hint}", n, self.last_ok, fields, kept)

    def _stop_requested(self, m: int) -> bool:
        """A signal arrived: alone, at once; decomposed, at the next check, on every process together."""
        stop = self.opts.stop
        if stop is None:
            return False
        return stop.is_set() if not self.stepper.decomposed else (self.checked(m) and not self.stepper.agree(not stop.is_set()))

    def after(self, n: int) -> str | None:
        """Checks and observers after step n; the reason to stop ('solve', 'converged', 'until', 'stalled', 'signal') or None."""
        opts, stepper = self.opts, self.stepper
        if self.checked(n):
            residual = stepper.residual(n) if opts.tol is not None else None
            self.check_finite(n)
            if opts.until is not None:
                self.until = until_entry(opts.until.text, *opts.until(), n)
            if residual is not None:
                self.residual, self.residual_at = residual, n
                if opts.stall_checks:
                    self.recent.append(residual)
                    if len(self.recent) > opts.stall_checks:
                        self.best_before = min(self.best_before, self.recent.pop(0))
        observed = [obs for obs in opts.observers if obs.every and n % obs.every == 0]
        if observed and not self.checked(n):
            self.check_finite(n)  # no snapshot or checkpoint holds a NaN or an infinity
        for obs in observed:
            obs(n, stepper.time_at(n), stepper.state(), stepper.backend)
        if opts.strict_solves and stepper.missed() is not None:
            return "solve"
        if self.residual_at == n and self.residual is not None and opts.tol is not None and self.residual < opts.tol:
            return "converged"
        if self.until is not None and self.until["step"] == n and self.until["met"]:
            return "until"
        if self.residual_at == n and self.recent and len(self.recent) == opts.stall_checks and not min(self.recent) < self.best_before:
            return "stalled"
        if self._stop_requested(n):
            return "signal"
        if opts.progress is not None:
            now = time.perf_counter()
            if now - self.last_report >= opts.progress_interval_s:
                self.last_report = now
                opts.progress(n - self.first, self.steps, self.residual, stepper.note(n))
        return None

    def finish(self, n: int) -> bool | None:
        """The last checks and the final state to every observer that did not just see it; whether the run converged."""
        opts, stepper = self.opts, self.stepper
        if n != self.last_ok:
            self.check_finite(n, keep=False)  # no step follows
        converged = None
        if stepper.has_residual:
            if self.residual_at != n:
                self.residual = stepper.residual(n)
            converged = bool(opts.tol is not None and self.residual is not None and self.residual < opts.tol)
        if opts.progress is not None:
            opts.progress(n - self.first, self.steps, self.residual, stepper.note(n))
        for obs in opts.observers:
            if n > self.first and not (obs.every and n % obs.every == 0):
                obs(n, stepper.time_at(n), stepper.state(), stepper.backend)
        return converged


def until_entry(rule: str, met: bool, value: float | None, bound: float | None, step: int | None) -> dict:
    """The summary's `until`: the rule, whether it held, its two sides' values and the step of that check."""
    return {"rule": rule, "met": met, "value": value, "bound": bound, "step": step}


def summarize(stepper: Stepper, backend, opts: LoopOptions, monitor: Monitor, n: int, stop: str, wall: float,
              compile_s: float, kernel_s: float | None, converged: bool | None) -> dict:
    """The run's summary: what ran, how far, how fast, and how it ended; the same keys for every stepper."""
    done = n - stepper.first
    summary = {
        "problem": stepper.name,
        "backend": backend.name,
        "steps": done,
        "step": n,
        "t": stepper.time_at(n),
        "wall_s": wall,
        "compile_s": compile_s,
        **stepper.report(n, wall),
        "stop": stop,
    }
    if stop == "signal":
        summary["signal"] = opts.stop.signum if opts.stop is not None else None
    if stop == "solve":
        summary["missed"] = asdict(stepper.missed())
    if kernel_s is not None:
        summary["kernel_s"] = kernel_s
    if stepper.has_residual:
        summary.update(residual=monitor.residual, converged=converged, iterations=done, tol=opts.tol)
    if monitor.until is not None:
        summary["until"] = monitor.until
    return summary


def run_stepper(build: Callable[[], Stepper], backend, opts: LoopOptions) -> Result:
    """Run the loop on the stepper `build` returns; the observers are closed however it ends."""
    try:
        return _advance(build(), backend, opts)
    finally:
        close_observers(opts.observers)


def _advance(stepper: Stepper, backend, opts: LoopOptions) -> Result:
    """Step `stepper` until its steps are done, it converged or stalled, a stop was requested or (strict) a solve missed."""
    steps = _validate(stepper, opts)
    if opts.status is not None:
        opts.status("compiling kernels (first run only)")
    compile_start = time.perf_counter()
    # first calls (Numba's wall writer, the finite test) before the kernels: a kernel compiling in the
    # background holds Numba's compiler lock, and any compile on this thread would wait for it
    stepper.warm()
    stepper.compile()
    compile_s = time.perf_counter() - compile_start
    if opts.status is not None:
        opts.status(None)
    monitor = Monitor(stepper, opts, steps)
    first = stepper.first
    end = first + steps
    kernel_start = backend.kernel_seconds()
    backend.synchronize()
    start = time.perf_counter()
    if opts.progress is not None:
        opts.progress(0, steps, None, "")  # stepping starts now: rates count from here
    n, stop = first, "steps"
    while n < end:
        k = stepper.per_pass
        whole = stepper.whole_after_pass
        fuse = k > 1 and n + k <= end - (not whole) and not any(monitor.eventful(n + j) for j in range(1, k + (not whole)))
        n += stepper.advance(n, fuse)
        reason = monitor.after(n)
        if reason is not None:
            stop = reason
            break
    backend.synchronize()
    wall = time.perf_counter() - start
    converged = monitor.finish(n)
    kernel_s = backend.kernel_seconds()
    kernel_s = None if kernel_s is None else kernel_s - kernel_start
    summary = summarize(stepper, backend, opts, monitor, n, stop, wall, compile_s, kernel_s, converged)
    return Result(stepper.fields(), summary)
