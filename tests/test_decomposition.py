"""Decomposition and exact reductions without MPI: process grids, block extents, what each block holds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stencilforge import problems
from stencilforge.distributed import Decomposition, choose_dims, split
from stencilforge.distributed.decomposition import factorizations
from stencilforge.distributed.halo import HaloExchange
from stencilforge.errors import StencilforgeError
from stencilforge.grid import pitched
from stencilforge.ir.nodes import Constant, Expr
from stencilforge.points import Injection
from stencilforge.printers.numpy import source_signal
from stencilforge.reductions import array_bins, combine, fold_bins, local_part, loop_bins, squares_part
from stencilforge.simulation import axis_operator, initial_array


@given(st.integers(1, 500), st.integers(1, 40))
def test_split_covers_the_axis_with_sizes_differing_by_at_most_one(n, parts):
    pieces = split(n, parts)
    assert [s for s, _ in pieces] == list(np.cumsum([0] + [k for _, k in pieces[:-1]]))
    sizes = [k for _, k in pieces]
    assert sum(sizes) == n and max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize(
    "nprocs,shape,expected",
    [
        (4, (64, 64), (2, 2)),
        (8, (32, 32, 32), (2, 2, 2)),
        (4, (1000, 10), (4, 1)),
        (4, (10, 1000), (1, 4)),
        (6, (60, 40), (3, 2)),
        (1, (5, 5, 5), (1, 1, 1)),
        (3, (30, 30), (3, 1)),
    ],
)
def test_automatic_process_grid_minimises_the_cut_area(nprocs, shape, expected):
    assert choose_dims(nprocs, shape, (1,) * len(shape)) == expected


def test_automatic_process_grid_avoids_blocks_smaller_than_the_halo():
    assert choose_dims(4, (17, 64, 64), (8, 8, 8)) == (1, 2, 2)
    with pytest.raises(StencilforgeError, match="use fewer ranks"):
        choose_dims(3, (17, 17, 17), (8, 8, 8))


@given(st.integers(1, 24), st.lists(st.integers(1, 40), min_size=1, max_size=3))
@settings(max_examples=60, deadline=None)
def test_blocks_tile_the_global_grid_exactly(nprocs, shape):
    try:
        decomp = Decomposition.create(nprocs, shape, (1,) * len(shape))
    except StencilforgeError:
        assert all(not all(n // p >= 1 for n, p in zip(shape, d)) for d in factorizations(nprocs, len(shape)))
        return
    assert math.prod(decomp.dims) == nprocs
    owner = np.zeros(shape, dtype=int)
    for rank in range(nprocs):
        ext = decomp.extent(decomp.coords_of(rank))
        assert all(size >= 1 for _, size in ext)
        owner[tuple(slice(s, s + n) for s, n in ext)] += 1
    assert (owner == 1).all()


def test_given_process_grids_are_checked():
    with pytest.raises(StencilforgeError, match="makes 6 processes but 4 ranks"):
        Decomposition.create(4, (16, 16), (1, 1), (2, 3))
    with pytest.raises(StencilforgeError, match="needs 2 values"):
        Decomposition.create(4, (16, 16), (1, 1), (2, 2, 1))
    with pytest.raises(StencilforgeError, match=r"blocks of 4 points along axis 0 .*--procs 1 2 2"):
        Decomposition.create(4, (17, 64, 64), (8, 8, 8), (4, 1, 1))
    assert Decomposition.create(4, (16, 16), (1, 1), (4, 1)).dims == (4, 1)


def test_physical_faces_are_only_on_the_global_boundary():
    decomp = Decomposition((9, 9), (3, 1))
    assert decomp.physical_faces((0, 0)) == ((0, 0), (1, 0), (1, 1))
    assert decomp.physical_faces((1, 0)) == ((1, 0), (1, 1))
    assert decomp.physical_faces((2, 0)) == ((0, 1), (1, 0), (1, 1))


def test_block_coordinates_are_bitwise_the_global_ones():
    lattice = problems.linear_step("heat2d", shape=(37, 23)).lattice
    decomp = Decomposition((37, 23), (3, 2))
    for rank in range(6):
        coords = decomp.coords_of(rank)
        block = decomp.block_grid(lattice, coords)
        for axis in range(2):
            start, size = decomp.extent(coords)[axis]
            expected = lattice.coords(axis)[start : start + size + 2]
            assert np.array_equal(block.coords(axis), expected)


def test_blocks_hold_their_slice_of_the_initial_values_and_the_source_cells_they_cover():
    """What each rank of a decomposed run builds (`DecomposedSimulation`): its block of the lattice, every time
    level's initial values there (bitwise its slice of one process's: ghost layers included where the value is an
    expression; an array's ghost cells come from the neighbours' exchange), and the cells of the sources it holds
    (each cell on exactly one block, at its global place, with its weight)."""
    step = problems.linear_step("wave3d", shape=(12, 11, 9), radius=2, source=True, velocity="layered")
    problem, whole, values = step.problem, step.lattice, step.values
    dt = values[problem.dt.name] if isinstance(problem.dt, Constant) else problem.dt.value
    signals = [source_signal(src.signal, values) for src in problem.sources]
    g = whole.ghost

    def source_cells(lattice, start):
        """(field, global cell, weight) of each source cell the lattice holds."""
        rounds = Injection(problem, lattice, signals, np).rounds
        return sorted((name, *(int(i) - g + s for i, s in zip(cell, start)), float(w))  # padded index -> global cell
                      for name, index, _, weights in rounds for cell, w in zip(zip(*index), weights))

    levels = {f.name: (-1, 0) if f.levels == 3 else (0,) for f in problem.analysis.fields}
    decomp = Decomposition.create(4, whole.shape, (g,) * whole.ndim)
    found = []
    for rank in range(4):
        coords = decomp.coords_of(rank)
        ext = decomp.extent(coords)
        block = decomp.block_grid(whole, coords)
        sl = tuple(slice(s, s + n + 2 * g) for s, n in ext)
        for name, kept in levels.items():
            for level in kept:
                mine = initial_array(problem, block, name, level, values, dt)
                ref = initial_array(problem, whole, name, level, values, dt)[sl]
                if not isinstance(problem.initial.get((name, level), problem.initial.get((name, 0))), Expr):
                    mine, ref = mine[block.interior], ref[block.interior]
                assert np.array_equal(mine, ref), (rank, name, level)
        found += source_cells(block, [s for s, _ in ext])
    expected = source_cells(whole, [0] * whole.ndim)
    assert expected and sorted(found) == expected


def test_derivative_blocks_need_the_closure_width_along_the_operator_axis():
    """The one-sided derivatives' operator (`AxisOperator`): a neighbour sends `halo` layers along its axis, and
    a block holds at least `min_length` points there (the closure rows), which DecomposedSimulation asks of the
    process grid."""
    problem = problems.problem("derivatives", shape=(14, 26), axis=1, accuracy=4)[0]
    (stage,) = problem.analysis.operators
    op = axis_operator(stage)
    assert op == problems.derivatives.operator(1, problem.grid.spacing[1], 4)  # the kernel-level operator, as the bench applies it
    assert op.axis == 1 and op.halo == 2 and op.min_length > problem.analysis.ghost
    need = tuple(max(problem.analysis.ghost, op.min_length if a == op.axis else 1) for a in range(2))
    with pytest.raises(StencilforgeError, match="axis 1"):
        Decomposition.create(8, problem.grid.shape, need, (1, 8))
    assert Decomposition.create(4, problem.grid.shape, need, (1, 4)).dims == (1, 4)


@settings(deadline=None)  # the first call loads (or compiles) the binning loop
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), max_size=60), st.integers(1, 6))
def test_global_sum_is_the_correctly_rounded_sum_for_any_split(values, parts):
    v = np.array(values, dtype=np.float64)
    pieces = np.array_split(v, parts)
    try:
        expected = math.fsum(values)
    except OverflowError:
        return
    assert combine([local_part(p) for p in pieces]) == expected
    assert combine([local_part(p) for p in reversed(pieces)]) == expected


@settings(deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), max_size=60), st.integers(1, 6))
def test_the_global_sum_of_squares_is_the_correctly_rounded_sum_of_float64_squares(values, parts):
    v = np.array(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        squares = v * v
    pieces = np.array_split(v, parts)
    got = combine([squares_part(p) for p in pieces])
    if np.isfinite(squares).all():
        assert got == math.fsum(squares)
    else:
        assert got == math.inf


@settings(deadline=None)  # the first call loads (or compiles) the loop
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=60), st.booleans(),
       st.sampled_from([np.float64, np.float32]))
def test_the_compiled_loop_bins_as_numpys_array_code_does(values, square, dtype):
    """The two ways of binning a host array (by size, `reductions.LOOP_VALUES`) give the same bins, or both refuse
    a value (or square) that is not finite; the loop reads float32 as it is, NumPy's code widened first."""
    with np.errstate(over="ignore"):
        v = np.array(values, dtype=dtype)
    a, b = array_bins(v.astype(np.float64), square), loop_bins(v, square)
    assert (a is None) == (b is None)
    if a is not None:
        assert fold_bins(*a) == fold_bins(*b)


