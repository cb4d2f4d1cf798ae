"""Numba's several-steps-per-pass kernel for 2D and 3D sweeps (out = S(...S(u)), marching planes, in 2D rows,
through a ring of them per middle state), bit for bit against single Numba steps and the NumPy oracle on shapes
that no split of the planes among threads divides evenly, and through the time loop with static and
time-dependent walls."""

from __future__ import annotations

import numpy as np
import pytest

import stencilforge as sf
from stencilforge import problems
from stencilforge.backends.base import fused_walls
from stencilforge.backends.numba import NumbaBackend
from stencilforge.backends.numba.backend import load_kernel
from stencilforge.backends.numba.kernel import sweep_coefficients
from stencilforge.backends.numba.schedules import march
from stencilforge.backends.numba.schedules.march import FUSED_STEPS_2D, FUSED_STEPS_3D, fused_source
from stencilforge.backends.numpy_ref import NumpyBackend, evaluate_sweep
from stencilforge.grid import Grid
from stencilforge.plan import Sweep, Term
from stencilforge.problems.poisson2d import jacobi_sweep
from stencilforge.stencil import Stencil
from test_fused_steps import Recorder, named, run_loop, same_record


@pytest.fixture(autouse=True)
def march_only(monkeypatch):
    """These tests are the march's: the backend's fused steps take it alone, small grids too (which `loop` takes in
    a run; tests/test_numba_loop.py)."""
    from stencilforge.backends.numba import backend

    monkeypatch.setattr(backend, "MARCHES", (march.SCHEDULE,))


def jacobi(shape, radius, dtype, ghost=None):
    """A 2D or 3D (by the shape) Jacobi sweep with a right-hand side: u read around the cell, f at it."""
    nd = len(shape)
    grid = Grid(tuple(shape), (0.01, 0.013, 0.017)[:nd], np.dtype(dtype), radius if ghost is None else ghost, (0.0,) * nd)
    return grid, jacobi_sweep(Stencil.laplacian(nd, radius, grid.spacing), with_rhs=True)


# Diagonal neighbours read other rows' ghost columns and rows.
DIAGONAL = Stencil.from_dict({(0, 1, 1): 0.2, (-1, 0, 0): 0.15, (0, 0, 0): 0.3, (1, -1, 0): 0.1, (0, 0, -1): 0.25})


def ghost_mask(grid):
    ghost = np.ones(grid.padded_shape, bool)
    ghost[grid.interior] = False
    return ghost


def fused_inputs(grid, steps, seed=5):
    """u and f, and the walls of each middle state (the first's to go in out, then one array each), all different,
    with NaN in the interior a kernel must write (out) or never read (the others)."""
    rng = np.random.default_rng(seed)
    fields = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in ("u", "f")}
    walls = [rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for _ in range(steps - 1)]
    for w in walls:
        w[grid.interior] = np.nan
    return fields, walls


def fused_fields(fields, walls, out):
    """What a fused pass reads: the fields, out, and the later middle states' walls under `fused_walls` names."""
    return {**fields, "u_new": out, **{fused_walls(s, "u_new"): w for s, w in enumerate(walls[1:], start=2)}}


def single_steps(one, fields, walls, grid):
    """len(walls) + 1 single sweeps by `one`, the state after step s taking walls[s - 1]'s ghost cells."""
    u = fields["u"]
    for w in walls:
        step = np.full(grid.padded_shape, np.nan, dtype=grid.dtype)
        one({**fields, "u": u, "u_new": step})
        u = w.copy()
        u[grid.interior] = step[grid.interior]
    last = np.full(grid.padded_shape, np.nan, dtype=grid.dtype)
    one({**fields, "u": u, "u_new": last})
    return last[grid.interior]


@pytest.mark.parametrize("radius,dtype,steps", [(1, "float64", None), (2, "float32", 3)])
@pytest.mark.parametrize("shape", [(13, 17, 19), (2, 9, 4), (5, 1, 3), (100, 257), (33, 41), (1, 40), (70, 3)])
def test_fused_pass_is_single_numba_sweeps_and_oracle_sweeps_bit_for_bit(shape, radius, dtype, steps):
    grid, sweep = jacobi(shape, radius, dtype)
    be = NumbaBackend()
    launch = be.sweep_fused(sweep, grid, steps)  # None: the default for the dimension
    assert launch.steps == (steps or (FUSED_STEPS_2D if len(shape) == 2 else FUSED_STEPS_3D))
    assert_single_steps_bits(launch, be, sweep, grid)


