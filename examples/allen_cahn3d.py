"""A travelling front of the 3D Allen-Cahn (Nagumo) equation.

    u_t = D (u_xx + u_yy + u_zz) + u (1 - u) (u - a)

in the unit cube. The cubic reaction has two stable states, 0 and 1; for
a < 1/2 the state 1 invades. The planar front

    u = 1 / (1 + exp(-(n.x - s - c t) / w)),   w = sqrt(2 D),   c = (a - 1/2) w

solves the equation exactly for any unit normal n, so it is the reference,
with no forcing. It is set oblique to the grid; the walls are Dirichlet with
the front evaluated at the ghost points, so it slides through them.

Forward Euler with the 7-point Laplacian and dt proportional to h^2: second
order (ORDER).
"""

import math

import stencilforge as sf

ORDER = 2
SHAPES = [(16, 16, 16), (24, 24, 24), (32, 32, 32)]
T_END = 0.5  # whole steps for every shape with n divisible by 2: T_END / dt = n^2 / 4

D = 0.05
COURANT = 0.1  # D * dt / h^2; forward Euler with the 3D star is stable up to 1/6
NORMAL = (2 / 3, 2 / 3, 1 / 3)  # (z, y, x) components of the front's unit normal
START = 0.9  # where the front crosses at t = 0, along the normal


def build(shape=None, dtype="float64") -> sf.Problem:
    shape = shape or (64, 64, 64)
    grid = sf.Grid(shape, extent=1.0, dtype=dtype)
    t = grid.t
    a = sf.Constant("a", 0.25)
    dt = COURANT * grid.spacing[0] ** 2 / D

    width = math.sqrt(2 * D)
    speed = (a - 0.5) * width
    along = sum(n * c for n, c in zip(NORMAL, grid.coordinates))
    exact = 1 / (1 + sf.exp(-(along - START - speed * t) / width))

    u = sf.Field("u", grid)
    return sf.Problem(
        [sf.Eq(u.next, u + dt * (D * sf.laplacian(u) + u * (1 - u) * (u - a)))],
        initial={u: exact},
        boundary={u: sf.Dirichlet(exact)},
        exact={u: exact},
        dt=dt,
        steps=round(T_END / dt),
        name="allen_cahn3d",
    )
