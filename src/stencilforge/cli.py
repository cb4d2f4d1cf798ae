"""Command-line interface: parses arguments, calls the API, prints results.

Exit status: 0 done; 2 an error (one line on stderr, never a traceback); 3 a
--tol run that did not converge (iteration cap or stalled residual); 4 a solve
that missed its tolerance with --strict-solves, after writing the final
outputs; 130 and 143 stopped by SIGINT and SIGTERM after writing them.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import platform
import re
import sys
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.console import Console
from rich.table import Table

from . import problems
from .backends import available, get_backend
from .backends.cuda.codegen import STRATEGIES
from .distributed import bind_for, fail_together, launched, world, world_rank
from .errors import SolveMissed, StencilforgeError
from .optional import require
from .progress import LazyProgress, ProgressLines, watching
from .resources import check_host_memory, node_peers
from .timeloop import stop_on_signals, stopped_line, where_saved
from .version import __version__

NOT_CONVERGED = 3
SOLVE_MISSED = 4


def exit_status(exc: StencilforgeError) -> int:
    """A missed solve's own status (a script can tell it from bad input), 2 for every other error."""
    return SOLVE_MISSED if isinstance(exc, SolveMissed) else 2

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Finite-difference stencil solvers on GPUs and CPUs.",
                  context_settings={"help_option_names": ["-h", "--help"]})
out = Console()
err = Console(stderr=True)


MULTI_VALUE_OPTIONS = ("--shape", "--procs")
NUMBERS = re.compile(r"^[-+]?[\d.]+([eE][-+]?\d+)?([x,][-+]?[\d.]+([eE][-+]?\d+)?)*$")  # 64, 10.5, 8x8, 1e3: parse_ints judges them


def join_multi_values(argv: list[str]) -> list[str]:
    """Let `--shape 64 64 64` through Click, which gives an option one value: join the numbers."""
    joined: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        joined.append(arg)
        i += 1
        if arg in MULTI_VALUE_OPTIONS:
            values = []
            while i < len(argv) and NUMBERS.match(argv[i]):
                values.append(argv[i])
                i += 1
            joined.append(",".join(values) if values else "")
    return joined


def parse_ints(text: str | None, option: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    parts = [p for p in text.replace("x", ",").split(",") if p]
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        values = ()
    if not values:
        raise StencilforgeError(f"{option} needs integers, for example {option} 256 256, got {text!r}")
    if any(v <= 0 for v in values):
        raise StencilforgeError(f"{option} values must be positive, got {text.replace(',', ' ')}")
    return values


def friendly(func: Callable) -> Callable:
    """Turn project errors into one-line messages and a non-zero exit, never a traceback."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except StencilforgeError as exc:
            err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(exit_status(exc)) from None
        except KeyboardInterrupt:
            err.print("interrupted", markup=False)
            raise typer.Exit(130) from None
        except MemoryError:
            err.print("error: out of memory: the arrays of this run do not fit; use a smaller --shape", markup=False)
            raise typer.Exit(2) from None

    return wrapper


def one_voice_under_mpi(func: Callable) -> Callable:
    """Under MPI, rank 0 alone prints an error every rank meets; a rank failing alone aborts them all."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if kwargs.get("procs") is None and not launched():
            return func(*args, **kwargs)
        comm = world()
        try:
            with fail_together(comm, collective=(typer.Exit,)):
                return func(*args, **kwargs)
        except StencilforgeError as exc:
            if comm.rank != 0:
                raise typer.Exit(exit_status(exc)) from None
            raise

    return wrapper


class StatusLine:
    """A transient spinner on stderr for a phase with no progress to show (JIT compile)."""

    def __init__(self):
        self.status = None

    def __call__(self, text: str | None) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
        if text is not None:
            self.status = err.status(text)
            self.status.start()


def _rate(value: float) -> str:
    """A throughput to three significant digits: small and split runs read as more than 0.000."""
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _human_summary(s: dict, source: str | None = None) -> None:
    """The one summary of every run: a named problem's, or a problem file's (`source`)."""
    table = Table(show_header=False, box=None, pad_edge=False)
    where = f" ({source})" if source else ""
    table.add_row("problem", f"{s['problem']}{where}  {'x'.join(map(str, s['shape']))}  {s['dtype']}")
    per = f"{s['graph_steps']} per CUDA graph" if s.get("graph_steps") else f"{s['steps_per_pass']} per pass"
    fused = f", {s['fused_steps']} steps {per}" if s.get("fused_steps") else ""
    ran = [v for v in s.get("sweeps", {}).values() if v] or ([s["strategy"]] if "strategy" in s else [])
    kernels = f" ({', '.join(ran)}{fused})" if ran else (f" ({fused[2:]})" if fused else "")
    passes = f", {s['passes_per_step']} passes per step" if s.get("passes_per_step", 1) > 1 else ""
    threads = f", {s['threads']} thread{'s' if s['threads'] > 1 else ''}" if s.get("threads") else ""
    table.add_row("backend", s["backend"] + kernels + passes + threads)
    if s.get("params"):
        table.add_row("parameters", ", ".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}"
                                               for k, v in s["params"].items() if v is not None))
    table.add_row("steps", f"{s['steps']}  (t = {s['t']:.6g})")
    timing = f"{s['wall_s']:.3f} s wall"
    ahead = s.get("setup_s", 0) + s.get("compile_s", 0)
    if ahead >= 0.05:
        timing += f" (+ {ahead:.2f} s set-up and compile)"
    if s.get("kernel_s"):
        timing += f", {s['kernel_s']:.3f} s in kernels"
    table.add_row("time", timing)
    if s.get("gcells_per_s") is not None:
        table.add_row("throughput", f"{_rate(s['gcells_per_s'])} GCell/s, T_eff {_rate(s['teff_gbps'])} GB/s "
                                    f"({s['bytes_per_cell']} B/cell)")
    if "residual" in s:
        state = "converged" if s["converged"] else ("not converged" if s["tol"] is not None else "fixed iterations")
        table.add_row("residual", f"{s['residual']:.3e}  {state}" + (f" (tol {s['tol']:g})" if s["tol"] else ""))
    for name, solve in s.get("solves", {}).items():
        missed = f", {solve['missed']} missed (first at step {solve['first_miss']})" if solve["missed"] else ""
        per = f"{solve['cycles_per_solve']:.3g}" if solve["solves"] else "-"
        table.add_row(f"solve {name}", f"{per} cycles per solve, largest residual {solve['largest_residual']:.3e} "
                                       f"(tol {solve['tol']:g}){missed}")
    if "until" in s:
        rule = s["until"]
        sides = f"  {rule['value']:.6g} against {rule['bound']:.6g}" if rule["value"] is not None else ""
        state = ("held" if rule["met"] else "not held") + (f" at step {rule['step']}" if rule["step"] is not None else "")
        table.add_row("until", f"{rule['rule']}{sides}  ({state})")
    if "error" in s and len(s.get("errors", {})) <= 1:
        table.add_row("error vs exact", f"max {s['error']['max_abs']:.3e}, rel L2 {s['error']['rel_l2']:.3e}")
    else:
        for name, e in s.get("errors", {}).items():
            table.add_row(f"error of {name}", f"max {e:.3e} against the exact solution")
    if "procs" in s:
        mpi = f"{s['ranks']} ranks as {'x'.join(map(str, s['procs']))}, halo {s.get('halo')}"
        if "comm_s" in s:
            mpi += f"{', overlapped' if s.get('overlap') else ''}, slowest rank: comm {s['comm_s']:.3f} s, compute {s['compute_s']:.3f} s"
        table.add_row("mpi", mpi)
    for kind, file in s.get("outputs", {}).items():
        table.add_row(kind, _output_cell(file))
    out.print(table)


