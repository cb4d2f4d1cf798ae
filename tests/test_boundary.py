"""Dirichlet wall functions are called by name, value(x, y[, z], t) with x the last array axis, as documented."""

import dataclasses

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.boundary import Dirichlet
from stencilforge.errors import StencilforgeError
from stencilforge.grid import Grid

NAMES = {1: ("x",), 2: ("y", "x"), 3: ("z", "y", "x")}  # array-axis order: the last axis is x
CASES = {
    1: ((5,), (0.25,), (1.0,), lambda x, t: 3 * x + t),
    2: ((5, 8), (0.5, 0.25), (1.0, -1.0), lambda x, y, t: x + 10 * y + t),  # not symmetric in x and y, nor is the grid
    3: ((3, 4, 5), (0.5, 0.25, 0.125), (2.0, 1.0, -1.0), lambda z, x, y, t: x + 10 * y + 100 * z + t),  # any parameter order
}
DT, STEPS = 0.5, 3


def averaging(ndim: int) -> sf.Problem:
    """u.next = the mean of its 2 ndim neighbours, walls from the case's function: the walls reach the interior."""
    shape, spacing, origin, wall = CASES[ndim]
    grid = sf.Grid(shape, spacing=spacing, origin=origin, dtype="float64")
    u = sf.Field("u", grid)
    mean = sum(u.shift(**{name: side}) for name in NAMES[ndim] for side in (-1, 1)) / (2 * ndim)
    return sf.Problem([sf.Eq(u.next, mean)], initial={u: 0.0}, boundary={u: sf.Dirichlet(wall, time_dependent=True)}, dt=DT)


def by_hand(ndim: int) -> np.ndarray:
    """The same steps in NumPy: the walls at each step's start time, from coordinates named by axis."""
    shape, spacing, origin, wall = CASES[ndim]
    coords = [o + np.arange(-1, n + 1) * h for n, h, o in zip(shape, spacing, origin)]
    named = dict(zip(NAMES[ndim], np.meshgrid(*coords, indexing="ij")))
    inner = (slice(1, -1),) * ndim
    u = np.zeros(tuple(n + 2 for n in shape))
    for step in range(STEPS):
        interior = u[inner].copy()
        u[...] = wall(**named, t=step * DT)
        u[inner] = interior
        total = np.zeros(shape)
        for axis in range(ndim):
            for side in (0, 2):
                total += u[tuple(slice(side, side + n) if a == axis else slice(1, -1) for a, n in enumerate(shape))]
        u[inner] = total / (2 * ndim)
    return u[inner]


@pytest.mark.parametrize("generated", [False, True])
@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_wall_functions_get_each_coordinate_by_its_name(ndim, backend, generated):
    result = sf.run(averaging(ndim), steps=STEPS, backend=backend, generated=generated)
    expected = by_hand(ndim)
    assert np.abs(expected).min() > 0.1  # every interior point has felt a wall
    np.testing.assert_allclose(result.fields["u"], expected, rtol=1e-13)


@pytest.mark.parametrize("scaled", [False, True])
def test_the_ghost_cells_hold_the_function_of_their_own_coordinates(scaled):
    grid = Grid((4, 6), (0.5, 0.25), np.dtype("float64"), 2, (1.0, -1.0))
    wall = Dirichlet(lambda x, y, t: x + 10 * y + 0 * t, time_factor=(lambda t: 1.0 + t) if scaled else None,
                     time_dependent=not scaled)
    u = np.full(grid.padded_shape, np.nan)
    wall.bind(grid)(u, 1.0)
    y, x = grid.mesh()
    ghosts = np.isfinite(u)
    assert ghosts.sum() == u.size - 4 * 6
    np.testing.assert_array_equal(u[ghosts], np.broadcast_to((x + 10 * y) * (2.0 if scaled else 1.0), u.shape)[ghosts])


@pytest.mark.parametrize("value", [lambda *a: a[0] + a[-1], lambda u, v, t: u + v, lambda x, t: x + t])
def test_a_function_that_cannot_take_the_coordinates_by_name_is_refused(value):
    grid = Grid((4, 6), (0.5, 0.25), np.dtype("float64"), 1, (0.0, 0.0))
    with pytest.raises(StencilforgeError, match=r"called as value\(x=, y=, t=\) \(x the last axis\)"):
        Dirichlet(value, time_dependent=True).bind(grid)


def channel(shape=(9, 14), dtype="float64") -> sf.Problem:
    """Advection-diffusion along x in a channel periodic in y: inflow u = 1 at the low x end, outflow (Neumann)
    at the high end, the walls of one axis differing per side."""
    grid = sf.Grid(shape, extent=(0.9, 1.4), dtype=dtype)
    u = sf.Field("u", grid)
    dt = 0.004
    return sf.Problem([sf.Eq(u.next, u - dt * sf.upwind(u, "x", 1.0) + dt * 0.05 * sf.laplacian(u))],
                      initial={u: 0.0}, boundary={u: (sf.Periodic(), (sf.Dirichlet(1.0), sf.Neumann()))}, dt=dt, name="channel")


