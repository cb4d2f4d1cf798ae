"""del^2 u = f on the unit square by Jacobi iteration on the 5-point stencil, with the equation API.

Jacobi is derived from the Laplacian stencil A = D + (A - D):
u <- D^-1 (f - (A - D) u), so the same code serves any star Laplacian.
Default case: u = sin(pi x) sin(pi y), f = -2 pi^2 u, Dirichlet from u, float64
(float32 Jacobi stalls near a relative residual of 1e-5), iterate to 1e-6.
"""

from __future__ import annotations

import math

from ..boundary import Dirichlet
from ..errors import StencilforgeError
from ..grid import check_shape
from ..ir.nodes import Eq, Field, Grid, sin
from ..ir.operators import apply_stencil as stencil
from ..plan import Sweep, Term
from ..problem import Problem
from ..stencil import Stencil

NDIM = 2
DEFAULT_SHAPE = (128, 128)
PARAMS: tuple[str, ...] = ()


def jacobi_sweep(laplacian: Stencil, with_rhs: bool) -> Sweep:
    """The Jacobi sweep as a plan, for any star Laplacian (the bench's jacobi2d and the 3D Poisson use it)."""
    centre = laplacian.as_dict()[(0,) * laplacian.ndim]
    off_diagonal = Stencil.from_dict({o: c for o, c in laplacian.entries if any(o)})
    terms = [Term("u", off_diagonal.scaled(-1 / centre))]
    if with_rhs:
        terms.append(Term("f", Stencil.identity(laplacian.ndim).scaled(1 / centre)))
    return Sweep("u_new", tuple(terms))


def problem(shape=DEFAULT_SHAPE, dtype="float64") -> Problem:
    """Jacobi for A u = f with A the 5-point Laplacian: u.next = D^-1 (f - (A - D) u)."""
    grid = unit_grid(shape, dtype, NDIM, "poisson2d")
    x, y = grid.x, grid.y
    return jacobi_problem(grid, sin(math.pi * y) * sin(math.pi * x), -2.0 * math.pi**2 * sin(math.pi * y) * sin(math.pi * x),
                          "poisson2d")


def unit_grid(shape, dtype, ndim: int, name: str) -> Grid:
    """The unit box's interior nodes, its walls one spacing outside them."""
    shape = tuple(shape)
    if len(shape) != ndim:
        raise StencilforgeError(f"{name} needs a {ndim}D shape, got {shape}")
    check_shape(shape, 1)
    h = [1.0 / (n + 1) for n in shape]
    return Grid(shape, spacing=h, origin=h, dtype=dtype)


def jacobi_problem(grid: Grid, exact, rhs, name: str) -> Problem:
    """Jacobi for the star Laplacian's A u = `rhs`, Dirichlet walls and exact solution `exact`: u.next = D^-1 (f - (A - D) u)."""
    u, f = Field("u", grid), Field("f", grid, levels=1)
    lap = Stencil.laplacian(grid.ndim, 1, grid.spacing)
    centre = lap.as_dict()[(0,) * grid.ndim]
    off_diagonal = Stencil.from_dict({o: c for o, c in lap.entries if any(o)})
    return Problem(
        [Eq(u.next, stencil(off_diagonal.scaled(-1 / centre), u) + (1 / centre) * f)],
        initial={f: rhs}, boundary={u: Dirichlet(exact)}, exact={u: exact},
        residual=f - stencil(lap, u), residual_scale=f, steps=200_000, name=name,
    )
