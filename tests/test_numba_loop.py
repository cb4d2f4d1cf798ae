"""Numba's `loop` schedule: a small grid's steps with the time loop inside one call, bit for bit single Numba steps
and the NumPy oracle (every middle state's walls from its own array, NaN where nothing may be read), and through the
time loop sf.run takes, landing on every observed and checked step."""

from __future__ import annotations

import math

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.numba import NumbaBackend
from stencilforge.backends.numba.schedules.loop import LOOP_CELLS, LOOP_STEPS
from stencilforge.backends.numpy_ref import NumpyBackend
from test_fused_steps import Recorder, named, run_loop, same_record
from test_numba_march import DIAGONAL, assert_single_steps_bits, fused_fields, fused_inputs, jacobi, single_steps


@pytest.mark.parametrize("shape, radius, dtype, steps", [
    ((81,), 1, "float64", None), ((40,), 3, "float32", 5), ((23, 19), 1, "float64", 2), ((31, 33), 2, "float32", 7),
    ((9, 11, 13), 1, "float64", 3), ((1, 40), 1, "float64", 4)])
def test_a_loop_call_is_single_numba_sweeps_and_oracle_sweeps_bit_for_bit(shape, radius, dtype, steps):
    grid, sweep = jacobi(shape, radius, dtype) if len(shape) > 1 else one_d(shape, radius, dtype)
    assert math.prod(grid.padded_shape) <= LOOP_CELLS[grid.ndim]
    be = NumbaBackend()
    launch = be.sweep_fused(sweep, grid, steps)
    assert launch.steps == (steps or LOOP_STEPS)
    assert_single_steps_bits(launch, be, sweep, grid)


def one_d(shape, radius, dtype):
    from stencilforge.grid import Grid
    from stencilforge.problems.poisson2d import jacobi_sweep
    from stencilforge.stencil import Stencil

    grid = Grid(tuple(shape), (0.01,), np.dtype(dtype), radius, (0.0,))
    return grid, jacobi_sweep(Stencil.laplacian(1, radius, grid.spacing), with_rhs=True)


def test_a_loop_call_takes_every_middle_states_ghosts_from_its_array():
    """A diagonal stencil reads ghost corners: each middle state's come from out's (the first) or its carrier's."""
    from stencilforge.grid import Grid
    from stencilforge.plan import Sweep, Term
    from stencilforge.stencil import Stencil

    grid = Grid((11, 7, 9), (0.1, 0.12, 0.09), np.dtype("float64"), 1, (0.0,) * 3)
    sweep = Sweep("u_new", (Term("u", DIAGONAL), Term("f", Stencil.identity(3))))
    fields, walls = fused_inputs(grid, 5)
    out = walls[0].copy()
    NumbaBackend().sweep_fused(sweep, grid, 5)(fused_fields(fields, walls, out))
    assert np.array_equal(out[grid.interior], single_steps(NumbaBackend().sweep(sweep, grid), fields, walls, grid))


@pytest.mark.parametrize("name,shape", [("heat2d", (23, 19)), ("poisson2d", (21, 26)), ("heat3d", (9, 11, 13))])
def test_a_looped_run_lands_on_every_observed_step_with_the_single_steps_bits(name, shape):
    """heat's walls change in time (the middle steps' are filled ahead, one array each); Poisson's are static."""
    opts = dict(steps=3 * LOOP_STEPS + 5, check_every=LOOP_STEPS + 3)
    records = {key: Recorder(LOOP_STEPS + 7) for key in ("numpy", "single", "looped")}
    results = {
        "numpy": run_loop(named(name, shape), NumpyBackend(), observers=(records["numpy"],), **opts),
        "single": run_loop(named(name, shape), NumbaBackend(), observers=(records["single"],), fuse_steps=False, **opts),
        "looped": run_loop(named(name, shape), NumbaBackend(), wait=True, observers=(records["looped"],), **opts),
    }
    assert results["looped"].summary["steps_per_pass"] == LOOP_STEPS and results["looped"].summary["fused_steps"] > 0
    assert records["looped"].seen and same_record(records["looped"], records["single"])
    assert same_record(records["looped"], records["numpy"])
    for key in ("numpy", "single"):
        assert all(np.array_equal(results["looped"].fields[k], results[key].fields[k]) for k in results[key].fields)


def test_a_1d_problem_of_ones_own_loops_with_numpys_bits():
    """The CFD course's first steps are 1D: a line of 81 points with walls that change in time runs LOOP_STEPS steps a
    call, with numpy's fields."""
    g = sf.Grid((81,), extent=2.0, dtype="float64")
    u = sf.Field("u", g)
    problem = sf.Problem([sf.Eq(u.next, u + 0.3 * (u[1] - 2 * u + u[-1]))], initial={u: sf.sin(g.x)},
                         boundary={u: sf.Dirichlet(sf.cos(g.t))}, dt=0.01)
    looped = run_loop(problem, NumbaBackend(), wait=True, steps=200)
    assert looped.summary["steps_per_pass"] == LOOP_STEPS and looped.summary["fused_steps"] > 0
    assert np.asarray(looped.fields["u"]).tobytes() == np.asarray(sf.run(problem, steps=200, backend="numpy").fields["u"]).tobytes()


def test_grids_beyond_the_loops_size_take_the_march():
    grid, sweep = jacobi((160, 160), 1, "float64")
    assert math.prod(grid.padded_shape) > LOOP_CELLS[2]
    assert NumbaBackend().sweep_fused(sweep, grid).steps != LOOP_STEPS
