"""Running a job: a problem built or resumed, its outputs checked, attached as observers and reported.

This layer sits above the time loop and below the CLI and `sf.run`, which both
use it; `io/` below it holds the file formats only. The CLI parses options
into `Outputs` and calls `prepare` (every refusal happens here, before any
file is created), `setup` (build or resume) and `run`. A failed write stops
the run with one line naming what is safe on disk.
"""

from __future__ import annotations

import logging
import shlex
import sys
import tempfile
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from . import problems
from .errors import BlowUp, StencilforgeError
from .fingerprint import difference, fingerprint
from .grid import Grid
from .io.hdf5 import series_run_id
from .io.meta import Receivers, RunInfo, jsonable
from .io.paths import HDF5_SUFFIXES, SNAPSHOT_SUFFIXES, check_output, remove_stale_temps, sole_writer
from .io.plots import IMAGE_SUFFIXES, View, plot_array
from .io.snapshots import Ledger, OutputError, SeriesSink, StreamingObserver, reason
from .optional import require
from .points import Traces
from .timeloop import LoopOptions, Result, close_observers, fusion_window, never_fuses, run_stepper

CHECKPOINT_SUFFIXES = (".h5", ".hdf5")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _View:
    """What the output files record of a run: its problem's name, grid (the whole grid's, for a decomposed run),
    every array with its ghost layers, dt, parameters, the fields its equations write and its receivers."""

    name: str
    grid: Grid
    fields: dict
    dt: float
    params: dict
    written: tuple[str, ...]
    receivers: Receivers | None = None
    t0: float = 0.0


