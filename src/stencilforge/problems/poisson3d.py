"""del^2 u = f on the unit cube: poisson2d's case one dimension up, solved by multigrid or Jacobi.

u = sin(pi x) sin(pi y) sin(pi z), f = -3 pi^2 u, Dirichlet from u, float64.
"""

from __future__ import annotations

import math

import numpy as np

from ..boundary import Dirichlet
from ..errors import StencilforgeError
from ..grid import Grid
from ..ir.nodes import sin
from ..plan import Setup, Sweep, Term
from ..problem import Problem
from ..stencil import Stencil
from .base import padded
from .poisson2d import jacobi_problem, jacobi_sweep, unit_grid

NDIM = 3
DEFAULT_SHAPE = (64, 64, 64)
PARAMS: tuple[str, ...] = ()


def exact_u(z, y, x, t=0.0):
    """In array-axis order (z first), as grid.mesh gives the coordinates; the wall calls it by name."""
    return np.sin(np.pi * z) * np.sin(np.pi * y) * np.sin(np.pi * x)


def rhs(z, y, x):
    return -3.0 * np.pi**2 * exact_u(z, y, x)


def problem(shape=DEFAULT_SHAPE, dtype="float64") -> Problem:
    """Jacobi for A u = f with A the 7-point Laplacian (`poisson2d.problem` one dimension up); the same values as
    `build`'s arrays: u's walls and f from sin(pi z) sin(pi y) sin(pi x), multiplied in that order."""
    grid = unit_grid(shape, dtype, NDIM, "poisson3d")
    z, y, x = grid.coordinates
    exact = sin(math.pi * z) * sin(math.pi * y) * sin(math.pi * x)
    return jacobi_problem(grid, exact, -3.0 * math.pi**2 * exact, "poisson3d")


def build(shape=DEFAULT_SHAPE, dtype="float64") -> Setup:
    shape = tuple(shape)
    if len(shape) != NDIM:
        raise StencilforgeError(f"poisson3d needs a 3D shape, got {shape}")
    grid = Grid.unit_box(shape, dtype, ghost=1)
    lap = Stencil.laplacian(3, 1, grid.spacing)
    boundary = Dirichlet(exact_u)
    u = padded(grid, 0.0)
    boundary.bind(grid)(u, 0.0)
    f = padded(grid, rhs(*grid.mesh()))
    residual = Sweep("r", (Term("f", Stencil.identity(3)), Term("u", lap.scaled(-1))))
    inner = grid.mesh(ghosts=False)
    return Setup(
        name="poisson3d",
        grid=grid,
        fields={"u": u, "u_new": u.copy(), "f": f},
        dt=1.0,
        default_steps=200_000,
        solution="u",
        sweep=jacobi_sweep(lap, with_rhs=True),
        swap=("u", "u_new"),
        boundaries={"u": boundary},
        exact=lambda t: {"u": exact_u(*inner)},
        residual=residual,
        default_tol=1e-6,
        rhs_norm=float(np.linalg.norm(rhs(*inner).astype(grid.dtype).astype(np.float64))),
    )
