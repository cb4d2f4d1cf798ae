"""Numba's 2D and 3D kernels write their input's walls along the last axes as they reach each row (`Launch.walls`):
bit for bit what NumPy's fill writes, before the rows that read them, on every split of rows and planes among
threads."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from stencilforge import problems
from stencilforge.backends import numba_cpu
from stencilforge.backends.numba_cpu import (
    FUSED_STEPS_2D,
    FUSED_STEPS_3D,
    NumbaBackend,
    fused_source,
    load_kernel,
    sweep_coefficients,
    sweep_source,
    writes_walls,
)
from stencilforge.backends.numpy_ref import NumpyBackend, evaluate_sweep
from stencilforge.boundary import Dirichlet, ScaledWalls, bind, write_row_walls
from stencilforge.grid import Grid
from stencilforge.plan import Sweep, Term
from stencilforge.stencil import Stencil
from test_numba_march import jacobi


def moving_wall(grid: Grid) -> Dirichlet:
    """A wall whose values differ at every ghost cell, scaled in time."""
    if grid.ndim == 2:
        return Dirichlet(lambda x, y, t: np.sin(3 * x + 1) * np.cos(2 * y) + y * y, time_factor=lambda t: 1.0 + 0.37 * t)
    return Dirichlet(lambda x, y, z, t: np.sin(3 * x + 1) * np.cos(2 * y) + z * z, time_factor=lambda t: 1.0 + 0.37 * t)


def rows_of(wall: Dirichlet, grid: Grid, faces=None):
    """The x and y walls split off the wall's host filler (None where it has none to give)."""
    fill = bind(wall, grid, NumpyBackend(), faces)
    return fill.rows() if isinstance(fill, ScaledWalls) else None


def poisoned(grid, names, seed=3):
    """Random fields whose ghost cells along the last axes (axis 0's excepted) are NaN: a kernel must write them
    before reading."""
    rng = np.random.default_rng(seed)
    fields = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in names}
    g = grid.ghost
    for a in fields.values():
        a[g:-g, :g] = a[g:-g, -g:] = np.nan
        if grid.ndim == 3:
            a[g:-g, :, :g] = a[g:-g, :, -g:] = np.nan
    return fields


def expected_single(sweep, grid, fields, walls):
    """NumPy: u's x and y walls written, then the oracle's sweep."""
    (u,) = sweep.stencil_inputs
    ref = {n: a.copy() for n, a in fields.items()}
    write_row_walls(ref[u], walls)
    return ref, evaluate_sweep(sweep, grid, ref)


def star(radius):
    return lambda grid: Sweep("out", (Term("u", Stencil.laplacian(grid.ndim, radius, grid.spacing)),
                                      Term("f", Stencil.identity(grid.ndim))))


@pytest.mark.parametrize("make,shape,ghost,dtype", [
    (star(1), (9, 13), 1, "float32"),  # 2D: a row's ghost columns, rows split among threads
    (star(2), (1, 7), 3, "float64"),
    (star(8), (21, 11), 8, "float32"),  # wider than one loop: row buffers
    (star(1), (7, 5, 9), 1, "float32"),  # one vectorised loop per row, planes split among threads
    (star(1), (7, 5, 9), 1, "float64"),
    (star(2), (6, 11, 5), 3, "float32"),  # ghost layers wider than the reach
    (star(8), (9, 17, 13), 8, "float32"),  # wider than one loop: tasks of planes, tiles of rows (`_wide_source`)
    (star(8), (5, 40, 7), 8, "float32"),
    (star(8), (37, 67, 9), 8, "float32"),  # planes beyond the reach of a task's ends, two tiles: written by the task
    (star(8), (11, 5, 9), 8, "float64"),  # fewer rows than the reach: one tile reads both ghost rows
])
def test_single_step_kernel_writes_the_walls_it_reads(make, shape, ghost, dtype):
    nd = len(shape)
    grid = Grid(shape, (0.01, 0.013, 0.017)[:nd], np.dtype(dtype), ghost, (0.0,) * nd)
    sweep = make(grid)
    assert writes_walls(sweep)
    rows = rows_of(moving_wall(grid), grid)
    walls = rows.at(0.7)
    kernel = load_kernel(sweep_source(sweep))
    coef = sweep_coefficients(sweep, grid.dtype)
    threads = [1, 2, 3, 7] if "nt):" in sweep_source(sweep) else [None]
    base = poisoned(grid, ("u", "f"))
    ref, expected = expected_single(sweep, grid, base, walls)
    for nt in threads:
        fields = {n: a.copy() for n, a in base.items()}
        out = np.full(grid.padded_shape, np.nan, grid.dtype)
        kernel(out, fields["u"], fields["f"], coef, grid.ghost, *walls, *([nt] if nt else []))
        assert np.array_equal(out[grid.interior], expected), f"{nt} threads"
        assert np.array_equal(fields["u"], ref["u"], equal_nan=True), "u's walls, and only those, written"


