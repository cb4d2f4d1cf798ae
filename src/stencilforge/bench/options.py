"""The CLI only parses; these helpers turn its strings into bench and tune options."""

from __future__ import annotations

from pathlib import Path

from ..backends import get_backend
from ..errors import StencilforgeError
from ..grid import parse_dtype
from .coldstart import ProblemFile
from .loop import loop_matrix
from .measure import MeasureOptions
from .peers import PEERS, QUICK_CPU, QUICK_GPU
from .projection import projection_matrix
from .small import MATRIX as SMALL
from .suite import BenchOptions
from .workloads import KINDS, Workload, default_matrix, select


def _names(text: str | None) -> list[str] | None:
    return None if text is None else [p.strip() for p in text.split(",") if p.strip()]


def parse_shape(text: str, what: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(p) for p in text.replace(",", "x").split("x") if p)
    except ValueError:
        shape = ()
    if not shape or any(n <= 0 for n in shape):
        raise StencilforgeError(f"{what} needs positive integers like 4096x4096, got {text!r}")
    return shape


def parse_sizes(items: list[str] | None) -> dict[str, tuple[int, ...]]:
    """'heat2d=4096x4096' for one workload, '2d=...' / '3d=...' for every workload of that dimension."""
    sizes = {}
    for item in items or []:
        name, sep, shape = item.partition("=")
        if not sep:
            raise StencilforgeError(f"--size takes NAME=SHAPE (for example heat2d=4096x4096 or 3d=256x256x256), got {item!r}")
        sizes[name.strip()] = parse_shape(shape, f"--size {name}")
    return sizes


def bench_options(
    problems: str | None = None,
    sizes: list[str] | None = None,
    dtypes: str | None = None,
    backend: str = "auto",
    strategies: str | None = None,
    peers: str | None = None,
    quick: bool = False,
    repeats: int | None = None,
    progress=None,
    time_loop: bool = True,
    cold_start: bool | None = None,
    without: str | None = None,
    cold_repeats: int = 1,
) -> BenchOptions:
    """Options for `run_bench` from the CLI's strings; the default matrix follows the backend (GPU or CPU).

    Time-loop rows cover the selected workloads that are time-stepped seed problems (all of them and
    gray_scott without --problems); cold starts the same problems, by default on the CPU without --quick,
    and the problem files (NAME.py) among the names, which are cold-start rows only. Projection rows (a
    solve in each step, against the array libraries' CG) come without --problems or when it names projection;
    small-problem rows (a step's cost on small grids, against array loops) likewise with small."""
    gpu = get_backend(backend).name == "cuda"
    names = _names(problems)
    files = problem_files([n for n in names or [] if n.endswith(".py")], parse_sizes(sizes), _names(dtypes))
    if files and cold_start is False:
        raise StencilforgeError("problem files are timed from a fresh process only: drop --no-cold-start")
    names = [n for n in names if not n.endswith(".py")] if names is not None else None
    projection = projection_matrix(gpu, quick, parse_sizes(sizes)) if names is None or "projection" in names else ()
    small = SMALL if names is None or "small" in names else ()
    names = [n for n in names if n not in ("projection", "small")] if names is not None else None
    loop_names = [n for n in names if n != "gray_scott"] if names is not None else None
    workloads = select(default_matrix(gpu, quick), loop_names, parse_sizes(sizes), _names(dtypes)) if loop_names != [] else []
    loops = loop_matrix(gpu, quick, names, parse_sizes(sizes)) if time_loop or cold_start else ()
    peer_names = _names(peers)
    if peer_names == ["none"]:
        peer_names = []
    unknown = [n for n in peer_names or [] if n not in PEERS]
    if unknown:
        raise StencilforgeError(f"unknown peer {unknown[0]!r}: choose from {', '.join(PEERS)}, or none")
    if strategies and not gpu:
        raise StencilforgeError(f"--strategies applies to the cuda backend, not {get_backend(backend).name}")
    if strategies:
        from ..backends.cuda.codegen import STRATEGIES

        unknown = [s for s in _names(strategies) or [] if s not in (*STRATEGIES, "auto", "fused")]
        if unknown:
            raise StencilforgeError(f"unknown CUDA strategy {unknown[0]!r}: choose from {', '.join(STRATEGIES)}, auto, fused")
    if peer_names is None and quick:
        peer_names = list(QUICK_GPU if gpu else QUICK_CPU)
    if cold_repeats < 1:
        raise StencilforgeError(f"--cold-start-repeats must be at least 1, got {cold_repeats}")
    if repeats is not None and repeats < 1:
        raise StencilforgeError(f"--repeats must be at least 1, got {repeats}")
    measure = MeasureOptions(repeats=repeats or 3, target_s=0.03) if quick else MeasureOptions(repeats=repeats or 5)
    return BenchOptions(
        tuple(workloads), backend=backend, strategies=tuple(_names(strategies) or ()) if strategies else None,
        peers=tuple(peer_names) if peer_names is not None else None, measure=measure,
        copy_bytes=(2**29 if gpu else 2**27) if quick else None, progress=progress,
        loops=loops if time_loop else (),
        cold_start=(*(loops if (cold_start if cold_start is not None else not (gpu or quick)) else ()), *files),
        cold_start_without=tuple(_names(without) or ()), cold_start_repeats=cold_repeats, projection=projection, small=small,
    )


def problem_files(paths: list[str], sizes: dict[str, tuple[int, ...]], dtypes: list[str] | None) -> tuple[ProblemFile, ...]:
    """Cold-start workloads for problem files: shape from --size STEM=SHAPE (default: the file's), float64
    unless --dtypes says otherwise."""
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise StencilforgeError(f"problem file {missing[0]} does not exist")
    return tuple(ProblemFile(p, sizes.get(Path(p).stem), parse_dtype(dt).name) for p in paths for dt in dtypes or ["float64"])


def tune_workload(problem: str, shape: tuple[int, ...] | None, dtype: str | None) -> Workload:
    """The workload `tune` searches: the GPU matrix's shape and dtype unless given."""
    if problem not in KINDS:
        raise StencilforgeError(f"unknown workload {problem!r}: choose from {', '.join(KINDS)}")
    base = next((w for w in default_matrix(True, False) if w.name == problem), None)
    ndim, default_dtype = KINDS[problem][1], KINDS[problem][2]
    if shape is None and base is None:
        raise StencilforgeError(f"give --shape for {problem}")
    if shape is None:
        assert base is not None, "refused above"
        shape = base.shape
    shape = tuple(shape)
    if len(shape) != ndim:
        raise StencilforgeError(f"{problem} needs a {ndim}D shape, got {'x'.join(map(str, shape))}")
    return Workload(problem, shape, parse_dtype(dtype or (base.dtype if base else default_dtype)).name)
