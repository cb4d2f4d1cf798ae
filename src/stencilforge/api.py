"""The public surface: solve a named problem, apply operators to your own arrays, or solve your own Poisson problem."""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from . import problems
from .backends import get_backend
from .errors import StencilforgeError
from .grid import Grid, parse_dtype
from .interop import backend_for, like, native, to_module
from .plan import Sweep, Term
from .stencil import Stencil
from .timeloop import Result


def solve(
    problem: str,
    shape: Sequence[int] | None = None,
    steps: int | None = None,
    tol: float | None = None,
    dtype: str | None = None,
    backend: str = "auto",
    progress=None,
    check_every: int = 100,
    method: str | None = None,
    keep_finite: bool = True,
    **params,
) -> Result:
    """Run a named problem to completion and return its final fields and summary, as `stencilforge run` does:
    poisson2d and poisson3d by multigrid (`steps` caps its cycles) unless `method="jacobi"` (to `problems.JACOBI_TOL`
    where neither `steps` nor `tol` is given); a problem of equations through `sf.run`, as a problem of your own
    (`keep_finite` as there)."""
    if method not in (None, "multigrid", "jacobi"):
        raise StencilforgeError(f"method must be multigrid or jacobi, got {method!r}")
    if method is not None and problem not in problems.POISSON:
        raise StencilforgeError(f"method applies to {', '.join(problems.POISSON)}, not {problem}")
    if not (problem in problems.POISSON and method != "jacobi"):
        from .runner import run as run_problem

        if problem in problems.POISSON and steps is None and tol is None:
            tol = problems.JACOBI_TOL
        return run_problem(problems.problem(problem, shape, dtype, **params)[0], steps, tol, backend, check_every=check_every,
                           progress=progress, keep_finite=keep_finite)
    if params:
        raise StencilforgeError(f"{problem} takes no parameters, got {', '.join(sorted(params))}")
    made, built = problems.problem(problem, shape, dtype)
    solved = problems.multigrid(made, built, backend=backend, tol=tol, max_cycles=steps)
    grid = made.grid
    return Result({"u": solved.u}, solved.summary, {name: grid.values(name) for name in grid.axis_names})


def _host_or_device(u):
    """(native array, dtype) of an input: its own dtype for arrays, float64 for lists and numbers."""
    arr = native(u)
    return arr, parse_dtype(arr.dtype if hasattr(u, "dtype") else np.float64)


def _on(engine, arr, dtype):
    """A native array as the backend's input: a device array reaches a CPU backend through host memory."""
    return engine.asarray(to_module(arr, np) if engine.xp is np else arr, dtype=dtype)


@functools.lru_cache(maxsize=32)
def _bound_sweep(backend: str, stencil: Stencil, grid: Grid):
    """(backend, kernel) for `apply`, built once per backend, stencil and array shape: building binds
    and warms up a compiled kernel, which costs more than applying it."""
    engine = get_backend(backend)
    return engine, engine.sweep(Sweep("out", (Term("u", stencil),)), grid)


def apply(stencil: Stencil, u, backend: str = "auto"):
    """stencil applied at every point at least `radius` away from the edges of u.

    The result has shape u.shape - 2 * radius: the edges act as ghost layers. u may be any array with
    `__dlpack__` (NumPy, PyTorch, JAX, CuPy); the result is of u's kind and on u's device. `auto` computes
    where u lives: cuda for CUDA memory, numba for host memory.
    """
    if not isinstance(stencil, Stencil):
        raise StencilforgeError(f"apply needs a Stencil, got {type(stencil).__name__}")
    arr, dtype = _host_or_device(u)
    shape = tuple(arr.shape)
    if len(shape) != stencil.ndim:
        raise StencilforgeError(f"expected a {stencil.ndim}D array, got {len(shape)}D")
    r = stencil.radius
    grid = Grid(tuple(n - 2 * r for n in shape), (1.0,) * len(shape), dtype, r, (0.0,) * len(shape))
    if any(n < 1 for n in grid.shape):
        raise StencilforgeError(f"array of shape {shape} is smaller than the stencil (radius {r})")
    engine, run = _bound_sweep(backend_for(backend, [arr]), stencil, grid)
    out = engine.xp.full(shape, np.nan, dtype=dtype)
    run({"out": out, "u": _on(engine, arr, dtype)})
    return like(out[grid.interior], u)


def derivatives(u, h: float, axis: int = 1, accuracy: int = 2, orders: Sequence[int] = (1, 2), backend: str = "auto"):
    """First and/or second derivative of a 2D array along one axis, with boundary closures, in one pass.

    u may be any array with `__dlpack__`; the derivatives are of u's kind and on u's device, and `auto`
    computes where u lives (as for `apply`)."""
    arr, dtype = _host_or_device(u)
    engine = get_backend(backend_for(backend, [arr]))
    if arr.ndim != 2:
        raise StencilforgeError(f"expected a 2D array, got {arr.ndim}D")
    if not h > 0:
        raise StencilforgeError(f"grid spacing h must be positive, got {h}")
    from .problems.derivatives import operator

    arr = _on(engine, arr, dtype)
    op = operator(axis, h, accuracy, tuple(orders))
    if arr.shape[axis] < op.min_length:
        raise StencilforgeError(f"axis {axis} has {arr.shape[axis]} points; accuracy {accuracy} needs {op.min_length}")
    outs = [engine.xp.full(arr.shape, np.nan, dtype=dtype) for _ in orders]
    engine.axis_operator(op, dtype, arr.shape)(arr, *outs)
    return tuple(like(out, u) for out in outs)
