"""Heat by Crank-Nicolson: one multigrid solve per step, second order in time at 100x the explicit time step.

    u_t = alpha (u_xx + u_yy)   on the unit square

The trapezoidal rule averages the Laplacian of the old and the new level,

    (1 - dt alpha / 2 lap) u_next = (1 + dt alpha / 2 lap) u,

written as sf.Solve(u.next, u + dt * alpha / 2 * sf.laplacian(u), a=1, b=dt * alpha / 2)
with the 5-point Laplacian and Dirichlet walls from the exact solution (at the
old time on the right, the new one in the solve). Forward Euler needs
dt <= h^2 / (4 alpha); here dt = h / 4, n times that on an n x n grid (100x at
100^2). With dt proportional to h both the O(dt^2) of the time step and the
O(h^2) of space shrink as h^2: second order (ORDER), where backward Euler
(implicit_heat.py) is first order. The exact solution is the slowest sine mode.
"""

import math

import stencilforge as sf

ORDER = 2
SHAPES = [(25, 25), (50, 50), (100, 100)]
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
    half = dt * alpha / 2
    return sf.Problem(
        [sf.Solve(u.next, u + half * sf.laplacian(u), a=1, b=half)],
        initial={u: exact},
        boundary={u: sf.Dirichlet(exact)},
        exact={u: exact},
        dt=dt,
        steps=round(T_END / dt),
        name="crank_nicolson",
    )
