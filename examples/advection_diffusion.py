"""Advection-diffusion in a velocity field that changes sign, with first-order upwinding.

    u_t + a(y) u_x + b(x) u_y = nu (u_xx + u_yy) + f,   a = sin(2 pi y), b = sin(2 pi x)

on the periodic unit square. sf.upwind picks, cell by cell, the one-sided
difference on the side the flow comes from, so the scheme stays stable where
the velocity reverses. Forward Euler with dt proportional to h keeps the
advective Courant number fixed; nu is small enough that the diffusive limit
holds too at the default size. Upwinding and forward Euler are both first
order (ORDER).

The forcing f is manufactured from u = sin(2 pi (x - t)) cos(2 pi y), a wave
carried along x that the non-uniform velocity would otherwise distort.
"""

import math

import stencilforge as sf

ORDER = 1
SHAPES = [(48, 48), (96, 96), (192, 192)]
T_END = 0.25  # whole steps for every shape: T_END / dt = n

COURANT = 0.25  # dt / h; |a| + |b| <= 2, so the advective Courant number is at most one half
NU = 0.001


def build(shape=None, dtype="float64") -> sf.Problem:
    shape = shape or (256, 256)
    grid = sf.Grid(shape, extent=1.0, dtype=dtype)
    x, y, t = grid.x, grid.y, grid.t
    nu = sf.Constant("nu", NU)
    dt = COURANT * grid.spacing[0]
    k = 2 * math.pi

    a, b = sf.sin(k * y), sf.sin(k * x)
    exact = sf.sin(k * (x - t)) * sf.cos(k * y)
    u_t = -k * sf.cos(k * (x - t)) * sf.cos(k * y)
    u_x = k * sf.cos(k * (x - t)) * sf.cos(k * y)
    u_y = -k * sf.sin(k * (x - t)) * sf.sin(k * y)
    forcing = u_t + a * u_x + b * u_y + nu * 2 * k ** 2 * exact

    u = sf.Field("u", grid)
    advection = a * sf.upwind(u, "x", a) + b * sf.upwind(u, "y", b)
    return sf.Problem(
        [sf.Eq(u.next, u + dt * (nu * sf.laplacian(u) - advection + forcing))],
        initial={u: exact},
        boundary={u: sf.Periodic()},
        exact={u: exact},
        dt=dt,
        steps=round(T_END / dt),
        name="advection_diffusion",
    )
