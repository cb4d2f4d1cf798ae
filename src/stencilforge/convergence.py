"""Grid-refinement checks of problem files, and loading a problem file by path.

A problem file is a Python module with `build(shape=None, dtype="float64") -> Problem`;
the examples also give `ORDER`, `SHAPES` and `T_END` for `observed_order`.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Callable, Sequence

from .errors import StencilforgeError
from .problem import Problem
from .runner import run
from .verification import Check, observed_order as fit_slope


def _steps(problem: Problem, t_end: float) -> int:
    """The number of steps that reach t_end exactly: a fractional count would compare errors at different times.

    A dt given as a Constant counts with its declared value (no parameters are overridden here)."""
    dt = problem.dt.value
    steps = t_end / dt
    if not math.isfinite(steps) or round(steps) < 1 or abs(steps - round(steps)) > 1e-9 * max(1.0, steps):
        raise StencilforgeError(f"{problem.name}: t_end {t_end!r} is not a whole number of steps of dt {dt!r} (t_end/dt = {steps!r})")
    return round(steps)


def observed_order(
    module_or_build: ModuleType | Callable[..., Problem],
    shapes: Sequence,
    t_end: float,
    backend: str = "numpy",
    field: str | None = None,
) -> tuple[float, list[float], list[float]]:
    """(slope, spacings, errors): the least-squares slope of log(max-norm error at t_end) against log(spacing).

    `module_or_build` is a problem file's module (its `build` is used) or a build function
    itself. The error is `field`'s, or the largest over the fields with an exact solution.
    """
    build = getattr(module_or_build, "build", module_or_build)
    if not callable(build):
        raise StencilforgeError(f"{module_or_build!r} is neither a build function nor a module with one")
    if len(shapes) < 2:
        raise StencilforgeError(f"an observed order needs at least two shapes, got {list(shapes)!r}")
    hs, errors = [], []
    for shape in shapes:
        problem = build(shape)
        if not problem.exact:
            raise StencilforgeError(f"{problem.name} has no exact solution to measure an error against")
        if field is not None and field not in problem.exact:
            raise StencilforgeError(f"{problem.name} has no exact solution for {field!r} (it has: {', '.join(problem.exact)})")
        result = run(problem, steps=_steps(problem, t_end), backend=backend)
        errs = result.summary["errors"]
        error = errs[field] if field is not None else max(errs.values())
        if not (math.isfinite(error) and error > 0):
            raise StencilforgeError(f"{problem.name} at shape {tuple(problem.grid.shape)}: error {error!r} has no logarithm")
        hs.append(max(problem.grid.spacing))
        errors.append(error)
    return fit_slope(hs, errors), hs, errors


def _failure(path: Path, exc: Exception) -> tuple[str, str]:
    """(`FILE:LINE`, what went wrong) for an exception raised by a problem file's code: the innermost line
    of the file it passed through, and the error's first line, with its type unless it is one of ours."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
    text = str(exc)
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).resolve() == path.resolve():
        lines, text = [exc.lineno], str(exc.msg)  # the file itself does not compile: no frame of it ran
    where = f"{path}:{lines[-1]}" if lines and lines[-1] is not None else str(path)
    message = next(iter(text.strip().splitlines()), "")
    if isinstance(exc, StencilforgeError):
        return where, message
    return where, f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def load_problem_file(path) -> ModuleType:
    """Import a problem file by path; a missing file, an error while importing it (a syntax error, an
    ImportError, any exception) or a missing `build` is a one-line error naming the file's line."""
    path = Path(path)
    if not path.is_file():
        raise StencilforgeError(f"problem file {path} does not exist")
    name = f"stencilforge_problem_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise StencilforgeError(f"problem file {path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise StencilforgeError(": ".join(_failure(path, exc))) from None
    except BaseException:
        del sys.modules[name]
        raise
    if not callable(getattr(module, "build", None)):
        del sys.modules[name]
        raise StencilforgeError(f"problem file {path} defines no build(shape=None, dtype='float64') function")
    return module


def checked_build(path, build: Callable[..., Problem]) -> Callable[..., Problem]:
    """`build` of the problem file at `path`, whose exceptions become one line naming the file's line,
    and which must return an sf.Problem: what the CLI calls, so a mistake in the file is no traceback."""
    path = Path(path)

    @functools.wraps(build)
    def call(*args, **kwargs) -> Problem:
        try:
            problem = build(*args, **kwargs)
        except Exception as exc:
            where, what = _failure(path, exc)
            raise StencilforgeError(f"{where}: in {build.__name__}(): {what}") from None
        if not isinstance(problem, Problem):
            line = getattr(getattr(build, "__code__", None), "co_firstlineno", None)
            raise StencilforgeError(f"{path}{f':{line}' if line else ''}: {build.__name__}() returned "
                                    f"{type(problem).__name__}, not an sf.Problem")
        return problem

    return call


def check_file(path, backend="numpy") -> Check:
    """A problem file's observed order against its ORDER, from its SHAPES and T_END, within 0.1
    (its `build_manufactured`, where it has one, is the problem the check solves)."""
    module = load_problem_file(path)
    missing = [name for name in ("ORDER", "SHAPES", "T_END") if not hasattr(module, name)]
    if missing:
        raise StencilforgeError(f"problem file {path} needs {', '.join(missing)} to be verified")
    build = checked_build(path, getattr(module, "build_manufactured", module.build))
    slope, _, errors = observed_order(build, module.SHAPES, module.T_END, backend=backend)
    return Check(Path(path).stem, float(module.ORDER), slope, tuple(errors), tolerance=0.1)