def channel_by_hand(problem: sf.Problem, steps: int) -> np.ndarray:
    """The same scheme in plain NumPy: ghosts filled axis by axis (y periodic, then x: 1 below, a mirror above),
    first-order upwind and the 5-point Laplacian."""
    hy, hx = problem.grid.spacing
    dt = 0.004
    u = np.zeros(tuple(n + 2 for n in problem.grid.shape))
    for _ in range(steps):
        u[0, :], u[-1, :] = u[-2, :], u[1, :]
        u[:, 0], u[:, -1] = 1.0, u[:, -2]
        c = u[1:-1, 1:-1]
        lap = (u[1:-1, 2:] - 2 * c + u[1:-1, :-2]) / hx**2 + (u[2:, 1:-1] - 2 * c + u[:-2, 1:-1]) / hy**2
        u[1:-1, 1:-1] = c - dt * (c - u[1:-1, :-2]) / hx + dt * 0.05 * lap
    return u[1:-1, 1:-1]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_walls_may_differ_per_side(backend):
    """Inflow at one end and outflow at the other (the most common wall pair in transport): against plain NumPy,
    and the inflow reaches the interior while the outflow end follows it."""
    p = channel()
    got = np.asarray(sf.run(p, steps=60, backend=backend).fields["u"])
    want = channel_by_hand(p, 60)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert got[:, 0].min() > 0.1 and np.ptp(got, axis=0).max() < 1e-12  # periodic in y: the same in every row


@pytest.mark.parametrize("cond, message", [
    ((sf.Periodic(), (sf.Periodic(), sf.Neumann())), "a periodic axis is periodic at both ends"),
    ((sf.Periodic(), (sf.Neumann(),)), "an axis's \\(low, high\\) pair takes two"),
    ((sf.Neumann(),), "one per axis \\(2\\) in array order, where an axis may take a \\(low, high\\) pair"),
])
def test_walls_per_side_are_checked_in_one_line(cond, message):
    grid = sf.Grid((6, 7), extent=1.0)
    u = sf.Field("u", grid)
    with pytest.raises(StencilforgeError, match=message):
        sf.Problem([sf.Eq(u.next, u + 0.01 * sf.laplacian(u))], boundary={u: cond}, dt=0.1)


def test_a_1d_pair_of_conditions_is_its_two_ends():
    grid = sf.Grid((10,), extent=1.0)
    u = sf.Field("u", grid)
    p = sf.Problem([sf.Eq(u.next, u + 0.2 * grid.spacing[0] ** 2 * sf.laplacian(u))], initial={u: 0.0},
                   boundary={u: (sf.Dirichlet(2.0), sf.Neumann())}, dt=0.1)
    u_end = np.asarray(sf.run(p, steps=400, backend="numpy").fields["u"])
    assert np.all(np.diff(u_end) < 0) and u_end[0] > u_end[-1] > 0  # heat flows in at the low end only


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_one_dirichlet_wall_on_every_axis_fills_in_one_call_with_the_bits_of_one_fill_per_axis(backend):
    """heat3d's walls (its exact solution, scaled in time) are one fill a step, not one per axis; written axis by
    axis instead (the same condition given per axis as separate objects), every ghost cell has the same bits."""
    grid = sf.Grid((9, 12, 7), extent=1.0)
    u = sf.Field("u", grid)
    x, y, z, t = grid.x, grid.y, grid.z, grid.t

    def problem(boundary):
        return sf.Problem([sf.Eq(u.next, u + 0.1 * min(grid.spacing) ** 2 * sf.laplacian(u))],
                          initial={u: sf.sin(x + 2 * y) * sf.cos(z)}, boundary={u: boundary}, dt=1e-4, name="walls")

    wall = sf.Dirichlet(sf.exp(-3 * t) * sf.sin(x + 2 * y) * sf.cos(z))  # value(x) f(t): scaled at each fill
    together, apart = (sf.Simulation(problem(b), backend) for b in (wall, tuple(dataclasses.replace(wall) for _ in range(3))))
    assert len(together._fillers["u"]) == 1 and len(apart._fillers["u"]) == 3
    assert together._moving == apart._moving == {"u"}
    for sim in (together, apart):
        sim.step(3)
        sim._slot(("u", 1))[...] = np.nan
        sim._fill("u", sim._slot(("u", 1)), 0.37)  # every ghost cell, at another time
    for slot in (("u", 0), ("u", 1)):
        np.testing.assert_array_equal(*(sim.backend.to_host(sim._slot(slot)) for sim in (together, apart)))