def assert_single_steps_bits(launch, be, sweep, grid):
    """The fused pass `launch` writes the interior single steps of numba and of the oracle give, on walls of its own
    per middle state, and nothing else."""
    fields, walls = fused_inputs(grid, launch.steps)
    out = walls[0].copy()
    launch(fused_fields(fields, walls, out))
    assert np.array_equal(out[grid.interior], single_steps(be.sweep(sweep, grid), fields, walls, grid))
    assert np.array_equal(out[ghost_mask(grid)], walls[0][ghost_mask(grid)])  # only the interior is written

    def oracle(f):
        f["u_new"][grid.interior] = evaluate_sweep(sweep, grid, f)

    assert np.array_equal(out[grid.interior], single_steps(oracle, fields, walls, grid))


def test_fused_pass_of_a_stencil_with_diagonals_takes_every_states_ghosts_from_its_array():
    """A diagonal neighbour reads another row's ghost columns: each middle state's ghost cells come from out's
    (the first) or its carrier's, on every split of the planes."""
    grid = Grid((11, 7, 9), (0.1, 0.12, 0.09), np.dtype("float64"), 1, (0.0,) * 3)
    sweep = Sweep("u_new", (Term("u", DIAGONAL), Term("f", Stencil.identity(3))))
    fields, walls = fused_inputs(grid, 3)
    expected = single_steps(NumbaBackend().sweep(sweep, grid), fields, walls, grid)
    kernel = load_kernel(fused_source(sweep, 3))
    coef = sweep_coefficients(sweep, grid.dtype)
    for tasks in (1, 2, 3, 5, 11):
        out = walls[0].copy()
        kernel(out, fields["u"], fields["f"], *walls[1:], coef, grid.ghost, tasks)
        assert np.array_equal(out[grid.interior], expected), f"{tasks} tasks"


@pytest.mark.parametrize("steps", [2, 3])
@pytest.mark.parametrize("shape", [(13, 6, 7), (13, 9)])
def test_fused_pass_gives_the_same_bits_on_any_split_of_the_planes(steps, shape):
    """Each task marches its own range of planes (2D: rows), evaluating the middle planes near its ends again:
    two steps (no carriers) and three (the kernel of the test above)."""
    grid, sweep = jacobi(shape, 2, "float32")
    fields, walls = fused_inputs(grid, steps)
    kernel = load_kernel(fused_source(sweep, steps))
    coef = sweep_coefficients(sweep, grid.dtype)
    expected = single_steps(NumbaBackend().sweep(sweep, grid), fields, walls, grid)
    for tasks in (1, 2, 3, 4, 6, 13, 20):
        out = walls[0].copy()
        kernel(out, fields["u"], fields["f"], *walls[1:], coef, grid.ghost, tasks)
        assert np.array_equal(out[grid.interior], expected), f"{tasks} tasks"


# The kernels of other tests here (the same sources), so no case compiles one of its own.
@pytest.mark.parametrize("case,shape,radius,dtype,steps,rows_a_tile", [
    ("star", (19, 5, 6), 2, "float32", 3, 2), ("star", (13, 9, 7), 1, "float64", 4, None), ("star", (13, 9), 2, "float32", 3, None),
    ("diagonals", (11, 7, 9), 1, "float64", 3, None)])
