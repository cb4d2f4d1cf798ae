"""Heat equation u_t = alpha del^2 u by explicit FTCS in 2D and 3D, written with the equation API.

    u.next = u + alpha dt laplacian(u)

on the unit box with its walls one spacing outside the first and last points.
The exact solution u = exp(-d pi^2 alpha t) prod_a sin(pi (x_a + 1/4)) gives
the initial values and time-dependent Dirichlet walls (its time factor
scales the walls' spatial part, evaluated once). The stability limit is read
off the stencil's symbol: alpha dt max|L(k)| <= 2.
"""

from __future__ import annotations

import math

from ..boundary import Dirichlet
from ..errors import StencilforgeError
from ..grid import check_shape
from ..ir.nodes import Constant, Eq, Field, Grid, exp, sin
from ..ir.operators import laplacian
from ..problem import Problem
from ..stencil import Stencil
from .base import positive, stable_dt

PARAMS = ("alpha", "dt")
DEFAULT_SHAPES = {2: (512, 512), 3: (128, 128, 128)}


def dt_limit(lap: Stencil, alpha: float) -> float:
    return 2.0 / (alpha * lap.symbol_max())


def problem(ndim: int, shape=None, dtype="float32", alpha: float = 1.0, dt: float | None = None, storage=None) -> Problem:
    """`storage`: the field's storage dtype (`Field`), e.g. "float16"; such a problem runs as generated passes."""
    shape = tuple(shape or DEFAULT_SHAPES[ndim])
    if len(shape) != ndim:
        raise StencilforgeError(f"heat{ndim}d needs a {ndim}D shape, got {shape}")
    check_shape(shape, 1)
    alpha = positive("alpha", alpha)
    h = [1.0 / (n + 1) for n in shape]
    grid = Grid(shape, spacing=h, origin=h, dtype=dtype)
    step_dt = stable_dt(dt, dt_limit(Stencil.laplacian(ndim, 1, grid.spacing), alpha), 0.9,
                        f"heat{ndim}d with alpha={alpha:g} on this grid")
    u = Field("u", grid, storage=storage)
    a, k = Constant("alpha", alpha), Constant("dt", step_dt)
    mode = None
    for x in grid.coordinates:
        s = sin(math.pi * (x + 0.25))
        mode = s if mode is None else mode * s
    exact = exp(-ndim * math.pi**2 * a * grid.t) * mode
    return Problem(
        [Eq(u.next, u + (a * k) * laplacian(u))],
        initial={u: exact}, boundary={u: Dirichlet(exact)}, exact={u: exact},
        dt=k, steps=1000, name=f"heat{ndim}d",
    )
