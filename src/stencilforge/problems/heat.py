"""Heat equation u_t = alpha del^2 u by explicit FTCS in 2D and 3D (seeds 003 and 001).

The step is one stencil, I + alpha dt L. The exact solution
u = exp(-d pi^2 alpha t) prod_a sin(pi (x_a + 1/4)) gives time-dependent
Dirichlet values on the walls. The stability limit is read off the stencil's
symbol: alpha dt max|L(k)| <= 2.
"""

from __future__ import annotations

import numpy as np

from ..boundary import Dirichlet
from ..errors import StencilforgeError
from ..grid import Grid
from ..plan import Sweep, Term
from ..stencil import Stencil
from .base import Setup, padded, positive, stable_dt

PARAMS = ("alpha", "dt")
DEFAULT_SHAPES = {2: (512, 512), 3: (128, 128, 128)}


def decay(alpha: float, ndim: int):
    return lambda t: np.exp(-ndim * np.pi**2 * alpha * t)


def exact(alpha: float, ndim: int):
    factor = decay(alpha, ndim)

    def u(*args):
        *xs, t = args
        value = factor(t)
        for x in xs:
            value = value * np.sin(np.pi * (x + 0.25))
        return value

    return u


def dt_limit(lap: Stencil, alpha: float) -> float:
    return 2.0 / (alpha * lap.symbol_max())


def build(ndim: int, shape=None, dtype="float32", alpha: float = 1.0, dt: float | None = None) -> Setup:
    shape = tuple(shape or DEFAULT_SHAPES[ndim])
    if len(shape) != ndim:
        raise StencilforgeError(f"heat{ndim}d needs a {ndim}D shape, got {shape}")
    alpha = positive("alpha", alpha)
    grid = Grid.unit_box(shape, dtype, ghost=1)
    lap = Stencil.laplacian(ndim, 1, grid.spacing)
    step_dt = stable_dt(dt, dt_limit(lap, alpha), 0.9, f"heat{ndim}d with alpha={alpha:g} on this grid")
    u_exact = exact(alpha, ndim)
    boundary = Dirichlet(u_exact, time_factor=decay(alpha, ndim))
    u = padded(grid, u_exact(*grid.mesh(), 0.0))
    interior_mesh = grid.mesh(ghosts=False)
    return Setup(
        name=f"heat{ndim}d",
        grid=grid,
        fields={"u": u, "u_new": u.copy()},
        dt=step_dt,
        default_steps=1000,
        solution="u",
        sweep=Sweep("u_new", (Term("u", Stencil.identity(ndim) + lap.scaled(alpha * step_dt)),)),
        swap=("u", "u_new"),
        boundaries={"u": boundary},
        exact=lambda t: {"u": u_exact(*interior_mesh, t)},
        params={"alpha": alpha, "dt": step_dt},
    )
