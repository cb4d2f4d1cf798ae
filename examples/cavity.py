"""The lid-driven cavity at Re = 100, by projection: a pressure Poisson solve inside every step.

    u_t + (u . grad) u = -grad p + (1 / Re) lap u,   div u = 0

in the unit square; the lid (y = 1) moves at u = 1, the other walls are at
rest. Each step (Chorin's projection, as in the "12 steps to Navier-Stokes"
course's cavity, with the pressure solved to a tolerance instead of a fixed
number of Jacobi sweeps):

    u* = u + dt (-(u . grad) u + nu lap u)         explicit, centred differences
    lap p = div(u*) / dt                            sf.Solve, Neumann walls
    u_next = u* - dt grad p

The grid's points are the nodes of an (n + 1) x (n + 1) mesh whose outer
nodes are the walls, so the Dirichlet ghost values sit on the walls. With
Neumann walls on every side p is defined up to a constant: the solve removes
the mean of div(u*) (not exactly zero next to the walls on one grid) and keeps
the zero-mean p. `steps` runs to t = T_STEADY, where the flow is steady to
about 1e-4; the centre line's u(y) then matches Ghia, Ghia and Shin (1982)
(GHIA_U) to within the grid's accuracy (tests/test_solve.py).
"""

import numpy as np

import stencilforge as sf

RE = 100.0
T_STEADY = 12.0
DT_33 = 0.01  # the step at 33 x 33 nodes, scaled by h^2 on other grids; the explicit step is stable below about 0.02

# Ghia, Ghia & Shin (1982), Table I: u along the vertical centre line x = 1/2 at Re = 100, (y, u)
GHIA_U = (
    (1.0000, 1.00000), (0.9766, 0.84123), (0.9688, 0.78871), (0.9609, 0.73722), (0.9531, 0.68717),
    (0.8516, 0.23151), (0.7344, 0.00332), (0.6172, -0.13641), (0.5000, -0.20581), (0.4531, -0.21090),
    (0.2813, -0.15662), (0.1719, -0.10150), (0.1016, -0.06434), (0.0703, -0.04775), (0.0625, -0.04192),
    (0.0547, -0.03717), (0.0000, 0.00000),
)


def build(shape=None, dtype="float64") -> sf.Problem:
    shape = shape or (31, 31)  # 33 x 33 nodes with the walls
    spacing = tuple(1.0 / (n + 1) for n in shape)
    grid = sf.Grid(shape, spacing=spacing, origin=spacing, dtype=dtype)
    y = grid.y
    dt = DT_33 * (32 * min(spacing)) ** 2
    nu = sf.Constant("nu", 1 / RE)

    u, v = sf.Field("u", grid), sf.Field("v", grid)
    us, vs, p = (sf.Field(name, grid, levels=1) for name in ("us", "vs", "p"))  # u*, v* and the pressure
    lid = sf.Dirichlet(sf.where(y > 1 - spacing[0] / 2, 1.0, 0.0))
    rest = sf.Dirichlet(0.0)

    def momentum(w):
        return w + dt * (-u * sf.d(w, "x") - v * sf.d(w, "y") + nu * sf.laplacian(w))

    return sf.Problem(
        [
            sf.Eq(us, momentum(u)),
            sf.Eq(vs, momentum(v)),
            sf.Solve(p, (sf.d(us, "x") + sf.d(vs, "y")) / dt),
            sf.Eq(u.next, us - dt * sf.d(p, "x")),
            sf.Eq(v.next, vs - dt * sf.d(p, "y")),
        ],
        boundary={u: lid, us: lid, v: rest, vs: rest, p: sf.Neumann()},
        dt=dt,
        steps=round(T_STEADY / dt),
        name="cavity",
    )


def centre_line(u) -> tuple[np.ndarray, np.ndarray]:
    """(y, u) along x = 1/2, the walls included, from the interior u of an odd number of columns."""
    n0, n1 = u.shape
    if n1 % 2 == 0:
        raise ValueError(f"x = 1/2 is a grid column only for an odd number of columns, got {n1}")
    y = np.arange(n0 + 2) / (n0 + 1)
    return y, np.concatenate([[0.0], np.asarray(u)[:, n1 // 2], [1.0]])
