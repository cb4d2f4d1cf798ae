"""Running a problem: one call that the API and the CLI share.

Every problem runs its passes (`Simulation`, or `DecomposedSimulation` for this
rank's block under MPI): a pass of one linear equation as the backend's
hand-scheduled sweep (the CUDA strategies, several steps per pass where the step
is that sweep alone in one process), any other as its generated kernel.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from contextlib import closing, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from .backends import get_backend
from .boundary import Periodic
from .distributed import bind_for
from .errors import SolveMissed, StencilforgeError
from .fingerprint import canonical
from .interop import backend_for
from .ir.stability import unstable
from .problem import Problem, switch
from .progress import LazyProgress, ProgressLines, reporter
from .resources import numba_threads
from .rules import RuleCheck, StopRule, stop_rule
from .simulation import PassStepper, Simulation
from .timeloop import (
    LoopOptions,
    ProgressFn,
    Result,
    StopRequest,
    fusion_window,
    missed_line,
    never_fuses,
    run_stepper,
    stop_on_signals,
    stopped_line,
)

if TYPE_CHECKING:
    from .jobs import Outputs

logger = logging.getLogger(__name__)


def run(
    problem: Problem,
    steps: int | None = None,
    tol: float | None = None,
    backend="auto",
    params: Mapping[str, float] | None = None,
    check_every: int = 100,
    progress: Callable[[int, int, float | None], None] | bool | None = None,
    generated: bool = False,
    out: str | None = None,
    snapshot_every: int | None = None,
    checkpoint: str | None = None,
    checkpoint_every: int | None = None,
    overwrite: bool = False,
    resume: str | None = None,
    comm=None,
    procs: Sequence[int] | None = None,
    fuse_steps: bool = True,
    stop: StopRequest | None = None,
    threads: int | None = None,
    keep_finite: bool = True,
    until=None,
    strict_solves: bool | None = None,
) -> Result:
    """Run `steps` steps (default: the problem's), or until the residual is below `tol`, or until the stop rule
    `until` holds (default: the problem's own, if it has one).

    `backend` is a name ('auto', 'numpy', 'numba', 'cuda') or a backend instance ('auto' is cuda where an
    initial value is in CUDA memory, else cuda when a GPU is usable, else numba, else numpy); `generated`
    runs every pass as its generated kernel, linear ones too (what the sweeps are checked against). Snapshots of the fields an
    equation writes go to `out` (.h5 with an .xmf for ParaView, .nc for xarray, or .npz) every `snapshot_every`
    steps and at the end, and the receivers' traces when the run ends; the whole state (every time level) goes to `checkpoint` every
    `checkpoint_every` steps and at the end (docs/outputs.md). `resume` continues from such a
    checkpoint for `steps` more steps, bit for bit, appending to `out` if the same run wrote it.
    Existing files are kept unless `overwrite`.
    With `comm` (an MPI communicator; MPI.COMM_WORLD where only `procs` is given) every rank of it
    calls `run` and steps its block, over the process grid `procs` (default: the least halo
    surface); the fields come back whole on rank 0 and as None elsewhere, the summary on every rank.
    With a backend named 'auto' or 'cuda', each rank takes a GPU of its own (`distributed.bind_device`).
    `progress=True` shows a bar where someone watches (a terminal, a Jupyter notebook) and a line every ten seconds
    on stderr where no one does (a batch job); a function progress(done, total, residual) is called instead.
    `threads` (numba): threads for this run (default: $NUMBA_NUM_THREADS, else this process's share of the cores it
    may run on), reported in the summary and given back afterwards.
    `fuse_steps=False` keeps one step per pass where the backend would take several (the fields are the
    same bits either way).
    `until` is checked every `check_every` steps, as `tol` is: a comparison of norms of the fields read as the
    step's equations read them (`p` where the step started, `p.next` what it computed), such as the CFD course's
    `sf.total(abs(p.next) - abs(p)) / sf.total(abs(p)) <= 1e-4` (`sf.norm`, `sf.total`; the same stopping step on
    any number of MPI ranks), or a function of the same levels by slot name ({"p": ..., "p_next": ...}, interior
    views) returning True to stop (one process only). The summary's `until` says what it gave at the last check.
    A run that blows up raises `errors.BlowUp`, whose `finite_fields` hold the fields its equations write at the
    last check that found them finite; `keep_finite=False` saves the copy per check that keeps them (docs/outputs.md).
    A solve inside a step (sf.Solve) that misses its tolerance within its cycles goes on from its last iterate,
    counted in the summary's `solves` and logged as one warning at the end; with `strict_solves` (default: the
    problem's) the first one stops the run after its step, the final snapshot and checkpoint written, and raises
    `errors.SolveMissed` (its step, residual and the run's `Result`).
    SIGINT and SIGTERM (from the main thread) finish the current step and write the final snapshot and
    checkpoint; then the run logs where they went and the signal takes its usual course (KeyboardInterrupt,
    or the process ends with status 143). A caller passing its own `stop` request handles signals itself
    and gets the result back, its summary saying `stop: "signal"`.
    """
    outputs = None
    if out is not None or snapshot_every is not None or checkpoint is not None or checkpoint_every is not None or resume is not None:
        from .jobs import Outputs  # HDF5 only when a run writes files

        outputs = Outputs(snapshot_every=snapshot_every, out=out, checkpoint_every=checkpoint_every, checkpoint=checkpoint,
                          resume=resume, overwrite=overwrite, api=True, command_line=f"stencilforge.run({problem.name})")
    return run_with(problem, outputs, steps=steps, tol=tol, backend=backend, params=params, check_every=check_every,
                    progress=progress, generated=generated, comm=comm, procs=procs, fuse_steps=fuse_steps, stop=stop,
                    threads=threads, keep_finite=keep_finite, until=until, strict_solves=strict_solves)


def run_with(
    problem: Problem,
    outputs: Outputs | None,
    steps: int | None = None,
    tol: float | None = None,
    backend="auto",
    params: Mapping[str, float] | None = None,
    check_every: int = 100,
    progress: Callable[[int, int, float | None], None] | bool | None = None,
    generated: bool = False,
    comm=None,
    procs: Sequence[int] | None = None,
    fuse_steps: bool = True,
    stop: StopRequest | None = None,
    threads: int | None = None,
    stall_checks: int = 20,
    status: Callable[[str | None], None] | None = None,
    halo: str = "auto",
    keep_finite: bool = False,
    until=None,
    strict_solves: bool | None = None,
) -> Result:
    """`run` with its files given as `Outputs`, not yet prepared: the CLI's, which name its options in errors
    and record its command line and problem file. The problem's equations are recorded here. `stall_checks`,
    `status`: as `LoopOptions` has them; `halo`: how a decomposed run's halos travel (`distributed.choose_transport`);
    `keep_finite`: a blow-up hands over the last finite state (`LoopOptions.keep_finite`), as sf.run asks; the CLI
    keeps none, since its process ends with the error. `until`: a stop rule in place of the problem's;
    `strict_solves`: as `run` has it (None: the problem's)."""
    if comm is None and procs is not None:
        from .distributed import world

        comm = world()
    rule = problem.until if until is None else stop_rule(until, problem.fields)
    if rule is not None and rule.function and comm is not None:
        raise StencilforgeError("until: a Python function runs in one process; under MPI write the rule with sf.norm and "
                                "sf.total, which reduce over every rank")
    bind_for(comm, backend)
    engine = get_backend(backend_for(backend, problem.initial.values(), host="auto")) if isinstance(backend, str) else backend
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0):
        raise StencilforgeError(f"steps must be a non-negative integer, got {steps!r}")
    if tol is not None and not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
        raise StencilforgeError(f"tol must be a positive number, got {tol!r}")
    if check_every < 1:
        raise StencilforgeError(f"check_every must be at least 1, got {check_every}")
    strict = problem.strict_solves if strict_solves is None else switch(strict_solves, "strict_solves")
    root = comm is None or comm.rank == 0
    total = problem.default_steps if steps is None and tol is None else steps
    if outputs is not None:  # under MPI rank 0 alone holds the files, and a refusal on any rank stops every rank
        asked = replace(outputs, equations=canonical(problem), writer=comm is None or comm.rank == 0)
        if comm is None:
            outputs = asked.prepare(problem.name)
        else:
            from .distributed.comm import agree

            outputs = agree(comm, lambda: asked.prepare(problem.name))
    lines, certain = unstable(problem, problem.values(params),
                              periodic=all(isinstance(c, Periodic) for conds in problem.boundary.values() for c in conds))
    if certain:
        raise StencilforgeError(lines[0].replace("so the run will probably blow up", "so the run would blow up"))
    if root:
        for line in lines:
            logger.warning(line)
    shown = reporter(problem.name) if progress is True and root else None
    with (nullcontext(stop) if stop is not None else stop_on_signals() as request, numba_threads(engine, threads, comm) as count,
          outputs if outputs is not None else nullcontext(), closing(shown) if shown is not None else nullcontext()):
        report = _loop_progress(shown if progress is True else progress or None)  # the output files above are this run's until it ends
        loop = dict(check_every=check_every, progress=report, fuse_steps=fuse_steps, stop=request, stall_checks=stall_checks,
                    status=status, keep_finite=keep_finite, strict_solves=strict)
        result = _run_passes(problem, engine, problem.default_steps if total is None else total, tol, params, loop,
                             outputs, comm, procs, sweeps=not generated, halo=halo, rule=rule)
        engine.settle()  # nothing of the run keeps compiling after it returns
    result.summary["threads"] = count
    if outputs is not None and outputs.params:  # what built a named problem, beside its constants, as its files record
        result.summary["params"] = {**outputs.params, **result.summary.get("params", {})}
    result.coords = {name: problem.grid.values(name) for name in problem.grid.axis_names}
    _ended(result, root, raise_signal=stop is None)
    return result


def _ended(result: Result, root: bool, raise_signal: bool) -> None:
    """How the run ended, told: a missed solve that stopped it raises SolveMissed; missed solves it went on from are
    one warning per solve (from rank 0); a signal that stopped it is logged and, with `raise_signal`, raised again."""
    s = result.summary
    if s["stop"] == "solve":
        miss = s["missed"]
        raise SolveMissed(missed_line(s), miss["what"], miss["step"], miss["residual"], result)
    for name, solves in s.get("solves", {}).items():
        if solves["missed"] and root:
            logger.warning("%s: %d of %d solves for %s missed tol %g (the first at step %d; worst relative residual %.3e); "
                           "the run went on from their last iterates", s["problem"], solves["missed"], solves["solves"], name,
                           solves["tol"], solves["first_miss"], solves["largest_residual"])
    if raise_signal and s["stop"] == "signal":
        if root:
            logger.warning(stopped_line(s))
        signal.raise_signal(s["signal"])


def _loop_progress(progress) -> ProgressFn | None:
    """What the loop calls: the project's displays take its note too (`timeloop.ProgressFn`); a caller's function
    progress(done, total, residual), as `run` documents it."""
    if progress is None or isinstance(progress, (LazyProgress, ProgressLines)):
        return progress
    return lambda done, total, residual, note: progress(done, total, residual)


def _run_passes(problem, engine, total, tol, params, loop: dict, outputs, comm, procs, sweeps: bool, halo: str,
                rule: StopRule | None = None) -> Result:
    """The step's passes in the time loop (`sweeps`: linear ones as sweeps), in one process or this rank's block,
    checking `rule` with the residual."""
    start = time.perf_counter()
    decomposed = None
    if comm is None:
        sim = Simulation(problem, engine, params, background=True, sweeps=sweeps)
    else:
        from .decomposed_simulation import DecomposedSimulation

        sim = decomposed = DecomposedSimulation(problem, engine, params, comm, procs, halo, sweeps=sweeps)
    setup_s = time.perf_counter() - start
    opts = LoopOptions(steps=total, tol=tol, until=RuleCheck(rule, sim) if rule is not None else None, **loop)
    if outputs is not None:
        result = outputs.run_passes(sim, opts)  # with the traces, which it wrote to the snapshot file
    else:
        result = run_stepper(lambda: PassStepper(sim, never_fuses(opts, problem.default_steps), fusion_window(opts)), engine, opts)
        result.traces = sim.traces()  # under MPI a gather every rank joins, once
    result.summary["setup_s"] = setup_s
    if decomposed is not None:
        result.summary.update(procs=list(decomposed.decomp.dims), ranks=decomposed.decomp.nprocs, halo=decomposed.transport,
                              **decomposed.timing(result.summary["wall_s"]))
        return Result(decomposed.gathered(), result.summary, traces=result.traces)
    return result