def parse_settings(items: list[str] | None) -> dict[str, float]:
    """NAME=VALUE pairs of --set, as numbers."""
    values = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        try:
            values[name.strip()] = float(text)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise StencilforgeError(f"--set takes NAME=NUMBER, got {item!r}")
    return values


def _output_cell(file: str | dict) -> str:
    """A written file in the summary table: its path, then what the run reports of it (count, step)."""
    if isinstance(file, str):
        return file
    return f"{file['path']}  ({', '.join(f'{k} {v}' for k, v in file.items() if k != 'path')})"


def run_problem_file(path: str, shape, steps, tol, dtype, backend: str, settings: dict, check_every: int, as_json: bool,
                     files: dict, procs=None, fuse_steps: bool = True, threads: int | None = None, stall_checks: int = 20,
                     halo: str = "auto", strict_solves: bool | None = None, until: str | None = None) -> None:
    """Run a problem file's build(); its constants are the parameters --set may change; `files` are
    the output options of `Outputs` (snapshots, checkpoints, overwrite), whose files record this command
    line and the file's text. Under mpiexec (or with --procs) it runs decomposed and rank 0 alone prints.
    With --resume, --steps counts the steps after the checkpoint's, and the shape and dtype default to its."""
    from .convergence import checked_build, load_problem_file
    from .jobs import Outputs

    comm = world() if procs is not None or launched() else None
    module = load_problem_file(path)
    asked = "--shape"
    if files["resume"] is not None and (shape is None or dtype is None):
        from .io.checkpoint import peek

        stored, _ = peek(files["resume"])
        if shape is None:
            shape, asked = stored.shape, "the checkpoint's shape"
        dtype = dtype or stored.dtype
    problem = checked_build(path, module.build)(shape=shape, dtype=dtype or "float64")
    if shape is not None and tuple(problem.grid.shape) != tuple(shape):
        raise StencilforgeError(f"{path}: build() made a grid of shape {' '.join(map(str, problem.grid.shape))} for {asked} "
                                f"{' '.join(map(str, shape))}; its build(shape=...) must use the shape it is given")
    outputs = None
    if any(value is not None for key, value in files.items() if key != "overwrite"):
        outputs = Outputs(**files, problem_file=Path(path).read_text(encoding="utf-8", errors="replace"))
    _run_and_report(problem, outputs, as_json, comm, path, steps=steps, tol=tol, backend=backend, params=settings,
                    check_every=check_every, procs=procs, fuse_steps=fuse_steps, threads=threads, stall_checks=stall_checks,
                    halo=halo, strict_solves=strict_solves, until=until)