@dataclass(frozen=True)
class Outputs:
    """A run's file outputs: the paths as given (strings or Paths), which `prepare` checks and returns as Paths."""

    snapshot_every: int | None = None
    out: str | Path | None = None
    compression: str = "none"
    checkpoint_every: int | None = None
    checkpoint: str | Path | None = None
    resume: str | Path | None = None
    png: str | Path | None = None
    buffers: int = 3
    command_line: str | None = None
    equations: str = ""  # the sf.Problem's canonical text: recorded in every file, and a resume must match it
    problem_file: str = ""  # the problem file's text, recorded in every file, when the run was started from one
    params: dict = field(default_factory=dict)  # what built a named problem (radius, velocity, ...), recorded beside its constants
    overwrite: bool = False
    run_id: str = ""  # set by prepare: new for a fresh run, the checkpoint's when resuming
    resume_step: int | None = None  # set by prepare when resuming
    append: bool = False  # set by prepare: --out is the series being resumed
    resumed: RunInfo | None = None  # set by prepare: what the checkpoint resumed from records
    api: bool = False  # errors name sf.run's keywords (out=) instead of the command line's options (--out)
    writer: bool = True  # this process writes the files (rank 0 of a decomposed run), so it holds them
    held: ExitStack | None = field(default=None, compare=False, repr=False)  # set by prepare: the files held

    def option(self, name: str) -> str:
        """How the caller spells an option in an error: `--snapshot-every` on the command line, `snapshot_every=` in sf.run."""
        if not self.api:
            return "--" + name.replace("_", "-")
        return "overwrite=True" if name == "overwrite" else f"{name}="

    def _check_combinations(self, problem: str | None) -> None:
        """Options that only make sense together, and counts that must be positive."""
        o = self.option
        if problem is None and self.resume is None:
            raise StencilforgeError(f"give a problem ({', '.join(problems.NAMES)}) or --resume CHECKPOINT")
        for option, value in ((o("snapshot_every"), self.snapshot_every), (o("checkpoint_every"), self.checkpoint_every)):
            if value is not None and value < 1:
                raise StencilforgeError(f"{option} must be at least 1, got {value}")
        if self.snapshot_every is not None and self.out is None:
            raise StencilforgeError(f"{o('snapshot_every')} needs {o('out')} FILE (.h5, .hdf5, .nc or .npz)")
        if self.out is not None and self.snapshot_every is None:
            raise StencilforgeError(f"{o('out')} needs {o('snapshot_every')} K (steps between snapshots)")
        if self.checkpoint is not None and self.checkpoint_every is None and self.resume is None:
            raise StencilforgeError(f"{o('checkpoint')} needs {o('checkpoint_every')} K (steps between checkpoints)")
        if self.buffers < 1:
            raise StencilforgeError(f"need at least one snapshot buffer, got {self.buffers}")

    def prepare(self, problem: str | None) -> "Outputs":
        """Check option combinations and every output path; return the options with default paths filled in.

        No existing file is replaced unless `overwrite`, except the series being
        resumed: the checkpoint resumed from, and a snapshot file (with its .xmf)
        written by the same run, which the resumed run appends to. The `writer`
        holds the snapshot file and the checkpoint from before their checks until
        the returned Outputs is left (it is a context manager): a second run
        writing either is refused, `overwrite` or not.
        """
        self._check_combinations(problem)
        run_id, resume_step, resume, resumed = uuid.uuid4().hex, None, None, None
        if self.resume is not None:
            from .io.checkpoint import peek

            resume = Path(self.resume)
            resumed, resume_step = peek(resume)
            run_id = resumed.run_id or run_id
        held = ExitStack()
        try:
            out, append, checkpoint = self._claim(problem, resume, run_id, held)
            png = check_output(self.png, "image", IMAGE_SUFFIXES, overwrite=self.overwrite) if self.png is not None else None
            library = {".nc": "h5netcdf", ".npz": None}.get(out.suffix.lower(), "h5py") if out is not None else None
            for what, path, module in (("snapshot file", out, library), ("checkpoint", checkpoint, "h5py"), ("image", png, "matplotlib")):
                if path is not None and module is not None:
                    require(module, f"{what} {path}")
        except BaseException:
            held.close()
            raise
        for path in (out, out.with_suffix(".xmf") if out is not None else None, checkpoint, png):
            if path is not None:
                remove_stale_temps(path)
        command_line = self.command_line or shlex.join(["stencilforge", *sys.argv[1:]])
        return replace(self, out=out, checkpoint=checkpoint, png=png, resume=resume, command_line=command_line,
                       run_id=run_id, resume_step=resume_step, append=append, resumed=resumed, held=held)

    def _claim(self, problem: str | None, resume: Path | None, run_id: str, held: ExitStack) -> tuple[Path | None, bool, Path | None]:
        """(snapshot file, whether it is appended to, checkpoint), each held in `held` (by the writer) before
        it is checked, so that no other run can create or replace it between the check and the run."""
        o = self.option
        out = check_output(self.out, "snapshot file", SNAPSHOT_SUFFIXES, option=o("overwrite")) if self.out is not None else None
        checkpoint = None
        if self.checkpoint_every is not None or resume is not None:
            checkpoint = check_output(Path(self.checkpoint or self.default_checkpoint(problem)), "checkpoint", CHECKPOINT_SUFFIXES,
                                      option=o("overwrite"))
            if out is not None and checkpoint.resolve() == out.resolve():
                raise StencilforgeError(f"{o('checkpoint')} and {o('out')} are the same file {out}")
        if self.writer:
            for what, path in (("snapshot file", out), ("checkpoint", checkpoint)):
                if path is not None:
                    held.enter_context(sole_writer(path, what))
        append = out is not None and resume is not None and out.is_file() and series_run_id(out) == run_id
        if out is not None and out.exists() and not append and not self.overwrite:
            whose = "was written by another run" if resume is not None else "already exists"
            raise StencilforgeError(f"snapshot file {out} {whose}; pass {o('overwrite')} to replace it, or choose another {o('out')}")
        if out is not None and out.suffix.lower() in HDF5_SUFFIXES:
            check_output(out.with_suffix(".xmf"), "XDMF file", overwrite=append or self.overwrite, option=o("overwrite"))
        if checkpoint is not None:
            same = resume is not None and checkpoint.exists() and checkpoint.resolve() == resume.resolve()
            check_output(checkpoint, "checkpoint", overwrite=same or self.overwrite, option=o("overwrite"))
        return out, append, checkpoint

    def __enter__(self) -> "Outputs":
        return self

    def __exit__(self, *exc) -> None:
        """Let go of the output files, so another run may write them."""
        if self.held is not None:
            self.held.close()

    def default_checkpoint(self, problem: str | None) -> Path:
        """Next to --out (run.h5 -> run.ckpt.h5), else the file resumed from, else ./<problem>.ckpt.h5."""
        if self.out is not None:
            return Path(self.out).with_suffix(".ckpt.h5")
        if self.resume is not None:
            return Path(self.resume)
        return Path(f"{problem}.ckpt.h5")

    def _reads(self, view: "_View") -> list[tuple[str, int | None, tuple[str, ...]]]:
        """(kind, every, fields) of each output: snapshots hold the interiors of the fields the equations write,
        checkpoints every field with its ghost layers. A resumed run without --checkpoint-every still checkpoints
        its final state (every None: the last step only)."""
        reads: list[tuple[str, int | None, tuple[str, ...]]] = []
        if self.snapshot_every is not None:
            reads.append(("snapshot", self.snapshot_every, view.written))
        if self.checkpoint is not None:
            reads.append(("checkpoint", self.checkpoint_every, tuple(view.fields)))
        return reads

    def _observers(self, setup: "_View", backend_name: str, ledger: Ledger,
                   feed: "_TraceFeed | None" = None) -> tuple[list, SeriesSink | None]:
        """One observer per entry of `_reads`, in its order, and the snapshot file's sink, which takes the traces
        (with each snapshot those `feed` hands over, where given)."""
        info = RunInfo.of(setup, backend_name, self.command_line, self.run_id, self.equations, self.problem_file)
        observers: list[StreamingObserver] = []
        series = None
        try:
            for kind, every, names in self._reads(setup):
                if kind == "checkpoint":
                    observers.append(self._checkpoints(setup, info, names, every, ledger, observers[0] if observers else None))
                else:
                    series = self._series(setup, info, names, every, ledger)
                    layout, regions = {n: (setup.grid.shape, setup.grid.dtype) for n in names}, {n: setup.grid.interior for n in names}
                    observers.append(StreamingObserver(series, layout, regions, every, ledger, "snapshot", self.buffers,
                                                       traces=feed.upto if feed is not None else None))
        except BaseException:
            close_observers(observers)
            raise
        return observers, series

    def run_passes(self, sim, opts: LoopOptions) -> Result:
        """Run a problem's generated passes (a `Simulation`, resumed first if asked) with snapshots of the
        fields its equations write and checkpoints of every time level of every field; the result holds the
        run's traces, written after the snapshots (`_write_traces`)."""
        from .simulation import PassStepper

        if self.resume is not None:
            self.resume_simulation(sim)
        problem = sim.problem
        ledger = Ledger(checkpoint=(sim.step_count, Path(self.resume)) if self.resume is not None else None)
        feed = _TraceFeed(sim)
        if sim.decomposed:
            if self.png is not None:
                raise StencilforgeError("--png is not available for decomposed (MPI) runs yet; use --snapshot-every and plot")
            observers, series = self._gathered_observers(sim, ledger)
        else:
            view = _View(problem.name, sim.lattice, sim.state(), sim.dt, {**self.params, **sim.params}, problem.analysis.written,
                         Receivers.of(problem.receivers))
            observers, series = self._observers(view, sim.backend.name, ledger, feed if problem.receivers else None)
        try:
            opts = replace(opts, observers=(*opts.observers, *observers))
            single = never_fuses(opts, problem.default_steps)
            result = run_stepper(lambda: PassStepper(sim, single, fusion_window(opts)), sim.backend, opts)
        except BlowUp as exc:
            root = not sim.decomposed or sim.cart.rank == 0
            try:
                self._write_traces(sim, series, ledger, feed, exc.last_finite)
            except StencilforgeError as failure:
                raise self._blown(exc, ledger, root, str(failure)) from None
            raise self._blown(exc, ledger, root) from None
        except OutputError:  # raised on rank 0 of a decomposed run; the other ranks raise the broadcast message
            raise StencilforgeError(f"{ledger.failures[0]}; run stopped. {ledger.describe()}") from None
        result.traces = self._write_traces(sim, series, ledger, feed)
        if self.png is not None:
            name = problem.analysis.written[0]
            self._draw(name, sim.lattice, problem.name, sim.backend.to_host(result.fields[name]), result.summary, ledger)
        return self._report(result, ledger) if not sim.decomposed or sim.cart.rank == 0 else result

    def _draw(self, name: str, grid, problem: str, values, summary: dict, ledger: Ledger) -> None:
        """--png: the field `name`'s final values."""
        assert self.png is not None, "only a run with --png draws"
        try:
            plot_array(self.png, values, View(problem, name, grid.spacing, grid.lower), summary["t"], summary["step"])
        except OSError as exc:
            raise StencilforgeError(f"writing {self.png} failed: {exc}. {ledger.describe()}") from None

    def _write_traces(self, sim, series: SeriesSink | None, ledger: Ledger, feed: "_TraceFeed",
                      last: int | None = None) -> Traces | None:
        """The run's traces (rank 0's under MPI, gathered from every rank; None elsewhere and without receivers), those
        up to step `last` where given (a blow-up's last finite step, as the snapshots hold); the rows the snapshots did
        not take along (`feed`) are appended to the snapshot file `series` (rank 0's) once its writer is done; a failed
        write is one line, on every rank."""
        if not sim.problem.receivers or (last is not None and self.out is None):
            return None
        traces = sim.traces()  # under MPI a gather, which every rank joins
        if traces is not None and last is not None:
            traces = traces.upto(last)
        rest = traces.rows(feed.handed) if traces is not None else None

        def write() -> None:
            if series is None or rest is None or not len(rest.steps):  # no file, not rank 0, or no row left to write
                return
            try:
                series.write_traces(rest)
            except Exception as exc:  # OSError, h5py's errors: the snapshots before stay as they were
                safe = f". {ledger.describe()}" if last is None else ""  # after a blow-up, _blown says what is safe
                raise StencilforgeError(f"writing the traces to {series.path} failed: {reason(exc)}{safe}") from None

        if sim.decomposed:
            from .distributed.comm import agree

            agree(sim.cart, write)
        else:
            write()
        return traces

    def _gathered_observers(self, sim, ledger: Ledger) -> tuple[list, SeriesSink | None]:
        """A decomposed run's outputs: every rank sends its part of the fields at each output step, and rank 0
        writes them, assembled, as the one-process files (so a run resumes on any rank count). The snapshot
        file's sink is rank 0's (None elsewhere)."""
        from .distributed.comm import agree
        from .distributed.outputs import Gathering, GlobalOutput

        problem, lat = sim.problem, sim.lattice
        grid = Grid(problem.grid.shape, lat.spacing, lat.dtype, lat.ghost, lat.lower)
        # the global fields' shapes and dtypes, which no rank holds: views of one element, no memory
        layout = {name: np.broadcast_to(np.zeros((), arr.dtype), grid.padded_shape) for name, arr in sim.state().items()}
        view = _View(problem.name, grid, layout, sim.dt, {**self.params, **sim.params}, problem.analysis.written,
                     Receivers.of(problem.receivers))
        root = sim.cart.rank == 0
        observers, series = agree(sim.cart, lambda: self._observers(view, sim.backend.name, ledger) if root else ([], None))
        reads = self._reads(view)
        shapes = {n: f.shape for n, f in layout.items()}
        dtypes = {n: f.dtype for n, f in layout.items()}
        return [Gathering(GlobalOutput(observers[i] if root else None, every, names, walls=kind == "checkpoint"),
                          sim.cart, sim.decomp, lat.ghost, shapes, dtypes) for i, (kind, every, names) in enumerate(reads)], series

    def resume_simulation(self, sim) -> None:
        """Load --resume's state into `sim`, refusing a checkpoint of another problem, grid, parameters or equations."""
        problem = sim.problem
        ckpt = checked_checkpoint(self.resume, problem.name, problem.grid.shape, problem.grid.dtype.name, dict(sim.params),
                                  self.equations)
        try:
            sim.load(ckpt.step, ckpt.fields)
        except StencilforgeError as exc:
            raise StencilforgeError(f"cannot resume from {self.resume}: {exc}") from None
        if sim.t != ckpt.t:
            raise StencilforgeError(f"cannot resume from {self.resume}: step {ckpt.step} and t={ckpt.t!r} disagree with dt={sim.dt!r}")

    def _series(self, setup, info, names, every: int | None, ledger: Ledger) -> SeriesSink:
        """The snapshot file's sink, of the format its suffix names, continuing the file where the run appends to it."""
        grid = setup.grid
        layout = {name: (grid.shape, grid.dtype) for name in names}
        assert self.out is not None, "prepare pairs --snapshot-every with --out"
        out = Path(self.out)
        sink: SeriesSink
        if out.suffix.lower() == ".npz":
            from .io.npz import NpzSink

            sink = NpzSink(out, info, layout, every, setup.t0, setup.dt, self.resume_step if self.append else None, setup.receivers)
        elif out.suffix.lower() == ".nc":
            from .io.netcdf import NcSink

            sink = NcSink(out, info, layout, every, setup.t0, setup.dt, self.compression, self.resume_step if self.append else None,
                          setup.receivers)
        else:
            from .io.hdf5 import H5Sink

            sink = H5Sink(out, info, layout, every, setup.t0, setup.dt, self.compression,
                          self.resume_step if self.append else None, setup.receivers)
        if sink.count and sink.last_step is not None:
            ledger.record("snapshot", sink.last_step, sink)
        return sink

    def _checkpoints(self, setup, info, names, every: int | None, ledger: Ledger, snapshots=None) -> StreamingObserver:
        from .io.checkpoint import CheckpointSink

        layout = {name: (setup.fields[name].shape, setup.fields[name].dtype) for name in names}
        regions = {name: tuple(slice(None) for _ in setup.fields[name].shape) for name in names}
        assert self.checkpoint is not None, "only a run with --checkpoint reads checkpoints"
        sink = CheckpointSink(Path(self.checkpoint), info)
        return StreamingObserver(sink, layout, regions, every, ledger, "checkpoint", depth=1, after=snapshots)

    def _blown(self, exc: BlowUp, ledger: Ledger, root: bool, failure: str = "") -> BlowUp:
        """`exc` saying, where files were asked for, which hold the last finite state or lead to it (on rank 0, which
        writes them), and the `failure` of a write after it (the traces')."""
        if not root or (self.out is None and self.checkpoint is None):
            return exc if not failure else BlowUp(f"{exc}. {failure}", exc.step, exc.last_finite, exc.fields, exc.finite_fields)
        where = ledger.finite_state(exc.last_finite, self.api)
        return BlowUp(f"{exc}. {where}{f'. {failure}' if failure else ''}", exc.step, exc.last_finite, exc.fields, exc.finite_fields)

    def _ledger(self, opts: LoopOptions) -> Ledger:
        return Ledger(checkpoint=(opts.start_step, Path(self.resume)) if self.resume is not None else None)

    def _report(self, result: Result, ledger: Ledger) -> Result:
        """The files written, in the run's summary."""
        files: dict[str, object] = {}
        if self.out is not None:
            out = Path(self.out)
            count = ledger.snapshot[2] if ledger.snapshot else 0
            files["snapshots"] = {"path": str(out), "count": count}
            if count and out.suffix.lower() in HDF5_SUFFIXES:
                files["xdmf"] = str(out.with_suffix(".xmf"))
        if ledger.checkpoint is not None:
            files["checkpoint"] = {"path": str(ledger.checkpoint[1]), "step": ledger.checkpoint[0]}
        if self.png is not None:
            files["png"] = str(self.png)
        if files:
            result.summary["outputs"] = files
        return result