def test_wave3d_kernel_through_the_launch_with_and_without_walls():
    """wave3d's own sweep (u.next written over u.prev, read at the cell); without walls the launch writes no ghost."""
    setup = problems.linear_step("wave3d", shape=(17, 18, 19), radius=8)
    grid, sweep = setup.lattice, setup.sweep
    launch = NumbaBackend().sweep(sweep, grid)
    assert launch.walls
    walls = rows_of(moving_wall(grid), grid).at(1.3)
    base = poisoned(grid, ("u", "u_prev", "vel"))
    ref, expected = expected_single(sweep, grid, base, walls)
    fields = {n: a.copy() for n, a in base.items()}
    launch(fields, walls)
    assert np.array_equal(fields["u_prev"][grid.interior], expected)
    assert np.array_equal(fields["u"], ref["u"], equal_nan=True)
    fields = {n: a.copy() for n, a in ref.items()}
    launch(fields)
    assert np.array_equal(fields["u"], ref["u"], equal_nan=True), "no walls given, none written"
    assert np.array_equal(fields["u_prev"][grid.interior], expected)


@pytest.mark.parametrize("radius,shape,steps,rows_a_tile", [
    (1, (13, 6, 7), FUSED_STEPS_3D, None), (2, (19, 5, 6), 3, None), (2, (13, 6, 7), 2, None), (2, (19, 5, 6), 3, 2),
    (1, (11, 20, 5), 4, 6),
    (1, (29, 10), FUSED_STEPS_2D, None), (2, (19, 7), 3, None), (1, (3, 40), 2, None)])
def test_fused_pass_writes_every_states_walls_on_any_split_of_the_planes(radius, shape, steps, rows_a_tile, monkeypatch):
    """The input's walls at t (planes, in 2D rows, near a task's ends in a first parallel loop, the others in the
    march; with tiles of rows along axis 1, `rows_a_tile` rows by MARCH_TILE_CELLS, the ghost rows and the rows within
    reach of two tiles in the first loop too, and a tile's other rows in the march: tiles of 2 rows, fewer than the
    reach, and of 6-7 rows, more) and each middle state's at its own time from their values, not from out or the
    carriers; whose faces of axis 0 give the middle states' (out's the first's, the carriers' the later ones')."""
    if rows_a_tile:
        monkeypatch.setattr(numba_cpu, "MARCH_TILE_CELLS", rows_a_tile * (shape[2] + 2 * radius))
    grid, sweep = jacobi(shape, radius, "float32")
    rows = rows_of(moving_wall(grid), grid)
    times = [0.2 + 0.25 * s for s in range(steps)]
    walls = rows.at(*times)
    kernel = load_kernel(fused_source(sweep, steps))
    coef = sweep_coefficients(sweep, grid.dtype)
    base = poisoned(grid, ("u", "f", "u_new"))
    carriers = [poisoned(grid, ("w",), seed=10 + s)["w"] for s in range(2, steps)]  # z planes: later states' walls
    states = [base["u_new"], *carriers]
    g = grid.ghost
    first, _ = expected_single(sweep, grid, base, walls)
    u = first["u"]
    for s, holder in enumerate(states, start=1):  # the state after step s: holder's z planes, x and y at times[s]
        state = holder.copy()
        state[grid.interior] = evaluate_sweep(sweep, grid, {"u": u, "f": base["f"]})
        arrays = len(walls) - steps  # x (and y in 3D), then each step's factor
        write_row_walls(state, (*walls[:arrays], walls[arrays + s]))
        u = state
    expected = evaluate_sweep(sweep, grid, {"u": u, "f": base["f"]})
    for tasks in (1, 2, 3, 4, 6, 13, 20):
        fields = {n: a.copy() for n, a in base.items()}
        out = fields.pop("u_new")
        kernel(out, fields["u"], fields["f"], *[c.copy() for c in carriers], coef, g, *walls, tasks)
        assert np.array_equal(out[grid.interior], expected), f"{tasks} tasks"
        assert np.array_equal(fields["u"], first["u"], equal_nan=True), f"{tasks} tasks: u's walls at t"


