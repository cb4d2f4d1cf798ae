"""The public surface: solve a named problem, apply operators to your own arrays, or solve your own Poisson problem."""

from __future__ import annotations

import functools

from typing import Sequence

import numpy as np

from . import problems
from .backends import get_backend
from .errors import StencilforgeError
from .grid import Grid, parse_dtype
from .plan import Sweep, Term
from .problems import derivatives as _derivatives
from .solvers import PoissonResult, poisson
from .stencil import Stencil
from .timeloop import LoopOptions, Result, run


def solve(
    problem: str,
    shape: Sequence[int] | None = None,
    steps: int | None = None,
    tol: float | None = None,
    dtype: str | None = None,
    backend: str = "auto",
    progress=None,
    check_every: int = 100,
    **params,
) -> Result:
    """Run a named problem to completion and return its final fields and summary."""
    setup = problems.build(problem, shape=shape, dtype=dtype, **params)
    engine = get_backend(backend)
    return run(setup, engine, LoopOptions(steps=steps, tol=tol, check_every=check_every, progress=progress))


def _checked_input(u, backend, ndim: int | None = None):
    dtype = parse_dtype(getattr(u, "dtype", np.float64))
    if ndim is not None and u.ndim != ndim:
        raise StencilforgeError(f"expected a {ndim}D array, got {u.ndim}D")
    return backend.asarray(u, dtype=dtype), dtype


@functools.lru_cache(maxsize=32)
def _bound_sweep(backend: str, stencil: Stencil, grid: Grid):
    """(backend, kernel) for `apply`, built once per backend, stencil and array shape: building binds
    and warms up a compiled kernel, which costs more than applying it."""
    engine = get_backend(backend)
    return engine, engine.sweep(Sweep("out", (Term("u", stencil),)), grid)


def apply(stencil: Stencil, u, backend: str = "numpy"):
    """stencil applied at every point at least `radius` away from the edges of u.

    The result has shape u.shape - 2 * radius: the edges act as ghost layers.
    """
    if not isinstance(stencil, Stencil):
        raise StencilforgeError(f"apply needs a Stencil, got {type(stencil).__name__}")
    dtype, shape = parse_dtype(getattr(u, "dtype", np.float64)), tuple(np.shape(u))
    if len(shape) != stencil.ndim:
        raise StencilforgeError(f"expected a {stencil.ndim}D array, got {len(shape)}D")
    r = stencil.radius
    grid = Grid(tuple(n - 2 * r for n in shape), (1.0,) * len(shape), dtype, r, (0.0,) * len(shape))
    if any(n < 1 for n in grid.shape):
        raise StencilforgeError(f"array of shape {shape} is smaller than the stencil (radius {r})")
    engine, run = _bound_sweep(backend, stencil, grid)
    arr = engine.asarray(u, dtype=dtype)
    out = engine.xp.full(shape, np.nan, dtype=dtype)
    run({"out": out, "u": arr})
    return out[grid.interior]


def derivatives(u, h: float, axis: int = 1, accuracy: int = 2, orders: Sequence[int] = (1, 2), backend: str = "numpy"):
    """First and/or second derivative of a 2D array along one axis, with boundary closures, in one pass."""
    engine = get_backend(backend)
    arr, dtype = _checked_input(u, engine, 2)
    if not h > 0:
        raise StencilforgeError(f"grid spacing h must be positive, got {h}")
    op = _derivatives.operator(axis, h, accuracy, tuple(orders))
    if arr.shape[axis] < op.min_length:
        raise StencilforgeError(f"axis {axis} has {arr.shape[axis]} points; accuracy {accuracy} needs {op.min_length}")
    outs = [engine.xp.full(arr.shape, np.nan, dtype=dtype) for _ in orders]
    engine.axis_operator(op, dtype, arr.shape)(arr, *outs)
    return tuple(outs)
