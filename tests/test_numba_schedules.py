"""Numba's schedules for 3D sweeps, bit for bit against the NumPy oracle on shapes that are not multiples of
any tile or row chunk, with every output cell the kernel must not write poisoned with NaN."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from stencilforge import problems
from stencilforge.backends.numba import NumbaBackend
from stencilforge.backends.numba.kernel import FUSED_VIEW_LIMIT, row_views
from stencilforge.backends.numpy_ref import evaluate_sweep


def wave(shape, dtype="float32", radius=8):
    """wave3d's sweep (the one the problem runs, so its kernel is compiled once for every test)."""
    step = problems.linear_step("wave3d", shape=shape, dtype=dtype, radius=radius)
    return step.lattice, step.sweep


def random_fields(grid, seed=3):
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in ("u", "u_prev", "vel")}


def ghost_mask(grid):
    ghost = np.ones(grid.padded_shape, bool)
    ghost[grid.interior] = False
    return ghost


@pytest.mark.parametrize("shape,dtype", [((37, 29, 41), "float32"), ((17, 17, 18), "float64")])
def test_wide_sweep_is_the_oracle_bit_for_bit(shape, dtype):
    grid, sweep = wave(shape, dtype)
    assert len(row_views(sweep)) > FUSED_VIEW_LIMIT
    fields = random_fields(grid)
    ref = evaluate_sweep(sweep, grid, fields)
    fields["u_prev"][ghost_mask(grid)] = np.nan  # the output is read only at the cell it writes
    NumbaBackend().sweep(sweep, grid)(fields)
    assert np.array_equal(fields["u_prev"][grid.interior], ref)
    assert np.all(np.isnan(fields["u_prev"][ghost_mask(grid)])), "a ghost cell was written"


def test_wide_sweep_gives_the_same_bits_on_any_thread_count():
    """The thread count sets the tiles; it must not change a bit."""
    grid, sweep = wave((23, 67, 31))
    fields = random_fields(grid)
    ref = evaluate_sweep(sweep, grid, fields)
    kernel = NumbaBackend().sweep(sweep, grid)
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, before}):
            numba.set_num_threads(threads)
            got = {k: v.copy() for k, v in fields.items()}
            kernel(got)
            assert np.array_equal(got["u_prev"][grid.interior], ref)
    finally:
        numba.set_num_threads(before)


def wide_2d(case):
    from stencilforge.grid import Grid
    from stencilforge.plan import Sweep, Term
    from stencilforge.problems import poisson2d
    from stencilforge.stencil import Stencil

    grid = Grid((23, 41), (0.01, 0.013), np.dtype("float64"), 4, (0.0, 0.0))
    lap = Stencil.laplacian(2, 4, grid.spacing)
    if case == "jacobi":
        return grid, poisson2d.jacobi_sweep(lap, with_rhs=True)
    return grid, Sweep("u_new", (Term("u", lap, factor="f"), Term("f", lap), Term("u", Stencil.identity(2))))


@pytest.mark.parametrize("case", ["jacobi", "two wide terms"])
def test_wide_2d_sweep_is_the_oracle_bit_for_bit(case):
    grid, sweep = wide_2d(case)
    assert len(row_views(sweep)) > FUSED_VIEW_LIMIT
    rng = np.random.default_rng(5)
    fields = {n: rng.uniform(-1, 1, grid.padded_shape) for n in ("u", "f")}
    out = np.full(grid.padded_shape, np.nan)
    NumbaBackend().sweep(sweep, grid)({**fields, "u_new": out})
    assert np.array_equal(out[grid.interior], evaluate_sweep(sweep, grid, fields))
    assert np.all(np.isnan(out[ghost_mask(grid)])), "a ghost cell was written"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(7, 11), (53, 29)])
def test_axis_operator_is_the_oracle_bit_for_bit(axis, shape, dtype):
    from stencilforge.backends.numpy_ref import evaluate_axis_operator
    from stencilforge.problems import derivatives

    op = derivatives.operator(axis, 0.37, 4)
    u = np.random.default_rng(11).uniform(-1, 1, shape).astype(dtype)
    got = [np.full(shape, np.nan, dtype=dtype) for _ in op.outputs]
    ref = [np.full(shape, np.nan, dtype=dtype) for _ in op.outputs]
    NumbaBackend().axis_operator(op, np.dtype(dtype))(u, *got)
    evaluate_axis_operator(op, u, ref)
    for g, r in zip(got, ref):
        assert np.all(np.isfinite(g)) and np.array_equal(g, r)


@pytest.mark.parametrize("shape, ghost", [((5,), 1), ((7, 9), 1), ((20, 18, 23), 8), ((3, 4, 5), 0), ((2, 2), 3)])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_fields_start_their_interior_on_a_cache_line(shape, ghost, dtype):
    a = np.random.default_rng(1).random(shape).astype(dtype)
    out = NumbaBackend().field(a, ghost)
    assert out.flags.c_contiguous and out.shape == a.shape and out.dtype == a.dtype
    assert np.array_equal(out, a) and not np.shares_memory(out, a)
    if min(shape) > ghost:
        assert out[(slice(ghost, None),) * a.ndim].ctypes.data % 64 == 0