def _run_and_report(problem, outputs, as_json: bool, comm, source: str | None = None, until: str | None = None,
                    **options) -> None:
    """`run_with` the problem under the CLI's progress display and signal handling, then `_report` its summary;
    `until`: --until's text, a stop rule of the problem's fields (`rules.rule_from_text`)."""
    from .rules import rule_from_text
    from .runner import run_with

    if until is not None:
        options["until"] = rule_from_text(until, problem.fields)

    root = world_rank() == 0
    interactive = not as_json and watching() and root
    bar = (LazyProgress(problem.name) if interactive else ProgressLines(problem.name)) if root else None
    try:
        with stop_on_signals() as stop:
            result = run_with(problem, outputs, progress=bar, comm=comm, stop=stop,
                              status=StatusLine() if interactive else None, **options)
    finally:
        if bar is not None:
            bar.close()
    _report(result.summary, as_json, root, source)


def _multigrid_method(problem: str | None, method: str | None, resume: str | None) -> bool:
    """Whether `run` solves by multigrid: the default for the Poisson problems (a resumed run is a Jacobi run)."""
    if method not in (None, "multigrid", "jacobi"):
        raise StencilforgeError(f"--method must be multigrid or jacobi, got {method!r}")
    if method is not None and problem not in problems.POISSON:
        raise StencilforgeError(f"--method applies to {', '.join(problems.POISSON)}, not {problem}")
    if method == "multigrid" and resume is not None:
        raise StencilforgeError("--resume continues a Jacobi run: use --method jacobi")
    return problem in problems.POISSON and resume is None and method != "jacobi"


def _run_multigrid(problem: str, shape: str | None, dtype: str | None, backend: str, tol: float | None, steps: int | None, as_json: bool,
                   procs: str | None, threads: int | None = None) -> None:
    """Under mpiexec (or with --procs) the fine levels are split over the ranks and rank 0 reports."""
    comm = world() if procs is not None or launched() else None
    s = problems.multigrid(*problems.problem(problem, parse_ints(shape, "--shape"), dtype), backend=backend, tol=tol,
                           max_cycles=steps, comm=comm, procs=parse_ints(procs, "--procs"), threads=threads).summary
    root = comm is None or comm.rank == 0
    if root and as_json:
        print(json.dumps(s))
    elif root:
        _multigrid_table(s)
    if not s["converged"]:
        cycles = f"{s['cycles']} cycle{'s' if s['cycles'] != 1 else ''}"
        if root:
            err.print(f"not converged: residual {s['residual']:.3e} above tol {s['tol']:g} after {cycles}", markup=False, highlight=False)
        raise typer.Exit(NOT_CONVERGED)


def _multigrid_table(s: dict) -> None:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_row("problem", f"{s['problem']}  {'x'.join(map(str, s['shape']))}  {s['dtype']}")
    coarsest = "x".join(map(str, s["levels"][-1]))
    table.add_row("method", f"multigrid {s['cycle']}({s['pre']},{s['post']}) {s['smoother']}, FMG start, "
                            f"{len(s['levels'])} levels down to {coarsest}")
    table.add_row("backend", s["backend"] + (f", {s['threads']} thread{'s' if s['threads'] > 1 else ''}" if s.get("threads") else ""))
    if "ranks" in s:
        procs = "x".join(map(str, s["procs"]))
        table.add_row("mpi", f"{s['ranks']} ranks as {procs}, {s['split_levels']} of {len(s['levels'])} levels split")
    state = "converged" if s["converged"] else "not converged"
    table.add_row("cycles", f"{s['cycles']}  ({state}, tol {s['tol']:g})")
    table.add_row("residual", f"{s['residual']:.3e}  per cycle: {' '.join(f'{x:.3f}' for x in s['factors'])}")
    timing = f"{s['wall_s']:.3f} s wall, {s['setup_s']:.3f} s set-up"
    if s["cycle_s"] is not None:
        timing += f", {s['cycle_s'] * 1e3:.2f} ms per cycle"
    table.add_row("time", timing)
    if s["teff_gbps"] is not None:
        table.add_row("throughput", f"T_eff {s['teff_gbps']:.1f} GB/s per cycle ({s['passes_per_cycle']:.1f} passes over the finest grid)")
    table.add_row("error vs exact", f"max {s['error']['max_abs']:.3e}, rel L2 {s['error']['rel_l2']:.3e}")
    out.print(table)


def _print_version(value: bool) -> None:
    if value:
        print(f"stencilforge {__version__}")
        raise typer.Exit()


