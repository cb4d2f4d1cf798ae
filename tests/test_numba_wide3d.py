"""Numba's kernel for 3D sweeps wider than one vectorised loop (`schedules.wide`), bit for bit against the
NumPy oracle: shapes that are no multiple of any tile or row range, ghost layers wider than the stencil,
the output written in place of an input or into its own array, every cell it must not write poisoned."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from stencilforge import problems
from stencilforge.backends.numba import NumbaBackend
from stencilforge.backends.numba.kernel import row_views
from stencilforge.backends.numba.schedules import sweep_source, wide
from stencilforge.backends.numpy_ref import evaluate_sweep
from stencilforge.plan import Sweep, Term
from stencilforge.stencil import Stencil


def wave_sweep(shape, dtype, ghost):
    """wave3d's radius 8 sweep (the problem's own, so its kernel compiles once per dtype) on a grid with
    `ghost` layers."""
    step = problems.linear_step("wave3d", shape=shape, dtype=dtype, radius=8)
    return dataclasses.replace(step.lattice, ghost=ghost), step.sweep


def random_fields(grid, names, seed=7):
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in names}


def ghost_mask(grid):
    ghost = np.ones(grid.padded_shape, bool)
    ghost[grid.interior] = False
    return ghost


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("ghost", [8, 11])
def test_wave3d_in_place_is_the_oracle_bit_for_bit(dtype, ghost):
    """wave3d writes u.next over u.prev, which it reads at the cell: the in-place update."""
    grid, sweep = wave_sweep((17, 19, 23), dtype, ghost)
    fields = random_fields(grid, ("u", "u_prev", "vel"))
    ref = evaluate_sweep(sweep, grid, fields)
    fields["u_prev"][ghost_mask(grid)] = np.nan
    NumbaBackend().sweep(sweep, grid)(fields)
    assert np.array_equal(fields["u_prev"][grid.interior], ref)
    assert np.all(np.isnan(fields["u_prev"][ghost_mask(grid)])), "a ghost cell was written"


def test_wave3d_into_its_own_array_is_the_oracle_bit_for_bit():
    grid, sweep = wave_sweep((19, 23, 17), "float32", 9)
    sweep = dataclasses.replace(sweep, out="w")
    fields = random_fields(grid, ("u", "u_prev", "vel"))
    fields["w"] = np.full(grid.padded_shape, np.nan, grid.dtype)
    NumbaBackend().sweep(sweep, grid)(fields)
    assert np.array_equal(fields["w"][grid.interior], evaluate_sweep(sweep, grid, fields))
    assert np.all(np.isnan(fields["w"][ghost_mask(grid)])), "a ghost cell was written"


def two_wide_terms(dtype):
    """Two radius-4 stars (25 views each), one scaled by a field, then a centre term: the row buffer
    is reused across terms and the running total must be stored between them (in loops of 14 views)."""
    step = problems.linear_step("wave3d", shape=(23, 17, 19), dtype=dtype, radius=4)
    grid = dataclasses.replace(step.lattice, ghost=5)
    lap = Stencil.laplacian(3, 4, grid.spacing)
    return grid, Sweep("out", (Term("u", lap, factor="f"), Term("f", lap), Term("u", Stencil.identity(3))))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_two_wide_terms_are_the_oracle_bit_for_bit(dtype, monkeypatch):
    monkeypatch.setattr(wide, "WIDE_LOOP_VIEWS", 14)
    grid, sweep = two_wide_terms(dtype)
    assert len(row_views(sweep)) > wide.WIDE_LOOP_VIEWS
    fields = random_fields(grid, ("u", "f"))
    fields["out"] = np.full(grid.padded_shape, np.nan, grid.dtype)
    NumbaBackend().sweep(sweep, grid)(fields)
    assert np.array_equal(fields["out"][grid.interior], evaluate_sweep(sweep, grid, fields))
    assert np.all(np.isnan(fields["out"][ghost_mask(grid)])), "a ghost cell was written"


@pytest.mark.parametrize("case,budget", [("wave3d", 14), ("wave3d", 22), ("two wide terms", 14), ("two wide terms", 18)])
def test_each_loop_reads_at_most_the_budget_of_row_views(case, budget, monkeypatch):
    """Every loop over j stays within WIDE_LOOP_VIEWS arrays (views, row buffers and the store)."""
    monkeypatch.setattr(wide, "WIDE_LOOP_VIEWS", budget)
    grid, sweep = wave_sweep((17, 19, 23), "float32", 8) if case == "wave3d" else two_wide_terms("float32")
    source = sweep_source(sweep, grid)
    bodies = re.findall(r"for j in range\(n\):\n\s*(.*)", source)
    assert len(bodies) >= 2, "a wide sweep is split into several loops"
    for body in bodies:
        assert len(set(re.findall(r"(\w+)\[j\]", body))) <= wide.WIDE_LOOP_VIEWS


@pytest.mark.parametrize("case", ["wave3d in place", "two wide terms"])
def test_kernels_compiled_for_the_grids_shape_are_the_oracle_bit_for_bit(case, monkeypatch):
    """Grids from CONSTANT_SHAPE_CELLS get kernels with constant offsets (`_constant_offsets`): one view per field,
    the same bits; in loops of 14 views for the two wide terms, through the row buffer. The kernel refuses fields
    of another shape."""
    monkeypatch.setattr(wide, "CONSTANT_SHAPE_CELLS", 0)
    if case == "two wide terms":
        monkeypatch.setattr(wide, "WIDE_LOOP_VIEWS", 14)
        grid, sweep = two_wide_terms("float64")
        fields = random_fields(grid, ("u", "f"))
        fields["out"] = np.full(grid.padded_shape, np.nan, grid.dtype)
    else:
        grid, sweep = wave_sweep((17, 19, 23), "float32", 11)
        fields = random_fields(grid, ("u", "u_prev", "vel"))
    assert "lo_u[np.uint64(j)" in sweep_source(sweep, grid)
    ref = evaluate_sweep(sweep, grid, fields)
    fields[sweep.out][ghost_mask(grid)] = np.nan
    launch = NumbaBackend().sweep(sweep, grid)
    launch(fields)
    assert np.array_equal(fields[sweep.out][grid.interior], ref)
    assert np.all(np.isnan(fields[sweep.out][ghost_mask(grid)])), "a ghost cell was written"
    other = {n: np.zeros((grid.padded_shape[0], grid.padded_shape[1] + 1, grid.padded_shape[2]), grid.dtype) for n in fields}
    with pytest.raises(ValueError, match="another grid"):
        launch(other)
