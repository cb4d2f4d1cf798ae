"""The 2D Taylor-Green vortex, by projection: a pressure Poisson solve inside every step.

    u_t + (u . grad) u = -grad p + nu lap u,   div u = 0

on the periodic box [0, 2 pi]^2. Each step (Chorin's projection):

    u* = u + dt (-(u . grad) u + nu lap u)        explicit, one pass
    lap p = div(u*) / dt                           sf.Solve: multigrid, warm-started
    u_next = u* - dt grad p                        one pass, reading p at neighbours

with centred differences on one grid (the 5-point Laplacian for p, centred
gradient and divergence: an approximate projection, exact to O(h^2)). The
exact solution decays in place,

    u = cos x sin y e^(-2 nu t),   v = -sin x cos y e^(-2 nu t),

and with dt proportional to h^2 the splitting's O(dt) error is O(h^2) too:
second order (ORDER).
"""

import math

import stencilforge as sf

ORDER = 2
SHAPES = [(16, 16), (24, 24), (32, 32), (48, 48)]
T_END = math.pi ** 2 / 20  # whole steps for every shape: T_END / dt = n^2 / 16

NU = 1.0
COURANT = 0.2  # nu * dt / h^2; the explicit step is stable up to 1/4


def build(shape=None, dtype="float64") -> sf.Problem:
    shape = shape or (64, 64)
    grid = sf.Grid(shape, extent=2 * math.pi, dtype=dtype)
    x, y, t = grid.x, grid.y, grid.t
    dt = COURANT * grid.spacing[0] ** 2 / NU
    nu = sf.Constant("nu", NU)

    u, v = sf.Field("u", grid), sf.Field("v", grid)
    us, vs, p = (sf.Field(name, grid, levels=1) for name in ("us", "vs", "p"))  # u*, v* and the pressure
    decay = sf.exp(-2 * nu * t)
    exact_u, exact_v = sf.cos(x) * sf.sin(y) * decay, -sf.sin(x) * sf.cos(y) * decay
    return sf.Problem(
        [
            sf.Eq(us, u + dt * (-u * sf.d(u, "x") - v * sf.d(u, "y") + nu * sf.laplacian(u))),
            sf.Eq(vs, v + dt * (-u * sf.d(v, "x") - v * sf.d(v, "y") + nu * sf.laplacian(v))),
            sf.Solve(p, (sf.d(us, "x") + sf.d(vs, "y")) / dt),
            sf.Eq(u.next, us - dt * sf.d(p, "x")),
            sf.Eq(v.next, vs - dt * sf.d(p, "y")),
        ],
        initial={u: exact_u, v: exact_v},
        boundary={f: sf.Periodic() for f in (u, v, us, vs, p)},
        exact={u: exact_u, v: exact_v},
        dt=dt,
        steps=round(T_END / dt),
        name="taylor_green",
    )
