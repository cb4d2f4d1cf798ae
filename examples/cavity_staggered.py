"""The lid-driven cavity on a staggered (MAC) grid: the pressure at the cells' centres, u on their east faces and
v on their north faces, as Harlow and Welch (1965) laid them out. At Re = 1000 this scheme comes within
Ghia, Ghia and Shin's (1982) tables on a grid where the collocated one of examples/cavity.py does not
(docs/examples.md has both).

    u_t + (u . grad) u = -grad p + (1 / Re) lap u,   div u = 0

in the unit square of n x n cells, the lid (y = 1) moving at u = 1. Each step is Chorin's projection:

    u* = u + dt (-(u . grad) u + nu lap u)         explicit, centred differences
    lap p = div(u*) / dt                            sf.Solve, Neumann walls
    u_next = u* - dt grad p

On this grid the divergence, the pressure gradient and the solve's Laplacian are one consistent set: the
divergence of u_next is zero to the solve's tolerance, and p's Neumann walls are exact. Each field is stored
on the grid of cells, one value a cell: u[j, i] is u on cell (j, i)'s east face, so the last column of u is the
east wall (held at 0) and u's west ghost column is the west wall (sf.Dirichlet(0)); v likewise, its last row
the lid's row of faces. The velocity along a wall sits half a cell from it: its ghost value is the reflection
2 U_wall - u of the value inside, written into the equations with sf.where on the cells next to the wall.
"""

import importlib.util
from pathlib import Path

import numpy as np

import stencilforge as sf


def _collocated():
    """examples/cavity.py, beside this file: its Reynolds number, time step rule and Ghia's tables are this one's."""
    spec = importlib.util.spec_from_file_location("cavity_collocated", Path(__file__).with_name("cavity.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_cavity = _collocated()
RE, T_STEADY, DT_33, GHIA_U, GHIA_V = _cavity.RE, _cavity.T_STEADY, _cavity.DT_33, _cavity.GHIA_U, _cavity.GHIA_V


def build(shape=None, dtype="float64", re: float = RE, t_end: float = T_STEADY) -> sf.Problem:
    shape = shape or (32, 32)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"the cavity is a square of n x n cells, got {shape}")
    h = 1.0 / shape[1]
    grid = sf.Grid(shape, spacing=(h, h), origin=(h / 2, h / 2), dtype=dtype)
    x, y = grid.x, grid.y
    dt = min(DT_33 * (32 * h) ** 2 * (re / RE), 1 / re)
    nu = sf.Constant("nu", 1 / re)

    u, v = sf.Field("u", grid), sf.Field("v", grid)
    us, vs, p = (sf.Field(name, grid, levels=1) for name in ("us", "vs", "p"))
    top, bottom, east, west = y > 1 - h, y < h, x > 1 - h, x < h  # the cells next to each wall

    # u at an east face: x and its neighbours along x are faces (the walls' ghosts are 0); along y it reflects
    u_n, u_s = sf.where(top, 2.0 - u, u.shift(y=1)), sf.where(bottom, -u, u.shift(y=-1))  # the lid moves at 1
    v_at_u = (v + v.shift(x=1) + v.shift(y=-1) + v.shift(x=1, y=-1)) / 4
    u_adv = u * (u.shift(x=1) - u.shift(x=-1)) / (2 * h) + v_at_u * (u_n - u_s) / (2 * h)
    u_lap = (u.shift(x=1) + u.shift(x=-1) + u_n + u_s - 4 * u) / h**2
    # v at a north face: along y faces, along x it reflects
    v_e, v_w = sf.where(east, -v, v.shift(x=1)), sf.where(west, -v, v.shift(x=-1))
    u_at_v = (u + u.shift(x=-1) + u.shift(y=1) + u.shift(x=-1, y=1)) / 4
    v_adv = u_at_v * (v_e - v_w) / (2 * h) + v * (v.shift(y=1) - v.shift(y=-1)) / (2 * h)
    v_lap = (v_e + v_w + v.shift(y=1) + v.shift(y=-1) - 4 * v) / h**2

    rest = sf.Dirichlet(0.0)
    return sf.Problem(
        [
            sf.Eq(us, sf.where(east, 0.0, u + dt * (-u_adv + nu * u_lap))),
            sf.Eq(vs, sf.where(top, 0.0, v + dt * (-v_adv + nu * v_lap))),
            sf.Solve(p, ((us - us.shift(x=-1)) + (vs - vs.shift(y=-1))) / (h * dt)),
            sf.Eq(u.next, us - dt * (p.shift(x=1) - p) / h),
            sf.Eq(v.next, vs - dt * (p.shift(y=1) - p) / h),
        ],
        boundary={u: rest, us: rest, v: rest, vs: rest, p: sf.Neumann()},
        dt=dt,
        steps=round(t_end / dt),
        name="cavity_staggered",
    )


def _even(shape) -> None:
    if any(n % 2 for n in shape):
        raise ValueError(f"the centre lines are lines of faces for an even number of cells per axis, got {shape}")


def centre_line(u) -> tuple[np.ndarray, np.ndarray]:
    """(y, u) along x = 1/2, the walls included: the column of east faces at x = 1/2, and u = 0 and 1 at the
    bottom and the lid."""
    n0, n1 = u.shape
    _even(u.shape)
    y = (np.arange(n0) + 0.5) / n0
    return np.concatenate([[0.0], y, [1.0]]), np.concatenate([[0.0], np.asarray(u)[:, n1 // 2 - 1], [1.0]])


def centre_row(v) -> tuple[np.ndarray, np.ndarray]:
    """(x, v) along y = 1/2, the walls included: the row of north faces at y = 1/2."""
    n0, n1 = v.shape
    _even(v.shape)
    x = (np.arange(n1) + 0.5) / n1
    return np.concatenate([[0.0], x, [1.0]]), np.concatenate([[0.0], np.asarray(v)[n0 // 2 - 1], [0.0]])


def ghia_gaps(u, v, re: float = RE) -> tuple[np.ndarray, np.ndarray]:
    """|ours - Ghia's| at each tabulated point (`cavity.gaps`), ours interpolated linearly between faces."""
    return _cavity.gaps(centre_line(u), centre_row(v), re)