class _TraceFeed:
    """The receivers' rows of a one-process run that its snapshot file does not hold yet: handed to the snapshot
    writer with each snapshot, so that a run killed later (kill -9, a failed write) keeps those up to its last
    snapshot; the rest are written when the run ends. `handed`: the rows handed over so far, which are not copied
    from the backend again."""

    def __init__(self, sim):
        self.sim = sim
        self.handed = 0

    def upto(self, step: int) -> Traces | None:
        traces = self.sim.traces(since=self.handed)
        if traces is None:
            return None
        rows = traces.upto(step)
        self.handed += len(rows.steps)
        return rows if len(rows.steps) else None


def _from_file(velocity) -> bool:
    return isinstance(velocity, str) and velocity.endswith(".npy")


def _stored_velocity(ckpt, path: Path) -> str:
    """The speeds of a wave3d model read from a file, recovered from the checkpoint's (c dt)^2 field.

    The checkpoint holds the model, so a resume needs neither the original .npy
    nor the directory it was named relative to; the stored field itself is what
    the resumed run uses.
    """
    vel = ckpt.fields["vel"]
    ghost = (vel.shape[0] - ckpt.info.shape[0]) // 2
    interior = tuple(slice(ghost, ghost + n) for n in ckpt.info.shape)
    np.save(path, np.sqrt(vel[interior].astype(np.float64)) / float(ckpt.info.params["dt"]))
    return str(path)