def configure_logging(verbosity: int) -> None:
    """The `stencilforge` logger on stderr: warnings, -v the choices and fallbacks (INFO), -vv DEBUG."""
    from rich.logging import RichHandler

    logger = logging.getLogger("stencilforge")
    for handler in [h for h in logger.handlers if isinstance(h, RichHandler)]:
        logger.removeHandler(handler)
    handler = RichHandler(console=err, show_time=False, show_path=False, markup=False, rich_tracebacks=False)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG)


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", "-V", callback=_print_version, is_eager=True, help="print the version and exit"),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="log choices and fallbacks to stderr (-vv: debug)"),
) -> None:
    """Finite-difference stencil solvers on GPUs and CPUs."""
    configure_logging(verbose)


def _ending(summary: dict) -> tuple[int, str | None]:
    """(exit status, last line) of a run that did not simply finish its steps or converge."""
    step = summary["step"]
    if summary.get("stop") == "signal":
        return 128 + summary["signal"], stopped_line(summary)
    if summary.get("tol") is not None and not summary.get("converged"):
        why = ("the residual stopped falling (no new minimum in the last checks)" if summary["stop"] == "stalled"
               else f"the iteration limit of {summary['iterations']} was reached")
        return NOT_CONVERGED, (f"not converged: residual {summary['residual']:.3e} above tol {summary['tol']:g} at iteration "
                               f"{step}: {why}; {where_saved(summary)}")
    return 0, None


@app.command()
@friendly
@one_voice_under_mpi
def run(
    problem: Optional[str] = typer.Argument(
        None, help=f"one of: {', '.join(problems.NAMES)}, or a problem file NAME.py defining build() (may be omitted with --resume)"
    ),
    settings: Optional[list[str]] = typer.Option(
        None, "--set", help="problem files: change a parameter (an sf.Constant), NAME=VALUE; repeatable"
    ),
    shape: Optional[str] = typer.Option(None, "--shape", help="interior points per axis, slowest first: --shape 512 512"),
    steps: Optional[int] = typer.Option(None, help="number of time steps (iterations for poisson2d); with --resume, steps more"),
    tol: Optional[float] = typer.Option(None, help="poisson2d: stop when ||f - A u|| / ||f|| < tol"),
    dtype: Optional[str] = typer.Option(None, help="float32 or float64 (default depends on the problem)"),
    backend: str = typer.Option("auto", help="auto, numpy, numba or cuda"),
    strategy: Optional[str] = typer.Option(None, help=f"cuda: {', '.join(STRATEGIES)} or auto"),
    alpha: Optional[float] = typer.Option(None, help="heat: diffusivity"),
    dt: Optional[float] = typer.Option(None, help="heat, wave3d: time step (refused above the stability limit)"),
    radius: Optional[int] = typer.Option(None, help="wave3d: stencil radius 1..8 (order 2*radius)"),
    velocity: Optional[str] = typer.Option(None, help="wave3d: constant, layered or a .npy file of speeds"),
    c: Optional[float] = typer.Option(None, help="wave3d: wave speed of the constant model"),
    source: Optional[bool] = typer.Option(None, "--source/--no-source", help="wave3d: Ricker point source at the centre"),
    frequency: Optional[float] = typer.Option(None, help="wave3d: Ricker peak frequency"),
    axis: Optional[int] = typer.Option(None, help="derivatives: 0 (y) or 1 (x)"),
    accuracy: Optional[int] = typer.Option(None, help="derivatives: interior order 2 or 4"),
    method: Optional[str] = typer.Option(
        None, "--method", help="poisson2d, poisson3d: multigrid (default; --steps caps its cycles) or jacobi"
    ),
    check_every: int = typer.Option(100, help="steps between NaN checks and residual evaluations"),
    fuse_steps: bool = typer.Option(
        True, "--fuse-steps/--single-steps",
        help="cuda (auto strategy; 2D and 3D) and numba (2D): two or more steps per pass where no wall reads the field and nothing "
        "looks in between (poisson2d, heat2d, heat3d; on cuda also problem files whose step is one 2D pass)",
    ),
    snapshot_every: Optional[int] = typer.Option(None, "--snapshot-every", help="save the field every K steps to --out"),
    out_file: Optional[str] = typer.Option(
        None, "--out", help="snapshot file: .h5/.hdf5 (with an .xmf for ParaView), .nc (NetCDF-4, for xarray) or .npz for small runs"
    ),
    compression: str = typer.Option("none", help="HDF5 snapshot compression: none, gzip or lzf (NetCDF: none or gzip)"),
    checkpoint_every: Optional[int] = typer.Option(None, "--checkpoint-every", help="write a restart checkpoint every K steps"),
    checkpoint: Optional[str] = typer.Option(None, help="checkpoint file (default: next to --out, else ./<problem>.ckpt.h5)"),
    resume: Optional[str] = typer.Option(None, help="continue from a checkpoint file, bit for bit"),
    png: Optional[str] = typer.Option(None, help="draw the final state to this .png"),
    procs: Optional[str] = typer.Option(None, "--procs", help="MPI process grid PX PY [PZ] (default under mpiexec: least halo surface)"),
    halo: str = typer.Option(
        "auto", "--halo", envvar="STENCILFORGE_HALO", help="MPI halo transport: auto, mpi (CUDA-aware), nccl, staged (pinned host) or host"
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="replace existing output files (default: refuse; a resumed series is appended to)"
    ),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="numba: threads for this process (default: $NUMBA_NUM_THREADS, else its share of the cores it may run on)"
    ),
    stall_checks: int = typer.Option(
        20, "--stall-checks", help="--tol: stop when the residual reaches no new minimum in this many checks (0: never)"
    ),
    until: Optional[str] = typer.Option(
        None, "--until", help="stop when this rule of the fields holds, checked every --check-every steps, e.g. "
        "'norm(p.next - p, 1) / norm(p, 1) < 1e-4' (norm, total, abs; the same step on any number of ranks)"
    ),
    strict_solves: bool = typer.Option(
        False, "--strict-solves", help="stop at the first solve (sf.Solve) that misses its tolerance, final outputs written, "
        f"exit status {SOLVE_MISSED} (default: the problem's; else such solves are counted and the run goes on)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print exactly one JSON object"),
) -> None:
    """Run a problem and report time, throughput and the error against its exact solution.

    Exits 3 when a --tol run does not converge, 4 when a solve misses its tolerance with --strict-solves and 130/143
    after SIGINT/SIGTERM (both after writing the final outputs).
    """
    strict = True if strict_solves else None  # else the problem's own
    if problem is not None and problem.endswith(".py"):
        others = dict(png=png, strategy=strategy)
        given = [k for k, v in others.items() if v is not None]
        if given:
            raise StencilforgeError(f"--{given[0].replace('_', '-')} is not available for problem files yet: run them without it")
        files = dict(out=out_file, snapshot_every=snapshot_every, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                     resume=resume, overwrite=overwrite)
        run_problem_file(problem, parse_ints(shape, "--shape"), steps, tol, dtype, backend, parse_settings(settings), check_every,
                         as_json, files, parse_ints(procs, "--procs"), fuse_steps, threads, stall_checks, halo, strict, until)
        return
    if settings:
        raise StencilforgeError("--set applies to problem files (NAME.py); the named problems take their own options")

    mpi = procs is not None or launched()
    if problem is not None and _multigrid_method(problem, method, resume):
        refused = [name for name, given in (("--snapshot-every", snapshot_every), ("--checkpoint-every", checkpoint_every),
                   ("--png", png), ("--strategy", strategy), ("--until", until)) if given]
        if refused:
            raise StencilforgeError(f"{', '.join(refused)} apply to --method jacobi, not multigrid")
        _run_multigrid(problem, shape, dtype, backend, tol, steps, as_json, procs, threads)
        return
    params = dict(alpha=alpha, dt=dt, radius=radius, velocity=velocity, c=c, source=source, frequency=frequency,
                  axis=axis, accuracy=accuracy)
    files = dict(snapshot_every=snapshot_every, out=out_file, compression=compression, checkpoint_every=checkpoint_every,
                 checkpoint=checkpoint, resume=resume, png=png, overwrite=overwrite)
    _run_named(problem, parse_ints(shape, "--shape"), dtype, params, files, backend, strategy, steps, tol, check_every,
               fuse_steps, threads, stall_checks, halo, parse_ints(procs, "--procs") if mpi else None, mpi, as_json, strict, until)


