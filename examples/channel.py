"""Channel flow driven by a uniform body force, by projection: step 12 of the "12 steps to Navier-Stokes" course,
with the pressure solved inside every step (sf.Solve) instead of by a fixed number of Jacobi sweeps.

    u_t + (u . grad) u = -grad p + nu lap u + F e_x,   div u = 0

on [0, 2) x [0, 1], periodic along x, no-slip walls at y = 0 and y = 1. Each step:

    u* = u + dt (-(u . grad) u + nu lap u + F)     explicit, centred differences
    lap p = div(u*) / dt                            sf.Solve: periodic along x, Neumann at the walls
    u_next = u* - dt grad p

From rest the flow approaches plane Poiseuille flow, u = F / (2 nu) y (1 - y), v = 0, p constant, with the
slowest mode decaying as exp(-pi^2 nu t). The grid's y points are the nodes between the walls (the walls are the
Dirichlet ghost values), so the centred second difference of the parabola is exact: the steady profile is a
fixed point of the discrete step, to rounding (tests/test_solve.py).
"""

import math

import numpy as np

import stencilforge as sf

NU, FORCE = 0.1, 1.0
T_STEADY = 8.0  # exp(-pi^2 nu T) < 4e-4: the profile within about 4e-4 of its height


def poiseuille(y):
    """The steady profile u(y)."""
    return FORCE / (2 * NU) * y * (1 - y)


def build(shape=None, dtype="float64", start="rest") -> sf.Problem:
    """`start`: "rest", "steady" (the Poiseuille profile, which the step keeps) or "perturbed" (the profile with a
    flow along x that varies in x, and a cross flow: not divergence-free, so the first solves have work to do)."""
    ny, nx = shape or (15, 32)
    spacing = (1.0 / (ny + 1), 2.0 / nx)
    grid = sf.Grid((ny, nx), spacing=spacing, origin=(spacing[0], 0.0), dtype=dtype)
    dt = 0.2 * min(spacing) ** 2 / NU
    nu, force = sf.Constant("nu", NU), sf.Constant("F", FORCE)

    u, v = sf.Field("u", grid), sf.Field("v", grid)
    us, vs, p = (sf.Field(name, grid, levels=1) for name in ("us", "vs", "p"))  # u*, v* and the pressure
    wall = (sf.Dirichlet(0.0), sf.Periodic())  # per axis, in array order: y (no slip), x (periodic)

    def momentum(w, forcing):
        return w + dt * (-u * sf.d(w, "x") - v * sf.d(w, "y") + nu * sf.laplacian(w) + forcing)

    bump = sf.sin(math.pi * grid.x) * grid.y * (1 - grid.y)
    initial = {"rest": {}, "steady": {u: force / (2 * nu) * grid.y * (1 - grid.y)},
               "perturbed": {u: force / (2 * nu) * grid.y * (1 - grid.y) + bump, v: 0.5 * bump}}[start]
    return sf.Problem(
        [
            sf.Eq(us, momentum(u, force)),
            sf.Eq(vs, momentum(v, 0.0)),
            sf.Solve(p, (sf.d(us, "x") + sf.d(vs, "y")) / dt),
            sf.Eq(u.next, us - dt * sf.d(p, "x")),
            sf.Eq(v.next, vs - dt * sf.d(p, "y")),
        ],
        initial=initial,
        boundary={u: wall, us: wall, v: wall, vs: wall, p: (sf.Neumann(), sf.Periodic())},
        dt=dt,
        steps=math.ceil(T_STEADY / dt),
        name="channel",
    )


def profile_error(u) -> float:
    """The largest difference between the x-averaged u(y) and the Poiseuille profile, over its amplitude."""
    ny = np.asarray(u).shape[0]
    y = np.arange(1, ny + 1) / (ny + 1)
    return float(np.abs(np.asarray(u).mean(axis=1) - poiseuille(y)).max() / poiseuille(0.5))