def named_problem(name: str | None, shape, dtype: str | None, params: dict, resume: str | Path | None = None):
    """(the named problem `name` as an sf.Problem, the parameters that built it, which its files record), fresh, or as
    the checkpoint `resume` holds it: what is given must agree with the checkpoint (problem, shape, dtype, parameters),
    the rest comes from it; a wave speed model read from a .npy comes back from the checkpoint's field, so a resume
    needs neither the file nor the directory it was named relative to."""
    given = {k: v for k, v in params.items() if v is not None}
    if resume is None:
        assert name is not None, "prepare asks for a problem or --resume"
        return problems.problem(name, shape=shape, dtype=dtype, **given)
    from .io.checkpoint import peek, read

    info, _ = peek(resume)
    _agrees(info, resume, name, shape, dtype, given)
    if info.problem not in problems.NAMES:
        raise StencilforgeError(f"cannot resume from {resume}: {info.problem!r} is not a named problem; "
                                f"if a problem file wrote it, give the file: stencilforge run FILE.py --resume {resume}")
    rebuilt = {k: v for k, v in info.params.items() if k in problems.parameters(info.problem)}
    velocity = rebuilt.get("velocity")
    with tempfile.TemporaryDirectory() as tmp:
        if _from_file(velocity) and "velocity" not in given:
            rebuilt["velocity"] = _stored_velocity(read(resume), Path(tmp) / "velocity.npy")
        made, recorded = problems.problem(info.problem, shape=info.shape, dtype=info.dtype, **{**rebuilt, **given})
    return made, {**recorded, "velocity": velocity} if _from_file(velocity) else recorded


