"""The Gray-Scott reaction-diffusion system: two coupled fields forming spots and stripes.

    u_t = Du (u_xx + u_yy) - u v^2 + F (1 - u)
    v_t = Dv (v_xx + v_yy) + u v^2 - (F + k) v

on a periodic square, from Pearson's set-up: u = 1, v = 0 except a square in
the middle where u = 1/2, v = 1/4, all perturbed by a little noise. Forward
Euler with the 5-point Laplacian; both equations are computed in one pass.

The system has no exact solution, so `build_manufactured` checks the same
step with forcing terms added to both equations, manufactured from smooth
periodic u and v, with diffusivities large enough for every term to count.
With dt proportional to h^2 it is second order (ORDER).
"""

import math

import numpy as np

import stencilforge as sf

ORDER = 2
SHAPES = [(16, 16), (24, 24), (32, 32)]
T_END = 0.5  # whole steps for every shape: T_END / dt = n^2 / 2

L = 2.5
DU, DV = 2e-5, 1e-5
FEED, KILL = 0.04, 0.06
DT = 1.0
DIFFUSION_NUMBER = 0.24  # largest Du * dt / h^2 on finer grids; forward Euler is stable up to 1/4


def _equations(u, v, du, dv, feed, kill, dt, fu=0.0, fv=0.0):
    uvv = u * v ** 2
    return [
        sf.Eq(u.next, u + dt * (du * sf.laplacian(u) - uvv + feed * (1 - u) + fu)),
        sf.Eq(v.next, v + dt * (dv * sf.laplacian(v) + uvv - (feed + kill) * v + fv)),
    ]


def build(shape=None, dtype="float64", seed=0) -> sf.Problem:
    shape = shape or (256, 256)
    grid = sf.Grid(shape, extent=L, dtype=dtype)
    dt = min(DT, DIFFUSION_NUMBER * min(grid.spacing) ** 2 / DU)

    y, x = np.meshgrid(*[o + np.arange(n) * h for n, o, h in zip(grid.shape, grid.origin, grid.spacing)], indexing="ij")
    seed_square = (np.abs(x - L / 2) < L / 25) & (np.abs(y - L / 2) < L / 25)
    noise = np.random.default_rng(seed).uniform(-0.01, 0.01, size=(2,) + tuple(shape))

    u, v = sf.Field("u", grid), sf.Field("v", grid)
    constants = [sf.Constant(name, value) for name, value in (("Du", DU), ("Dv", DV), ("F", FEED), ("k", KILL))]
    return sf.Problem(
        _equations(u, v, *constants, dt),
        initial={u: np.where(seed_square, 0.5, 1.0) + noise[0], v: np.where(seed_square, 0.25, 0.0) + noise[1]},
        boundary={u: sf.Periodic(), v: sf.Periodic()},
        dt=dt,
        steps=10000,
        name="gray_scott",
    )


def build_manufactured(shape=None, dtype="float64") -> sf.Problem:
    shape = shape or SHAPES[-1]
    grid = sf.Grid(shape, extent=1.0, dtype=dtype)
    x, y, t = grid.x, grid.y, grid.t
    du, dv, feed, kill = 0.01, 0.005, FEED, KILL
    dt = min(grid.spacing) ** 2
    k = 2 * math.pi

    wave_u = sf.sin(k * x) * sf.cos(k * y) / 4
    wave_v = sf.cos(k * x) * sf.sin(k * y) / 8
    exact_u = 0.5 + wave_u * sf.cos(t)
    exact_v = 0.25 + wave_v * sf.exp(-t)
    uvv = exact_u * exact_v ** 2
    # f = u_t - Du lap u + u v^2 - F (1 - u), with lap of each wave = -2 k^2 times it
    fu = -wave_u * sf.sin(t) + du * 2 * k ** 2 * wave_u * sf.cos(t) + uvv - feed * (1 - exact_u)
    fv = -wave_v * sf.exp(-t) + dv * 2 * k ** 2 * wave_v * sf.exp(-t) - uvv + (feed + kill) * exact_v

    u, v = sf.Field("u", grid), sf.Field("v", grid)
    return sf.Problem(
        _equations(u, v, du, dv, feed, kill, dt, fu, fv),
        initial={u: exact_u, v: exact_v},
        boundary={u: sf.Periodic(), v: sf.Periodic()},
        exact={u: exact_u, v: exact_v},
        dt=dt,
        steps=round(T_END / dt),
        name="gray_scott_manufactured",
    )
