"""Heat equation with the isotropic 9-point Laplacian.

    u_t = alpha * (u_xx + u_yy)   on the unit square

Forward Euler in time with sf.laplacian9 in space, dt proportional to h^2, so
the time and space errors shrink together and the scheme is second order
(ORDER). The exact solution is a decaying sine mode; the walls are Dirichlet
with that solution evaluated at the ghost points and the current time, so the
walls move with it.
"""

import math

import stencilforge as sf

ORDER = 2
SHAPES = [(16, 16), (24, 24), (32, 32), (48, 48)]
T_END = 1 / 64  # whole steps for every shape of SHAPES: T_END / dt = n^2 / 16

ALPHA = 1.0
COURANT = 0.25  # alpha * dt / h^2; forward Euler with this stencil is stable up to 3/8


def build(shape=None, dtype="float64") -> sf.Problem:
    shape = shape or (256, 256)
    grid = sf.Grid(shape, extent=1.0, dtype=dtype)
    x, y, t = grid.x, grid.y, grid.t
    alpha = sf.Constant("alpha", ALPHA)
    dt = COURANT * grid.spacing[0] ** 2 / ALPHA

    u = sf.Field("u", grid)
    rate = (1 ** 2 + 2 ** 2) * math.pi ** 2 * alpha
    exact = sf.exp(-rate * t) * sf.sin(math.pi * x) * sf.sin(2 * math.pi * y)
    return sf.Problem(
        [sf.Eq(u.next, u + dt * alpha * sf.laplacian9(u))],
        initial={u: exact},
        boundary={u: sf.Dirichlet(exact)},
        exact={u: exact},
        dt=dt,
        steps=round(T_END / dt),
        name="heat9",
    )
