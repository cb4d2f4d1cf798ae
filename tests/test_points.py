"""Sources and receivers between grid nodes, against injection and interpolation written out by hand in NumPy.

The grids have spacing 1/4 and the points sit at quarters and halves of a cell, so every weight, and every
product of a weight with a signal or a float32 value, is exact: the hand computations give the same bits.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.distributed.decomposition import BlockGrid
from stencilforge.points import Recording

H = 0.25


def heat(shape, at, signal, dtype="float64", **kw) -> sf.Problem:
    """u.next = u + K h^2 lap(u), zero walls, zero start, one source at `at`."""
    grid = sf.Grid(shape, spacing=H, dtype=dtype)
    u = sf.Field("u", grid)
    return sf.Problem([sf.Eq(u.next, u + 0.125 * H * H * sf.laplacian(u))], boundary={u: sf.Dirichlet(0.0)},
                      sources=[sf.Source(u, at, signal, **kw)], dt=0.5, name="heat")


def bilinear(shape, i, fy, j, fx, amount) -> np.ndarray:
    out = np.zeros(shape)
    out[i, j], out[i, j + 1] = (1 - fy) * (1 - fx) * amount, (1 - fy) * fx * amount
    out[i + 1, j], out[i + 1, j + 1] = fy * (1 - fx) * amount, fy * fx * amount
    return out


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_a_source_between_nodes_adds_its_signal_with_linear_weights(ndim):
    """One step from zero: the field is the signal times the weights of the 2^d nodes around the point."""
    shape, frac = (6, 7, 5)[:ndim], (0.25, 0.5, 0.75)[:ndim]
    corner = (2, 3, 1)[:ndim]
    at = tuple((i + f) * H for i, f in zip(corner, frac))
    got = sf.run(heat(shape, at, 3.0), steps=1, backend="numpy").fields["u"]
    want = np.zeros(shape)
    for offsets in np.ndindex(*(2,) * ndim):
        w = np.prod([f if o else 1 - f for o, f in zip(offsets, frac)])
        want[tuple(i + o for i, o in zip(corner, offsets))] = w * 3.0
    np.testing.assert_array_equal(got, want)
    assert got.sum() == 3.0


def test_sources_sharing_a_node_add_one_after_another_in_their_order():
    """float32, one step from zero: 1, then 2^-24 (nearest), then half of 2^-23 (between two nodes) at one node.
    In that order each small amount rounds away (a tie, to even); added first, together they would not."""
    grid = sf.Grid((6, 7), spacing=H, dtype="float32")
    u = sf.Field("u", grid)
    node = (2 * H, 3 * H)
    p = sf.Problem([sf.Eq(u.next, u + 0.125 * H * H * sf.laplacian(u))], boundary={u: sf.Dirichlet(0.0)}, dt=0.5,
                   sources=[sf.Source(u, node, 1.0), sf.Source(u, (node[0] + 0.4 * H, node[1] - 0.3 * H), 2.0**-24, "nearest"),
                            sf.Source(u, (node[0], node[1] + 0.5 * H), 2.0**-23)])
    got = sf.run(p, steps=1, backend="numpy").fields["u"]
    want = np.zeros((6, 7), dtype=np.float32)
    want[2, 3] = np.float32(np.float32(np.float32(1.0) + np.float32(2.0**-24)) + np.float32(2.0**-24))
    want[2, 4] = 2.0**-24
    assert want[2, 3] == 1.0
    np.testing.assert_array_equal(got, want)


def test_a_source_between_nodes_matches_bilinear_injection_over_steps():
    """Heat stepped by hand (5-point Laplacian, zero walls) with the bilinear injection of sin(t) + 2 after each step."""
    shape, k = (7, 8), 0.125
    got = sf.run(heat(shape, (2.25 * H, 4.5 * H), lambda t: math.sin(t) + 2), steps=5, backend="numpy")
    u = np.zeros((shape[0] + 2, shape[1] + 2))
    for n in range(5):
        c = u[1:-1, 1:-1]
        lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * c
        u[1:-1, 1:-1] = c + k * lap + bilinear(shape, 2, 0.25, 4, 0.5, np.sin(n * 0.5) + 2)
    np.testing.assert_allclose(got.fields["u"], u[1:-1, 1:-1], rtol=1e-14, atol=1e-15)


def test_a_source_on_a_node_interpolated_linearly_is_the_nearest_node_source():
    """A leapfrog wave in float32: the same bits either way, also where the point's coordinate is formed otherwise
    than the node's (a few roundings off); between nodes the two differ."""
    def wave(at, interpolation):
        grid = sf.Grid((9, 10), extent=(0.9, 1.0), dtype="float32")  # nodes at (i + 1/2) / 10
        w = sf.Field("w", grid, levels=3)
        return sf.Problem([sf.Eq(w.next, 2 * w - w.prev + 0.2 * 0.01 * sf.laplacian(w))], boundary={w: sf.Dirichlet(0.0)},
                          sources=[sf.Source(w, at, lambda t: np.sin(7 * t) / 3, interpolation=interpolation)], dt=0.1)

    on_node = (0.05 + 3 * 0.1, (6 + 0.5) / 10)  # not bitwise 0.05 + 6 * 0.1, the grid's node
    assert on_node[1] != sf.Grid((9, 10), extent=(0.9, 1.0)).values("x")[6]

    def final(at, interpolation):
        return sf.run(wave(at, interpolation), steps=6, backend="numpy").fields["w"]

    np.testing.assert_array_equal(final(on_node, "linear"), final(on_node, "nearest"))
    assert not np.array_equal(final((0.37, 0.62), "linear"), final((0.37, 0.62), "nearest"))


