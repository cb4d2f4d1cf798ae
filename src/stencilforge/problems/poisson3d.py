"""del^2 u = f on the unit cube: poisson2d's case one dimension up, solved by multigrid or Jacobi.

u = sin(pi x) sin(pi y) sin(pi z), f = -3 pi^2 u, Dirichlet from u, float64.
"""

from __future__ import annotations

import math

from ..ir.nodes import sin
from ..problem import Problem
from .poisson2d import jacobi_problem, unit_grid

NDIM = 3
DEFAULT_SHAPE = (64, 64, 64)
PARAMS: tuple[str, ...] = ()


def problem(shape=DEFAULT_SHAPE, dtype="float64") -> Problem:
    """Jacobi for A u = f with A the 7-point Laplacian (`poisson2d.problem` one dimension up): u's walls and f from
    sin(pi z) sin(pi y) sin(pi x), multiplied in that order."""
    grid = unit_grid(shape, dtype, NDIM, "poisson3d")
    z, y, x = grid.coordinates
    exact = sin(math.pi * z) * sin(math.pi * y) * sin(math.pi * x)
    return jacobi_problem(grid, exact, -3.0 * math.pi**2 * exact, "poisson3d")
