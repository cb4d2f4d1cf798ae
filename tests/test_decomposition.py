"""Decomposition and exact reductions without MPI: process grids, block extents, local setups."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stencilforge import problems
from stencilforge.distributed import Decomposition, choose_dims, split
from stencilforge.distributed.decomposition import factorizations
from stencilforge.distributed.halo import HaloExchange
from stencilforge.distributed.runner import localize, minimum_extents, operator_halo
from stencilforge.errors import StencilforgeError
from stencilforge.grid import pitched
from stencilforge.reductions import combine, local_part


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
    setup = problems.build("heat2d", shape=(37, 23))
    decomp = Decomposition((37, 23), (3, 2))
    for rank in range(6):
        coords = decomp.coords_of(rank)
        block = decomp.block_grid(setup.grid, coords)
        for axis in range(2):
            start, size = decomp.extent(coords)[axis]
            expected = setup.grid.coords(axis)[start : start + size + 2]
            assert np.array_equal(block.coords(axis), expected)


def test_local_setups_hold_their_slice_and_sources_only_on_the_owner():
    setup = problems.build("wave3d", shape=(12, 11, 9), radius=2, source=True)
    decomp = Decomposition.create(4, setup.grid.shape, minimum_extents(setup))
    g = setup.grid.ghost
    owners = 0
    for rank in range(4):
        coords = decomp.coords_of(rank)
        local = localize(setup, decomp, coords)
        ext = decomp.extent(coords)
        sl = tuple(slice(s, s + n + 2 * g) for s, n in ext)
        for name, arr in local.fields.items():
            assert np.array_equal(arr, setup.fields[name][sl])
        for src in local.sources:
            owners += 1
            assert tuple(i + s for i, (s, _) in zip(src.index, ext)) == setup.sources[0].index
    assert owners == 1


def test_derivative_blocks_need_the_closure_width_along_the_operator_axis():
    setup = problems.build("derivatives", shape=(14, 26), axis=1, accuracy=4)
    need = minimum_extents(setup)
    assert need[0] == 1 and need[1] == setup.operator.min_length
    assert operator_halo(setup.operator) == 2
    with pytest.raises(StencilforgeError, match="axis 1"):
        Decomposition.create(8, setup.grid.shape, need, (1, 8))


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