def test_receivers_on_nodes_record_the_field_at_every_recorded_step():
    """float32 fields: each trace value is the node's value read from a Simulation stepped alongside."""
    def problem():
        return heat((6, 7), (2.5 * H, 3.25 * H), lambda t: 1.0 + t, dtype="float32")

    nodes = [(0, 0), (2, 3), (5, 6), (3, 4)]
    p = problem()
    u = p.fields["u"]
    p = sf.Problem(p.equations, boundary=p.boundary, sources=p.sources, dt=0.5,
                   receivers=[sf.Receiver(u, (i * H, j * H)) for i, j in nodes], record_every=2)
    traces = sf.run(p, steps=7, backend="numpy").traces
    sim = sf.Simulation(problem(), NumpyBackend())
    want = []
    for _ in range(7):
        sim.step()
        if sim.step_count % 2 == 0:
            want.append([float(sim.fields["u"][node]) for node in nodes])
    np.testing.assert_array_equal(traces.steps, [2, 4, 6])
    np.testing.assert_array_equal(traces.times, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(traces.values, np.array(want))
    assert traces.values.dtype == np.float64 and traces.fields == ("u",) * 4
    np.testing.assert_array_equal(traces.at, [(i * H, j * H) for i, j in nodes])


def test_numba_injects_and_records_the_bits_numpy_does():
    p = heat((6, 7), (2.5 * H, 3.3 * H), lambda t: 1.0 + t / 3, dtype="float32")
    p = sf.Problem(p.equations, boundary=p.boundary, sources=p.sources, dt=0.5,
                   receivers=[sf.Receiver(p.fields["u"], (1.1 * H, 2.7 * H)), sf.Receiver(p.fields["u"], (2.5 * H, 3.5 * H))])
    numba, numpy = (sf.run(p, steps=5, backend=b) for b in ("numba", "numpy"))
    np.testing.assert_array_equal(numba.fields["u"], numpy.fields["u"])
    np.testing.assert_array_equal(numba.traces.values, numpy.traces.values)


def test_receivers_between_nodes_record_bilinear_interpolation():
    """Two fields, receivers between nodes and on an edge between two nodes, against the weights by hand after
    every step; a Simulation loaded from a state starts its traces again."""
    grid = sf.Grid((6, 7), spacing=H, dtype="float32")
    u, v = sf.Field("u", grid), sf.Field("v", grid)
    rng = np.random.default_rng(5)
    points = [(u, 1.25, 2.5), (v, 3.5, 4.75), (u, 4.0, 1.25), (v, 0.75, 6.0)]  # (field, y / H, x / H)
    p = sf.Problem([sf.Eq(u.next, u + 0.1 * H * H * sf.laplacian(v)), sf.Eq(v.next, v - 0.1 * H * H * sf.laplacian(u))],
                   initial={u: rng.random((6, 7)), v: rng.random((6, 7))}, boundary={u: sf.Neumann(), v: sf.Neumann()},
                   receivers=[sf.Receiver(f, (y * H, x * H)) for f, y, x in points], dt=0.5)
    sim = sf.Simulation(p, NumpyBackend())
    want = []
    for _ in range(3):
        sim.step()
        row = []
        for f, y, x in points:
            a = sim.fields[f.name].astype(np.float64)
            i, j, fy, fx = int(y), int(x), y % 1, x % 1
            w = [(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx]
            cells = [(i, j), (i, min(j + 1, 6)), (min(i + 1, 5), j), (min(i + 1, 5), min(j + 1, 6))]
            row.append(sum((wk * a[c] for wk, c in zip(w, cells) if wk), start=-0.0))
        want.append(row)
    traces = sim.traces()
    np.testing.assert_array_equal(traces.values, np.array(want))
    np.testing.assert_array_equal(traces.steps, [1, 2, 3])
    sim.load(3, sim.state())
    sim.step()
    np.testing.assert_array_equal(sim.traces().steps, [4])


def test_a_block_holding_none_of_the_receivers_cells_records_no_terms():
    """A rank whose block holds no receiver's cell keeps an empty row per recorded step for rank 0's sum (it failed
    to hand its rows over, and the other ranks waited for them)."""
    grid = sf.Grid((6, 7), spacing=H)
    u = sf.Field("u", grid)
    p = sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u))], boundary={u: sf.Dirichlet(0.0)},
                   receivers=[sf.Receiver(u, (1.5 * H, 2.25 * H))])
    block = BlockGrid((2, 7), (H, H), np.dtype(np.float64), 1, (0.0, 0.0), start=(4, 0))  # rows 4 and 5
    recording = Recording(p, block, np, np.asarray, whole=False)
    recording.record(1, lambda name: np.ones(block.padded_shape))
    columns, rows = recording.terms()
    assert columns == [] and rows.shape == (1, 0)
    assert recording.traces(0.5, [(columns, rows)]).values.tolist() == [[-0.0]]