def test_fused_pass_whose_carriers_are_the_input_takes_every_states_walls_from_it(monkeypatch, case, shape, radius, dtype, steps,
                                                                                   rows_a_tile):
    """Walls that stay put (`with_walls`: the carriers are the input itself): each middle state copies its ghost
    cells from the state it reads, which holds the input's, and reads neither out's (NaN here) nor the carriers'
    planes, on every split of the planes, in 3D in one tile a plane or tiles of `rows_a_tile` rows."""
    if case == "diagonals":
        grid = Grid(shape, (0.1, 0.12, 0.09), np.dtype(dtype), radius, (0.0,) * 3)
        sweep = Sweep("u_new", (Term("u", DIAGONAL), Term("f", Stencil.identity(3))))
    else:
        grid, sweep = jacobi(shape, radius, dtype)
    if rows_a_tile:
        monkeypatch.setattr(march, "MARCH_TILE_CELLS", rows_a_tile * (shape[-1] + 2 * radius))
    fields, _ = fused_inputs(grid, steps)
    expected = single_steps(NumbaBackend().sweep(sweep, grid), fields, [fields["u"]] * (steps - 1), grid)
    kernel = load_kernel(fused_source(sweep, steps))
    coef = sweep_coefficients(sweep, grid.dtype)
    for tasks in (1, 2, 3, 5, 13):
        out = np.full(grid.padded_shape, np.nan, dtype=grid.dtype)
        kernel(out, fields["u"], fields["f"], *[fields["u"]] * (steps - 2), coef, grid.ghost, tasks)
        assert np.array_equal(out[grid.interior], expected), f"{tasks} tasks"
        assert np.isnan(out[ghost_mask(grid)]).all()  # only the interior is written


def test_fused_pass_declines_sweeps_it_cannot_vectorise_or_whose_reach_passes_the_ghosts():
    be = NumbaBackend()
    grid, wide = jacobi((8, 9, 10), 3, "float32")
    assert be.sweep_fused(wide, grid) is None  # 19 row views and f's: beyond one vectorised loop
    grid, wide = jacobi((40, 40), 4, "float64")
    assert be.sweep_fused(wide, grid) is None  # 17 row views
    grid, sweep = jacobi((8, 9, 10), 2, "float32", ghost=1)
    assert be.sweep_fused(sweep, grid) is None
    wave = problems.linear_step("wave3d", shape=(8, 9, 10), radius=1)
    assert be.sweep_fused(wave.sweep, wave.lattice) is None  # a leapfrog reads the level it overwrites


@pytest.mark.parametrize("name,shape", [("heat3d", (13, 17, 19)), ("poisson3d", (11, 9, 14)), ("heat2d", (23, 19)),
                                        ("poisson2d", (21, 26))])
def test_fused_run_lands_on_every_observed_step_with_the_single_steps_bits(name, shape):
    """heat's walls change in time (the loop fills the middle steps' ahead); Poisson's are static."""
    opts = dict(steps=37, check_every=10)
    records = {key: Recorder(7) for key in ("numpy", "single", "fused")}
    results = {
        "numpy": run_loop(named(name, shape), NumpyBackend(), observers=(records["numpy"],), **opts),
        "single": run_loop(named(name, shape), NumbaBackend(), observers=(records["single"],), fuse_steps=False, **opts),
        "fused": run_loop(named(name, shape), NumbaBackend(), wait=True, observers=(records["fused"],), **opts),
    }
    assert records["fused"].seen and same_record(records["fused"], records["single"])
    assert same_record(records["fused"], records["numpy"])
    for key in ("numpy", "single"):
        assert all(np.array_equal(results["fused"].fields[k], results[key].fields[k]) for k in results[key].fields)
    assert results["fused"].summary.get("residual") == results["single"].summary.get("residual")  # summed as numba sums
    # a pass n -> n + k only where none of n + 1 .. n + k is observed or checked and n + k is not the last step
    k = FUSED_STEPS_2D if len(shape) == 2 else FUSED_STEPS_3D
    events = {m for m in range(1, 38) if m % 7 == 0 or m % 10 == 0}
    passes, n = 0, 0
    while n < 37:
        fuse = n + k < 37 and not events & set(range(n + 1, n + k + 1))
        passes, n = passes + fuse, n + (k if fuse else 1)
    assert results["fused"].summary["fused_steps"] == k * passes > 0
    assert "fused_steps" not in results["single"].summary


