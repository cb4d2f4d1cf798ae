"""Heat by backward Euler: one multigrid solve per step, at a time step far above the explicit limit.

    u_t = alpha (u_xx + u_yy)   on the unit square

Each step solves (1 - dt alpha lap) u_next = u, written as

    sf.Solve(u.next, u, a=1, b=dt * alpha)

with the 5-point Laplacian and Dirichlet walls from the exact solution at the
new time. Forward Euler needs dt <= h^2 / (4 alpha); here dt = h / 4, n times
that on an n x n grid (80x at 80^2), and backward Euler stays stable. With
dt proportional to h the O(dt) error of the time step dominates the O(h^2) of
space: first order (ORDER), the order in time. The exact solution is the
slowest sine mode, decaying as exp(-2 pi^2 alpha t).
"""

import math

import stencilforge as sf

ORDER = 1
SHAPES = [(20, 20), (40, 40), (80, 80)]
T_END = 0.1  # whole steps for every shape: T_END / dt = 0.4 n

ALPHA = 1.0
DT_PER_H = 0.25  # dt / h


def build(shape=None, dtype="float64") -> sf.Problem:
    shape = shape or (128, 128)
    grid = sf.Grid(shape, extent=1.0, dtype=dtype)
    x, y, t = grid.x, grid.y, grid.t
    alpha = sf.Constant("alpha", ALPHA)
    dt = DT_PER_H * grid.spacing[0]

    u = sf.Field("u", grid)
    exact = sf.exp(-2 * math.pi ** 2 * alpha * t) * sf.sin(math.pi * x) * sf.sin(math.pi * y)
    return sf.Problem(
        [sf.Solve(u.next, u, a=1, b=dt * alpha)],
        initial={u: exact},
        boundary={u: sf.Dirichlet(exact)},
        exact={u: exact},
        dt=dt,
        steps=round(T_END / dt),
        name="implicit_heat",
    )