def _run_named(problem: str | None, shape, dtype: str | None, params: dict, files: dict, backend: str, strategy: str | None,
               steps: int | None, tol: float | None, check_every: int, fuse_steps: bool, threads: int | None, stall_checks: int,
               halo: str, procs, mpi: bool, as_json: bool, strict_solves: bool | None = None, until: str | None = None) -> None:
    """A named problem of equations through `run_with`, as a problem file runs: its sf.Problem from the catalogue
    (or from --resume's checkpoint), the parameters that built it recorded in its files."""
    from .jobs import Outputs, named_problem

    stored = None
    if files["resume"] is not None:
        from .io.checkpoint import peek

        stored = peek(files["resume"])[0]
    name = problem or (stored.problem if stored else None)
    assert name is not None, "_operator read the problem from --resume"
    peers = node_peers(world()) if mpi else None
    if name in problems.NAMES:  # another's checkpoint is refused by named_problem, in one line
        probed = {k: v for k, v in {**(stored.params if stored else {}), **params}.items()
                  if v is not None and k != "velocity" and k in problems.parameters(name)}
        check_host_memory(name, shape or (stored.shape if stored else None),  # before the problem's arrays are made
                          lambda small: _arrays_of(name, small, dtype or (stored.dtype if stored else None), probed),
                          snapshots=files["snapshot_every"] is not None,
                          checkpoints=files["checkpoint_every"] is not None or stored is not None, processes=len(peers) if peers else 1)
    made, recorded = named_problem(problem, shape, dtype, params, files["resume"])
    bind_for(world() if mpi else None, backend)
    engine = get_backend(backend, **({"strategy": strategy} if strategy else {}))
    if strategy and engine.name != "cuda":
        raise StencilforgeError(f"--strategy applies to the cuda backend, not {engine.name}")
    if threads is not None and engine.name != "numba":
        raise StencilforgeError(f"--threads applies to the numba backend, not {engine.name}")
    if made.name in problems.POISSON and steps is None and tol is None:
        tol = problems.JACOBI_TOL
    _run_and_report(made, Outputs(**files, params=recorded), as_json, world() if mpi else None, steps=steps, tol=tol,
                    backend=engine, check_every=check_every, procs=procs, fuse_steps=fuse_steps, threads=threads,
                    stall_checks=stall_checks, halo=halo, strict_solves=strict_solves, until=until)