def _agrees(info: RunInfo, path, problem: str | None, shape, dtype: str | None, given: dict) -> None:
    """Refuse, in one line, a problem, shape, dtype or parameter that the checkpoint at `path` was not written with."""
    if problem is not None and problem != info.problem:
        raise StencilforgeError(f"cannot resume {problem} from {path}: it is a {info.problem} checkpoint")
    if shape is not None and tuple(shape) != info.shape:
        raise StencilforgeError(f"cannot resume with shape {tuple(shape)} from {path}: it was written with shape {info.shape}")
    if dtype is not None and dtype != info.dtype:
        raise StencilforgeError(f"cannot resume as {dtype} from {path}: it was written as {info.dtype}")
    for key, value in given.items():
        if key in info.params and jsonable(value) != info.params[key]:
            raise StencilforgeError(f"cannot resume with --{key} {value} from {path}: it was written with {key}={info.params[key]}")


def checked_checkpoint(path, name: str, shape, dtype: str, params: dict, equations: str = ""):
    """The checkpoint at `path`, refused in one line unless it holds `name` on this grid with these parameters
    and, where both record them, these equations (`fingerprint.canonical`)."""
    from .io.checkpoint import read

    ckpt = read(path)
    info = ckpt.info
    if info.problem != name:
        raise StencilforgeError(f"cannot resume {name} from {path}: it is a {info.problem} checkpoint")
    if tuple(shape) != info.shape:
        raise StencilforgeError(f"cannot resume with shape {tuple(shape)} from {path}: it was written with shape {info.shape}")
    if dtype != info.dtype:
        raise StencilforgeError(f"cannot resume as {dtype} from {path}: it was written as {info.dtype}")
    for key, value in jsonable(params).items():
        if info.params.get(key, value) != value:
            raise StencilforgeError(f"cannot resume with {key}={value} from {path}: it was written with {key}={info.params[key]}")
    if equations and not info.fingerprint:
        log.info("%s records no equations (an older stencilforge wrote it): resuming without comparing them", path)
    elif equations and info.fingerprint != fingerprint(equations):
        raise StencilforgeError(f"cannot resume {name} from {path}: its equations differ: {difference(info.equations, equations)}")
    return ckpt