def test_points_outside_the_grid_and_unknown_interpolations_are_refused_in_one_line():
    grid = sf.Grid((6, 7), spacing=H)
    u = sf.Field("u", grid)
    eqs = [sf.Eq(u.next, u + 0.1 * sf.laplacian(u))]
    cases = {
        "source on u at (1.3, 0.5) lies outside the grid: axis 0 has its nodes from 0 to 1.25":
            dict(sources=[sf.Source(u, (1.3, 0.5), 1.0)]),
        "receiver on u at (0.5, -0.01) lies outside the grid: axis 1 has its nodes from 0 to 1.5":
            dict(receivers=[sf.Receiver(u, (0.5, -0.01))]),
        "source on u: interpolation is 'linear' or 'nearest', got 'cubic'": dict(sources=[sf.Source(u, (0.5, 0.5), 1.0, "cubic")]),
        "receiver on u: interpolation is 'linear' or 'nearest', got 'cubic'": dict(receivers=[sf.Receiver(u, (0.5, 0.5), "cubic")]),
        "record_every must be a positive integer, got 0": dict(receivers=[sf.Receiver(u, (0.5, 0.5))], record_every=0),
    }
    for message, kw in cases.items():
        with pytest.raises(sf.StencilforgeError) as err:
            sf.Problem(eqs, boundary={u: sf.Dirichlet(0.0)}, **kw)
        assert str(err.value) == message
    # nearest takes a point up to half a cell outside, as it always has
    sf.Problem(eqs, boundary={u: sf.Dirichlet(0.0)}, sources=[sf.Source(u, (1.3, 0.5), 1.0, interpolation="nearest")])
