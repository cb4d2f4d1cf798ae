"""del^2 u = f on the unit square by Jacobi iteration on the 5-point stencil (seed 000).

Jacobi is derived from the Laplacian stencil A = D + (A - D):
u <- D^-1 (f - (A - D) u), so the same code serves any star Laplacian.
Default case: u = sin(pi x) sin(pi y), f = -2 pi^2 u, Dirichlet from u, float64
(float32 Jacobi stalls near a relative residual of 1e-5), iterate to 1e-6.
"""

from __future__ import annotations

import numpy as np

from ..boundary import Dirichlet
from ..errors import StencilforgeError
from ..grid import Grid
from ..plan import Sweep, Term
from ..stencil import Stencil
from .base import Setup, padded

NDIM = 2
DEFAULT_SHAPE = (128, 128)
PARAMS = ()


def exact_u(x, y, t=0.0):
    return np.sin(np.pi * x) * np.sin(np.pi * y)


def rhs(x, y):
    return -2.0 * np.pi**2 * np.sin(np.pi * x) * np.sin(np.pi * y)


def jacobi_sweep(laplacian: Stencil, with_rhs: bool) -> Sweep:
    centre = laplacian.as_dict()[(0,) * laplacian.ndim]
    off_diagonal = Stencil.from_dict({o: c for o, c in laplacian.entries if any(o)})
    terms = [Term("u", off_diagonal.scaled(-1 / centre))]
    if with_rhs:
        terms.append(Term("f", Stencil.identity(laplacian.ndim).scaled(1 / centre)))
    return Sweep("u_new", tuple(terms))


def build(shape=DEFAULT_SHAPE, dtype="float64") -> Setup:
    shape = tuple(shape)
    if len(shape) != NDIM:
        raise StencilforgeError(f"poisson2d needs a 2D shape, got {shape}")
    grid = Grid.unit_box(shape, dtype, ghost=1)
    lap = Stencil.laplacian(2, 1, grid.spacing)
    x, y = grid.mesh()
    boundary = Dirichlet(exact_u)
    u = padded(grid, 0.0)
    boundary.bind(grid)(u, 0.0)
    f = padded(grid, rhs(x, y))
    residual = Sweep("r", (Term("f", Stencil.identity(2)), Term("u", lap.scaled(-1))))
    xi, yi = grid.mesh(ghosts=False)
    return Setup(
        name="poisson2d",
        grid=grid,
        fields={"u": u, "u_new": u.copy(), "f": f},
        dt=1.0,
        default_steps=200_000,
        solution="u",
        sweep=jacobi_sweep(lap, with_rhs=True),
        swap=("u", "u_new"),
        boundaries={"u": boundary},
        exact=lambda t: {"u": exact_u(xi, yi)},
        residual=residual,
        default_tol=1e-6,
        rhs_norm=float(np.linalg.norm(rhs(xi, yi).astype(grid.dtype).astype(np.float64))),
    )