@pytest.mark.parametrize("shape", [(6, 7, 9), (5, 11)])
def test_rest_and_the_rows_are_the_whole_fill(shape):
    """The loop fills axis 0's faces (`rest`) and the kernel the rest: together, bit for bit the one fill of every face."""
    nd = len(shape)
    grid = Grid(shape, (0.1, 0.12, 0.09)[:nd], np.dtype("float32"), 2, (0.0,) * nd)
    wall = moving_wall(grid)
    rows = rows_of(wall, grid)
    whole = np.full(grid.padded_shape, np.nan, grid.dtype)
    bind(wall, grid, NumpyBackend())(whole, 2.5)
    split = np.full(grid.padded_shape, np.nan, grid.dtype)
    rows.rest(split, 2.5)
    write_row_walls(split, rows.at(2.5))
    assert np.array_equal(whole, split, equal_nan=True)
    ghost = np.ones(grid.padded_shape, bool)
    ghost[grid.interior] = False
    assert not np.isnan(split[ghost]).any(), "every ghost cell written"


def test_only_stars_of_one_field_and_scaled_walls_on_every_face_take_the_rows():
    grid = Grid((6, 7, 9), (0.1, 0.12, 0.09), np.dtype("float32"), 1, (0.0,) * 3)
    box = Stencil.from_dict({(0, 1, 1): 1.0, (0, 0, 0): -1.0})
    assert not writes_walls(Sweep("out", (Term("u", box),)))  # a diagonal neighbour reads another row's walls
    lap = Stencil.laplacian(3, 1, grid.spacing)
    assert not writes_walls(Sweep("out", (Term("u", lap), Term("f", lap))))  # two fields read around the cell
    assert writes_walls(Sweep("out", (Term("u", Stencil.laplacian(2, 1, (0.1, 0.1))),)))
    assert not writes_walls(Sweep("out", (Term("u", Stencil.from_dict({(1, 1): 1.0, (0, 0): -1.0})),)))  # 2D diagonal
    assert not writes_walls(Sweep("out", (Term("u", Stencil.laplacian(1, 1, (0.1,))),)))
    assert rows_of(Dirichlet(lambda x, y, z, t: x + t, time_dependent=True), grid) is None  # re-evaluated, not scaled
    assert rows_of(Dirichlet(1.0), grid) is None
    assert rows_of(moving_wall(grid), grid, faces=[(0, 0), (1, 0), (1, 1), (2, 0), (2, 1)]) is None  # a block's faces
    flat = dataclasses.replace(grid, shape=(6, 7), spacing=(0.1, 0.1), lower=(0.0, 0.0))
    assert rows_of(Dirichlet(lambda x, y, t: x + y, time_factor=lambda t: t), flat).y is None  # 2D: x walls only
    line = dataclasses.replace(grid, shape=(6,), spacing=(0.1,), lower=(0.0,))
    assert rows_of(Dirichlet(lambda x, t: x, time_factor=lambda t: t), line) is None
    assert rows_of(moving_wall(grid), grid) is not None