def test_exact_sums_of_a_large_array_with_subnormals_and_extremes(monkeypatch):
    from stencilforge import reductions

    rng = np.random.default_rng(4)
    values = np.concatenate([rng.standard_normal(200_000) * np.exp(rng.uniform(-745, 690, 200_000)),
                             [5e-324, -5e-324, 2.2250738585072014e-308, -0.0]])
    small = values[np.abs(values) < 1e30].astype(np.float32)  # float32 widens exactly, then squares in float64
    for loop_from in (1 << 30, 1):  # NumPy's array code, then the compiled loop
        monkeypatch.setattr(reductions, "LOOP_VALUES", loop_from)
        assert combine([local_part(values)]) == math.fsum(values)
        assert combine([squares_part(small)]) == math.fsum(small.astype(np.float64) ** 2) > 0


def test_non_finite_values_propagate_through_the_global_sum():
    assert math.isnan(combine([local_part(np.array([1.0, np.nan])), local_part(np.array([2.0]))]))
    assert combine([local_part(np.array([np.inf])), local_part(np.array([2.0]))]) == math.inf


class _SelfTransport:
    """One rank that is its own neighbour on every side: what it sends is what it receives. Like MPI and
    NCCL, it moves a buffer's bytes from its pointer, so it takes only contiguous buffers."""

    def exchange(self, pairs):
        for send, dest, recv, source in pairs:
            assert send.flags.c_contiguous and recv.flags.c_contiguous, "a transport got a buffer with gaps"
            if dest >= 0 and source >= 0:
                recv[...] = send


@pytest.mark.parametrize("shape,ghost", [((5, 6, 7), 1), ((6, 5, 9), 2), ((7, 9), 2)])
def test_halo_exchange_packs_faces_of_an_array_with_gaps_between_rows(shape, ghost):
    """The cuda backend's fields keep rows a pitch apart, so even first-axis faces are not contiguous:
    they must be packed, and the ghosts must come out as they do for a C-contiguous array."""
    padded = tuple(n + 2 * ghost for n in shape)
    values = np.random.default_rng(2).uniform(-1, 1, padded)
    pitch, first = padded[-1] + 5, 3
    buf = np.full(math.prod(padded[:-1]) * pitch + first, -7.0)
    lined = pitched(buf, padded, pitch, first)
    lined[...] = values
    dense = values.copy()
    g = (ghost,) * len(shape)
    for arr in (dense, lined):
        HaloExchange(_SelfTransport(), padded, arr.dtype, g, g, g, [(0, 0)] * len(shape))(arr)
    np.testing.assert_array_equal(lined, dense)
    assert not np.array_equal(dense, values)  # the ghosts were refreshed
    assert (buf[:first] == -7.0).all() and (buf[first:].reshape(-1, pitch)[:, padded[-1] :] == -7.0).all()
