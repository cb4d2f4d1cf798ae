"""Diffusion through two layers of different conductivity, with sf.div_grad.

    u_t = div(k grad u) + f,   k = K_LEFT for x < 1/2, K_RIGHT beyond

on the unit square with Dirichlet walls. k is a one-level field given by an
sf.where expression. The manufactured solution

    u = (1 + (x - 1/2) / k) cos(pi y) exp(-t)

is continuous and so is its flux k u_x, as a true solution across a material
interface must be; its kink at the interface is what the scheme must capture.

sf.div_grad(k, u, average="harmonic") puts 2 k_i k_j / (k_i + k_j) on each
cell face, which carries the flux across the interface face exactly for a
piecewise-linear profile; the scheme stays second order (ORDER). With the
arithmetic average (the default, for smooth k) the flux on the interface face
is off by a fixed fraction and the solution only first order. Forward Euler
with dt proportional to h^2 adds O(h^2).
"""

import math

import stencilforge as sf

ORDER = 2
SHAPES = [(16, 16), (32, 32), (64, 64)]
T_END = 1 / 50  # whole steps for every shape: T_END / dt = n^2

K_LEFT, K_RIGHT = 1.0, 10.0
COURANT = 0.2  # max(k) * dt / h^2; forward Euler is stable up to 1/4


def build(shape=None, dtype="float64") -> sf.Problem:
    shape = shape or (128, 128)
    grid = sf.Grid(shape, extent=1.0, dtype=dtype)
    x, y, t = grid.x, grid.y, grid.t
    dt = COURANT * grid.spacing[0] ** 2 / max(K_LEFT, K_RIGHT)

    conductivity = sf.where(x < 0.5, K_LEFT, K_RIGHT)
    exact = (1 + (x - 0.5) / conductivity) * sf.cos(math.pi * y) * sf.exp(-t)
    forcing = (math.pi ** 2 * conductivity - 1) * exact  # u_t - div(k grad u), piece by piece

    u = sf.Field("u", grid)
    k = sf.Field("k", grid, levels=1)
    return sf.Problem(
        [sf.Eq(u.next, u + dt * (sf.div_grad(k, u, average="harmonic") + forcing))],
        initial={u: exact, k: conductivity},
        boundary={u: sf.Dirichlet(exact)},
        exact={u: exact},
        dt=dt,
        steps=round(T_END / dt),
        name="variable_diffusion",
    )