def test_a_users_radius_two_problem_runs_several_steps_per_pass_with_the_oracles_bits():
    """Through the loop sf.run takes: a fourth-order heat equation with walls that change in time, in float64."""
    grid = sf.Grid((12, 15, 10), spacing=(0.07, 0.06, 0.09), origin=(0.07, 0.06, 0.09), dtype="float64")
    u = sf.Field("u", grid)
    x, y, z = grid.coordinates
    exact = sf.exp(-grid.t) * sf.sin(x + 0.3) * sf.cos(y - 0.2) * sf.sin(z + 0.1)
    dt = 0.2 * min(grid.spacing) ** 2
    problem = sf.Problem([sf.Eq(u.next, u + dt * sf.laplacian(u, order=4))], initial={u: exact},
                         boundary={u: sf.Dirichlet(exact)}, dt=dt, steps=20, name="heat3d-r2")
    fused = run_loop(problem, NumbaBackend(), wait=True, steps=20)
    oracle = sf.run(problem, backend="numpy")
    k = FUSED_STEPS_3D
    assert fused.summary["fused_steps"] == k * ((20 - 1) // k)  # the last step is a single one
    assert np.array_equal(fused.fields["u"], oracle.fields["u"])


def test_a_host_without_memory_for_the_middle_steps_walls_takes_single_steps(monkeypatch, caplog):
    """heat2d's walls change in time, so a pass of k steps keeps k - 2 arrays of walls; where they would take more
    than half the memory available, the run steps singly, says why, and gives the same fields."""
    import logging

    import stencilforge.resources as resources

    step = problems.linear_step("heat2d", shape=(40, 30))
    need = (FUSED_STEPS_2D - 2) * np.zeros(step.lattice.padded_shape, step.lattice.dtype).nbytes  # u's, as the run holds it
    fused = run_loop(named("heat2d", (40, 30)), NumbaBackend(), wait=True, steps=30)
    assert fused.summary["fused_steps"] > 0
    monkeypatch.setattr(resources, "available_bytes", lambda: 2 * need - 1)
    with caplog.at_level(logging.INFO, logger="stencilforge.simulation"):
        short = run_loop(named("heat2d", (40, 30)), NumbaBackend(), wait=True, steps=30)
    assert "fused_steps" not in short.summary
    assert any("one step per pass" in r.getMessage() and "middle steps do not fit in memory" in r.getMessage()
               for r in caplog.records)
    assert fused.fields and all(np.array_equal(short.fields[k], fused.fields[k]) for k in fused.fields)
    monkeypatch.setattr(resources, "available_bytes", lambda: 2 * need)
    assert run_loop(named("heat2d", (40, 30)), NumbaBackend(), wait=True, steps=30).summary["fused_steps"] > 0


@pytest.mark.parametrize("box", [False, True])
def test_fused_3d_pass_in_tiles_of_rows_gives_the_same_bits_on_any_split(monkeypatch, box):
    """Tiles of 2 rows along axis 1 (MARCH_TILE_CELLS; a plane of 6 or 7 rows makes 3 tiles, the last one longer), each
    with its middle states' rows grown by the reach of the steps after them: a radius-2 star, and a stencil
    with diagonals, whose middle states take their ghost columns and rows from out's and the carrier's."""
    if box:
        grid = Grid((11, 7, 9), (0.1, 0.12, 0.09), np.dtype("float64"), 1, (0.0,) * 3)
        sweep = Sweep("u_new", (Term("u", DIAGONAL), Term("f", Stencil.identity(3))))
    else:
        grid, sweep = jacobi((13, 6, 7), 2, "float32")
    monkeypatch.setattr(march, "MARCH_TILE_CELLS", 2 * grid.padded_shape[2])
    fields, walls = fused_inputs(grid, 3)
    expected = single_steps(NumbaBackend().sweep(sweep, grid), fields, walls, grid)
    kernel = load_kernel(fused_source(sweep, 3))
    coef = sweep_coefficients(sweep, grid.dtype)
    for tasks in (1, 2, 3, 5, 13):
        out = walls[0].copy()
        kernel(out, fields["u"], fields["f"], *walls[1:], coef, grid.ghost, tasks)
        assert np.array_equal(out[grid.interior], expected), f"{tasks} tasks"
        assert np.array_equal(out[ghost_mask(grid)], walls[0][ghost_mask(grid)])