def _arrays_of(name: str, shape, dtype: str | None, params: dict):
    """The arrays a run of the named problem allocates (every time level of every field, `Simulation`) on a small
    grid of `shape`, with its lattice: what `resources.needed_bytes` scales up."""
    from types import SimpleNamespace

    from .backends.numpy_ref import NumpyBackend
    from .simulation import Simulation

    sim = Simulation(problems.problem(name, shape=shape, dtype=dtype, **params)[0], NumpyBackend())
    return SimpleNamespace(grid=sim.lattice, fields=sim.arrays())


def _report(summary: dict, as_json: bool, root: bool, source: str | None = None) -> None:
    """Rank 0 prints the summary (and why the run ended early, if it did); every rank exits with its status."""
    status, line = _ending(summary)
    if root:
        if as_json:
            print(json.dumps(summary))
        else:
            _human_summary(summary, source)
        if line is not None:
            err.print(line, markup=False, highlight=False, soft_wrap=True)
    if status:
        raise typer.Exit(status)


@app.command()
@friendly
def verify(
    files: Optional[list[str]] = typer.Argument(
        None, help="problem files (NAME.py with build, ORDER, SHAPES, T_END) to check instead of the built-in suite"
    ),
    backend: str = typer.Option("auto", help="backend to verify"),
    quick: bool = typer.Option(False, help="fewer, smaller grids"),
    storage: Optional[str] = typer.Option(
        None, help="instead of the orders: heat2d, heat3d and wave3d with fields stored in this dtype (float16), "
        "their errors against the exact solution and the float32 run"
    ),
) -> None:
    """Convergence-order suite: observed order by grid refinement against theory (within 0.1 for problem files)."""
    from .convergence import check_file
    from .verification import run_suite

    engine = get_backend(backend)
    if storage is not None:
        if files:
            raise StencilforgeError("--storage checks the built-in heat2d, heat3d and wave3d; give no problem files with it")
        _verify_storage(engine, storage, quick)
        return
    table = Table(title=f"convergence orders ({engine.name})")
    for col in ("check", "expected", "observed", "errors (coarse -> fine)", "result"):
        table.add_column(col)
    failed = 0
    checks = [check_file(path, engine) for path in files] if files else run_suite(engine, quick=quick)
    for check in checks:
        failed += not check.passed
        table.add_row(
            check.name, f"{check.expected:g}", f"{check.observed:.3f}",
            " ".join(f"{e:.2e}" for e in check.errors), "[green]pass" if check.passed else "[red]FAIL",
        )
    out.print(table)
    if failed:
        err.print(f"error: {failed} convergence check(s) failed")
        raise typer.Exit(1)


def _verify_storage(engine, storage: str, quick: bool) -> None:
    from .verification import storage_checks

    table = Table(title=f"{storage} storage against the grid's float32 ({engine.name})")
    for col in ("problem", "steps", "error float32", f"error {storage}", "max difference", "rounding bound", "result"):
        table.add_column(col)
    failed = 0
    for check in storage_checks(engine, storage, quick):
        failed += not check.passed
        table.add_row(check.name, str(check.steps), f"{check.wide_error:.2e}", f"{check.narrow_error:.2e}",
                      f"{check.difference:.2e}", f"{check.bound:.2e}", "[green]pass" if check.passed else "[red]FAIL")
    out.print(table)
    if failed:
        err.print(f"error: {failed} {storage} run(s) left the rounding bound")
        raise typer.Exit(1)


@app.command()
def info() -> None:
    """Python, package versions, CPU cores, backends and devices."""
    import numpy

    table = Table(show_header=False, box=None)
    table.add_row("stencilforge", __version__)
    table.add_row("python", f"{platform.python_version()} ({platform.machine()}, {platform.system()})")
    table.add_row("numpy", numpy.__version__)
    for name in ("numba", "cupy", "mpi4py", "h5py", "matplotlib"):
        try:
            module = __import__(name)
            table.add_row(name, getattr(module, "__version__", "installed"))
        except ImportError:
            table.add_row(name, "not installed")
    table.add_row("cpu cores", str(os.cpu_count()))
    table.add_row("backends", ", ".join(available()))
    try:
        import cupy

        from .backends.cuda.backend import device_name

        for i in range(cupy.cuda.runtime.getDeviceCount()):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            name = device_name(props)
            memory = props["totalGlobalMem"] / 2**30
            table.add_row(f"gpu {i}", f"{name}, {memory:.1f} GiB, sm_{props['major']}{props['minor']}, {props['multiProcessorCount']} SMs")
    except Exception as exc:  # any CuPy/driver failure just means "no GPU" here
        table.add_row("gpu", f"none ({type(exc).__name__})")
    out.print(table)


