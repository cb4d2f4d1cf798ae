"""2D acoustic waves from a point source, absorbed by a sponge layer at the walls.

    u_tt + sigma u_t = c^2 (u_xx + u_yy) + s(t) delta(x - x_s)

Leapfrog in time (three levels: u.prev, u, u.next) with the damping term
centred, so the step stays explicit and second order. sigma is a one-level
field, zero inside and rising quadratically across a layer along the walls,
where the outgoing waves die out instead of reflecting. The source is a
Ricker wavelet added to the new level each step, spread over the four grid
points around it with bilinear weights.

The grid's points sit at h, 2h, ..., L - h, so the ghost points are the walls
themselves and the zero Dirichlet value is exact there.

`build_manufactured` checks the same step without source, on a uniform sigma:
the damped standing wave exp(-sigma t / 2) cos(W t) sin(pi x) sin(2 pi y),
W^2 = c^2 |k|^2 - sigma^2 / 4, solves the equation exactly. Leapfrog and the
5-point Laplacian are second order (ORDER) with dt proportional to h.
"""

import math

import stencilforge as sf

ORDER = 2
SHAPES = [(15, 15), (23, 23), (31, 31), (47, 47)]
T_END = 1.0  # whole steps for n interior points per side: T_END / dt = 2 (n + 1)

L = 1.0
C = 1.0
COURANT = 0.5  # c * dt / h; leapfrog in 2D is stable up to 1 / sqrt(2)
PEAK_FREQUENCY = 8.0
SPONGE_WIDTH = 0.15 * L
SPONGE_STRENGTH = 60.0 * C / L  # sigma at the walls
DURATION = 1.5 * L / C  # long enough for the waves to reach the sponge and die out there


def _grid(shape, dtype):
    spacing = tuple(L / (n + 1) for n in shape)
    return sf.Grid(shape, spacing=spacing, origin=spacing, dtype=dtype)


def _step(u, sigma, c, dt):
    damp = sigma * (dt / 2)
    return sf.Eq(u.next, (2 * u - (1 - damp) * u.prev + (c * dt) ** 2 * sf.laplacian(u)) / (1 + damp))


def build(shape=None, dtype="float64") -> sf.Problem:
    shape = shape or (255, 255)
    grid = _grid(shape, dtype)
    x, y, t = grid.x, grid.y, grid.t
    c = sf.Constant("c", C)
    dt = COURANT * min(grid.spacing) / C

    wall_distance = sf.minimum(sf.minimum(x, L - x), sf.minimum(y, L - y))
    depth = sf.maximum(0.0, 1 - wall_distance / SPONGE_WIDTH)
    arg = (math.pi * PEAK_FREQUENCY * (t - 1.2 / PEAK_FREQUENCY)) ** 2
    ricker = (1 - 2 * arg) * sf.exp(-arg)
    h2 = grid.spacing[0] * grid.spacing[1]

    u = sf.Field("u", grid, levels=3)
    sigma = sf.Field("sigma", grid, levels=1)
    return sf.Problem(
        [_step(u, sigma, c, dt)],
        initial={sigma: SPONGE_STRENGTH * depth ** 2},
        boundary={u: sf.Dirichlet(0.0)},
        # a point force: the delta spread over one cell (1 / h^2), times dt^2 as leapfrog applies forcing
        sources=[sf.Source(u, at=(0.6 * L, 0.4 * L), signal=dt ** 2 / h2 * ricker)],
        dt=dt,
        steps=round(DURATION / dt),
        name="wave2d_sponge",
    )


def build_manufactured(shape=None, dtype="float64") -> sf.Problem:
    shape = shape or SHAPES[-1]
    grid = _grid(shape, dtype)
    x, y = grid.x, grid.y
    c = sf.Constant("c", C)
    damping = 1.0
    dt = COURANT * min(grid.spacing) / C

    omega = math.sqrt((C * math.pi / L) ** 2 * (1 + 2 ** 2) - damping ** 2 / 4)

    def standing(t):
        return sf.exp(-damping / 2 * t) * sf.cos(omega * t) * sf.sin(math.pi * x / L) * sf.sin(2 * math.pi * y / L)

    u = sf.Field("u", grid, levels=3)
    sigma = sf.Field("sigma", grid, levels=1)
    return sf.Problem(
        [_step(u, sigma, c, dt)],
        initial={u: standing(0.0), "u.prev": standing(-dt), sigma: damping},
        boundary={u: sf.Dirichlet(0.0)},
        exact={u: standing(grid.t)},
        dt=dt,
        steps=round(T_END / dt),
        name="wave2d_standing",
    )
