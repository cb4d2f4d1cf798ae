"""Dirichlet wall functions are called by name, value(x, y[, z], t) with x the last array axis, as documented."""

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