@app.command("show-kernel")
@friendly
def show_kernel(
    problem: str = typer.Argument(..., help=f"one of: {', '.join(problems.NAMES)}, or a problem file NAME.py"),
    strategy: str = typer.Option("auto", help=f"{', '.join(STRATEGIES)} or auto"),
    shape: Optional[str] = typer.Option(None, "--shape", help="interior points per axis"),
    dtype: Optional[str] = typer.Option(None),
    radius: Optional[int] = typer.Option(None, help="wave3d: stencil radius"),
    backend: str = typer.Option("cuda", help="cuda or numba"),
) -> None:
    """Print the source a run compiles (no GPU needed): CUDA C, or numba's Python; the named problems' and your files'."""
    from .sources import problem_source

    if problem.endswith(".py"):
        from .convergence import load_problem_file

        if radius is not None:
            raise StencilforgeError("--radius applies to wave3d; a problem file sets its own stencils")
        built = load_problem_file(problem).build(shape=parse_ints(shape, "--shape"), dtype=dtype or "float64")
        print(problem_source(built, backend, strategy))
        return
    print(problem_source(problems.problem(problem, parse_ints(shape, "--shape"), dtype, radius=radius)[0], backend, strategy))


@app.command()
@friendly
def plot(
    file: str = typer.Argument(..., help="snapshot file (.h5, .hdf5, .nc or .npz) written by run --out"),
    output: str = typer.Option(..., "-o", "--output", help="PNG to write"),
    step: Optional[int] = typer.Option(None, help="global step of the snapshot (default: the last complete one)"),
    field: Optional[str] = typer.Option(None, help="field to draw (default: the first in the file)"),
    dpi: int = typer.Option(100, help="resolution: the image is 640x480 (2D) or 1280x400 (3D mid-planes) at 100 dpi"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace an existing PNG (default: refuse)"),
) -> None:
    """Draw one snapshot: a 2D field, or the three mid-planes of a 3D field, in physical units."""
    from .io.plots import plot_file

    written = plot_file(file, output, step=step, field=field, dpi=dpi, overwrite=overwrite)
    err.print(f"wrote {written}", markup=False, highlight=False)


@app.command()
@friendly
def animate(
    file: str = typer.Argument(..., help="snapshot file (.h5, .hdf5, .nc or .npz) written by run --out"),
    output: str = typer.Option(..., "-o", "--output", help="animation to write: .gif (or .mp4 when ffmpeg is installed)"),
    field: Optional[str] = typer.Option(None, help="field to draw (default: the first in the file)"),
    fps: int = typer.Option(10, help="frames per second"),
    dpi: int = typer.Option(80, help="resolution: frames are 512x384 (2D) or 1024x320 (3D) at 80 dpi"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace an existing animation (default: refuse)"),
) -> None:
    """Animate every complete snapshot of a file on one colour scale."""
    from .io.plots import animate_file

    written = animate_file(file, output, field=field, fps=fps, dpi=dpi, overwrite=overwrite)
    err.print(f"wrote {written}", markup=False, highlight=False)


@app.command()
@friendly
def bench(
    problems_: Optional[str] = typer.Option(
        None, "--problems",
        help="comma-separated workloads: poisson2d, jacobi2d, heat2d, heat3d, wave3d, derivatives, derivatives-fused, derivatives-y; "
        "gray_scott (time loop only); projection (a solve in each step, against the array libraries' CG); "
        "small (small grids and a 52-pass step, against array loops); "
        "problem files NAME.py (cold start only)",
    ),
    size: Optional[list[str]] = typer.Option(
        None, "--size", help="NAME=SHAPE, or 2d=SHAPE / 3d=SHAPE for every workload of that dimension (repeatable)"
    ),
    dtypes: Optional[str] = typer.Option(None, help="comma-separated dtypes to run each workload in (default: its own)"),
    backend: str = typer.Option("auto", help="our backend: auto, numpy, numba or cuda"),
    strategies: Optional[str] = typer.Option(
        None,
        help="cuda: comma-separated strategies, auto, and fused (several steps per pass: 2D and 3D star sweeps of one field) "
        "(default: all of "
        "them)",
    ),
    peers: Optional[str] = typer.Option(None, help="comma-separated peers, or none (default: every peer for the device)"),
    quick: bool = typer.Option(False, help="smaller matrix, fewer repeats and peers: under a minute"),
    repeats: Optional[int] = typer.Option(None, help="timed repeats per implementation (default 5, quick 3)"),
    json_path: Optional[str] = typer.Option(
        None, "--json", help="write the full report (device, versions, commit, every measurement) to FILE"
    ),
    plot: Optional[str] = typer.Option(None, help="write a roofline PNG to FILE"),
    time_loop: bool = typer.Option(
        True, "--time-loop/--no-time-loop", help="time each time-stepped problem through the API next to its kernels alone"
    ),
    cold_start: Optional[bool] = typer.Option(
        None, "--cold-start/--no-cold-start",
        help="time a fresh process to its first step, on empty and on primed caches (default: on for the CPU without --quick)",
    ),
    without: Optional[str] = typer.Option(
        None, "--cold-start-without", help="comma-separated packages the cold-start processes cannot import, as on an install "
        "without them (for example scipy, which Numba imports to look for BLAS)",
    ),
    cold_repeats: int = typer.Option(1, "--cold-start-repeats", help="cold and warm processes per cold-start row (the median is shown)"),
) -> None:
    """Our strategies against the peers and the copy bandwidth, measured in one run."""
    from .bench.options import bench_options
    from .bench.report import cold_start_table, heading, loop_table, notes, projection_table, results_tables, small_table, write_json
    from .bench.suite import run_bench

    def progress(msg: str) -> None:
        err.print(f"[dim]{msg}[/]", highlight=False)

    opts = bench_options(problems_, size, dtypes, backend, strategies, peers, quick, repeats, progress, time_loop, cold_start,
                         without, cold_repeats)
    if plot:
        require("matplotlib", f"--plot {plot}")
    report = run_bench(opts)
    report["command"] = ["stencilforge", *sys.argv[1:]]
    out.print(heading(report), markup=False, highlight=False)
    for table in results_tables(report):
        out.print(table)
    for line in notes(report):
        out.print(line, markup=False, highlight=False)
    for extra in (loop_table(report), cold_start_table(report), projection_table(report), small_table(report)):
        if extra is not None:
            out.print(extra)
    if json_path:
        write_json(report, json_path)
        err.print(f"wrote {json_path}", markup=False, highlight=False)
    if plot:
        from .bench.roofline import plot_roofline

        plot_roofline(report, plot)
        err.print(f"wrote {plot}", markup=False, highlight=False)


@app.command()
@friendly
def tune(
    problem: str = typer.Argument(
        ..., help="workload: poisson2d, jacobi2d, heat2d, heat3d, wave3d, derivatives, derivatives-fused, derivatives-y; "
                  "or a problem file NAME.py (each of its passes)"
    ),
    shape: Optional[str] = typer.Option(None, "--shape", help="interior points per axis (default: the GPU bench size)"),
    dtype: Optional[str] = typer.Option(None, help="float32 or float64 (default: the workload's)"),
    budget: float = typer.Option(60.0, help="seconds to spend searching; the best so far wins"),
    store: bool = typer.Option(True, "--store/--no-store", help="record the winner in the tune cache for --strategy auto"),
) -> None:
    """Search CUDA strategies and tile shapes for one workload, or for each pass of a problem file (its linear passes'
    strategies and tiles, its generated passes' schedules); cache the fastest for auto."""
    from .bench.options import tune_workload

    if not problem.endswith(".py"):
        _tune_one(tune_workload(problem, parse_ints(shape, "--shape"), dtype), budget, store)
        return
    from .bench.report import pass_tune_table
    from .bench.tune import tune_passes
    from .bench.workloads import pass_cases
    from .convergence import load_problem_file

    built = load_problem_file(problem).build(shape=parse_ints(shape, "--shape"), dtype=dtype or "float64")
    cases = pass_cases(built)
    for case in cases:
        _tune_one(case, budget, store)
    results = tune_passes(built, budget_s=budget, store=store, progress=lambda msg: err.print(f"[dim]{msg}[/]", highlight=False))
    if not cases and not results:
        raise StencilforgeError(f"{problem} has no pass that tune searches: its steps are solves and one-sided derivatives")
    for result in results:
        out.print(pass_tune_table(result))
        if result.budget_exhausted:
            err.print(f"budget of {budget:g} s spent: not every schedule was tried", markup=False)
        w = result.winner
        if w is None:
            raise StencilforgeError(f"{result.label}: no schedule ran correctly; nothing was cached")
        action = "cached as" if store else "would be cached as"
        out.print(f"winner: {w['label']}, {w['median_ms']:.3f} ms a pass; {action} {result.key}", highlight=False)


def _tune_one(target, budget: float, store: bool) -> None:
    from .bench.report import tune_table
    from .bench.tune import tune as run_tune

    result = run_tune(target, budget_s=budget, store=store, progress=lambda msg: err.print(f"[dim]{msg}[/]", highlight=False))
    out.print(tune_table(result))
    if result.budget_exhausted:
        err.print(f"budget of {budget:g} s spent: not every candidate was tried", markup=False)
    if result.winner is None:
        raise StencilforgeError("no candidate ran correctly; nothing was cached")
    w = result.winner
    tile = "x".join(map(str, w["tile"])) if w.get("tile") else "default tile"
    action = "cached as" if store else "would be cached as"
    strategy = w["resolved_strategy"] or w["strategy"]
    out.print(f"winner: {strategy} {tile}, {w['median_ms']:.3f} ms/step; {action} {result.key}", highlight=False)


def main() -> None:
    app(args=join_multi_values(sys.argv[1:]), prog_name="stencilforge")


if __name__ == "__main__":
    main()
