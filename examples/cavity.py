"""The lid-driven cavity (Re = 100 by default, `re` for others), by projection: a pressure Poisson solve inside
every step.

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
the zero-mean p. `steps` runs to t_end (T_STEADY by default, where the flow at
Re = 100 is steady to about 1e-4); the centre lines' u(y) and v(x) then match
Ghia, Ghia and Shin (1982) (GHIA_U, GHIA_V) to within the grid's accuracy
(tests/test_examples.py; Re = 1000 on 257 x 257 nodes in tests/test_examples_gpu.py).
The time step is the one below at Re = 100, in proportion to Re and h^2 (the
diffusive limit), and at most 1 / Re, half the limit 2 nu / U^2 of forward
Euler with centred convection.
"""

import numpy as np

import stencilforge as sf

RE = 100.0
T_STEADY = 12.0
DT_33 = 0.01  # the step at 33 x 33 nodes, scaled by h^2 on other grids; the explicit step is stable below about 0.02

# Ghia, Ghia & Shin (1982), Table I: u along the vertical centre line x = 1/2, (y, u), per Re
GHIA_U = {
    100.0: ((1.0000, 1.00000), (0.9766, 0.84123), (0.9688, 0.78871), (0.9609, 0.73722), (0.9531, 0.68717),
            (0.8516, 0.23151), (0.7344, 0.00332), (0.6172, -0.13641), (0.5000, -0.20581), (0.4531, -0.21090),
            (0.2813, -0.15662), (0.1719, -0.10150), (0.1016, -0.06434), (0.0703, -0.04775), (0.0625, -0.04192),
            (0.0547, -0.03717), (0.0000, 0.00000)),
    1000.0: ((1.0000, 1.00000), (0.9766, 0.65928), (0.9688, 0.57492), (0.9609, 0.51117), (0.9531, 0.46604),
             (0.8516, 0.33304), (0.7344, 0.18719), (0.6172, 0.05702), (0.5000, -0.06080), (0.4531, -0.10648),
             (0.2813, -0.27805), (0.1719, -0.38289), (0.1016, -0.29730), (0.0703, -0.22220), (0.0625, -0.20196),
             (0.0547, -0.18109), (0.0000, 0.00000)),
}
# Table II: v along the horizontal centre line y = 1/2, (x, v), per Re
GHIA_V = {
    100.0: ((1.0000, 0.00000), (0.9688, -0.05906), (0.9609, -0.07391), (0.9531, -0.08864), (0.9453, -0.10313),
            (0.9063, -0.16914), (0.8594, -0.22445), (0.8047, -0.24533), (0.5000, 0.05454), (0.2344, 0.17527),
            (0.2266, 0.17507), (0.1563, 0.16077), (0.0938, 0.12317), (0.0781, 0.10890), (0.0703, 0.10091),
            (0.0625, 0.09233), (0.0000, 0.00000)),
    1000.0: ((1.0000, 0.00000), (0.9688, -0.21388), (0.9609, -0.27669), (0.9531, -0.33714), (0.9453, -0.39188),
             (0.9063, -0.51550), (0.8594, -0.42665), (0.8047, -0.31966), (0.5000, 0.02526), (0.2344, 0.32235),
             (0.2266, 0.33075), (0.1563, 0.37095), (0.0938, 0.32627), (0.0781, 0.30353), (0.0703, 0.29012),
             (0.0625, 0.27485), (0.0000, 0.00000)),
}


def build(shape=None, dtype="float64", re: float = RE, t_end: float = T_STEADY) -> sf.Problem:
    shape = shape or (31, 31)  # 33 x 33 nodes with the walls
    spacing = tuple(1.0 / (n + 1) for n in shape)
    grid = sf.Grid(shape, spacing=spacing, origin=spacing, dtype=dtype)
    y = grid.y
    dt = min(DT_33 * (32 * min(spacing)) ** 2 * (re / RE), 1 / re)
    nu = sf.Constant("nu", 1 / re)

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
        steps=round(t_end / dt),
        name="cavity",
    )


def centre_line(u) -> tuple[np.ndarray, np.ndarray]:
    """(y, u) along x = 1/2, the walls included, from the interior u of an odd number of columns."""
    n0, n1 = u.shape
    if n1 % 2 == 0:
        raise ValueError(f"x = 1/2 is a grid column only for an odd number of columns, got {n1}")
    y = np.arange(n0 + 2) / (n0 + 1)
    return y, np.concatenate([[0.0], np.asarray(u)[:, n1 // 2], [1.0]])


def centre_row(v) -> tuple[np.ndarray, np.ndarray]:
    """(x, v) along y = 1/2, the walls included, from the interior v of an odd number of rows."""
    n0, n1 = v.shape
    if n0 % 2 == 0:
        raise ValueError(f"y = 1/2 is a grid row only for an odd number of rows, got {n0}")
    x = np.arange(n1 + 2) / (n1 + 1)
    return x, np.concatenate([[0.0], np.asarray(v)[n0 // 2], [0.0]])


def ghia_gaps(u, v, re: float = RE) -> tuple[np.ndarray, np.ndarray]:
    """|ours - Ghia's| at each tabulated point of Tables I (u on x = 1/2) and II (v on y = 1/2), ours interpolated
    linearly between nodes."""
    return gaps(centre_line(u), centre_row(v), re)


def gaps(line, row, re: float = RE) -> tuple[np.ndarray, np.ndarray]:
    """|ours - Ghia's| at Tables I and II's points, from the centre line's (y, u) and the centre row's (x, v)."""
    (y, uc), (x, vc) = line, row
    (gy, gu), (gx, gv) = np.array(GHIA_U[re]).T, np.array(GHIA_V[re]).T
    return np.abs(np.interp(gy, y, uc) - gu), np.abs(np.interp(gx, x, vc) - gv)
