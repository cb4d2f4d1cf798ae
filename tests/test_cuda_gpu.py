"""The cuda backend against the numpy oracle, on a GPU (skipped where there is none).

Every strategy x problem x dtype, fresh random inputs each run (the seed is in
the failure message), outputs poisoned with NaN, shapes that are not multiples
of any tile and shapes smaller than one tile.

Tolerance: the float64 oracle on the same inputs, and an error bound of
k * u * A per cell, where u is the unit roundoff of the dtype (2**-24 for
float32, 2**-53 for float64), A is the same sum taken over |coefficients| x
|values| (so cancellation cannot hide an error) and k = 2 * (points + 2).
"""

from __future__ import annotations

import logging
import math
import os

import numpy as np
import pytest

from stencilforge import problems
from stencilforge.backends import get_backend
from stencilforge.backends.base import fused_walls
from stencilforge.backends.cuda import CudaBackend, check_fits, codegen, kernel as cuda_kernel
from stencilforge.backends.cuda.kernel import FLAT_CELLS
from stencilforge.backends.cuda.tune import fused_choice
from stencilforge.backends.numpy_ref import NumpyBackend, evaluate_axis_operator, evaluate_sweep
from stencilforge.errors import StencilforgeError
from stencilforge.grid import Grid, row_pitch
from stencilforge.plan import AxisOperator, Derivative1D, Sweep, Term
from stencilforge.problems import derivatives as deriv, poisson2d
from stencilforge.runner import run
from stencilforge.simulation import initial_array
from stencilforge.stencil import Stencil

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

import cupy as cp  # noqa: E402  (only importable where the skip above did not fire)

UNIT_ROUNDOFF = {np.dtype(np.float32): 2.0**-24, np.dtype(np.float64): 2.0**-53}
DTYPES = ("float32", "float64")
SWEEP_STRATEGIES = ("naive", "rows", "tiled", "streaming", "streaming_l1", "pipelined", "auto")
BACKENDS: dict[str, CudaBackend] = {}


def backend(strategy: str, tile=None) -> CudaBackend:
    """One backend per strategy for the session, so compiled modules are reused across tests."""
    key = f"{strategy}{tile}"
    if key not in BACKENDS:
        BACKENDS[key] = CudaBackend(strategy=strategy, tile=tile)
    return BACKENDS[key]


def rng_with_seed():
    seed = int.from_bytes(os.urandom(4), "little")
    return np.random.default_rng(seed), seed


def abs_sweep(sweep: Sweep) -> Sweep:
    terms = tuple(
        Term(t.field, Stencil(tuple((o, abs(float(c))) for o, c in t.stencil.entries)), t.factor) for t in sweep.terms
    )
    return Sweep(sweep.out, terms)


def nan_gaps(field):
    """`field` (the backend's layout, rows a pitch apart) with NaN between its rows, so a kernel that
    strays off a row shows."""
    pitch = row_pitch(field)
    rows = cp.lib.stride_tricks.as_strided(field, (math.prod(field.shape[:-1]), pitch), (pitch * field.itemsize, field.itemsize))
    rows[:, field.shape[-1] :] = cp.nan
    return field


def named(name: str, shape=None, dtype=None, **params):
    """A named problem as `sf.run` steps it."""
    return problems.problem(name, shape=shape, dtype=dtype, **params)[0]


def sweep_case(name: str, shape, dtype: str, be: CudaBackend, **params):
    linear = problems.linear_step(name, shape=shape, dtype=dtype, **params)
    sweep, grid = linear.sweep, linear.lattice
    rng, seed = rng_with_seed()
    host = {n: rng.uniform(-1.0, 1.0, grid.padded_shape).astype(grid.dtype) for n in sweep.inputs}
    if sweep.out not in host:
        host[sweep.out] = np.full(grid.padded_shape, np.nan, grid.dtype)
    dev = {n: be.asarray(a) for n, a in host.items()}
    step = be.sweep(sweep, grid)
    step(dev)
    got = be.to_host(dev[sweep.out])
    lined = {n: nan_gaps(be.field(a, grid.ghost)) for n, a in host.items()}  # the time loop's layout
    step(lined)
    assert np.array_equal(be.to_host(lined[sweep.out]), got, equal_nan=True), f"{name} {shape} {dtype}: layouts differ"
    h64 = {n: a.astype(np.float64) for n, a in host.items()}
    g64 = Grid(grid.shape, grid.spacing, np.dtype(np.float64), grid.ghost, grid.lower)
    ref = evaluate_sweep(sweep, g64, h64)
    bound = evaluate_sweep(abs_sweep(sweep), g64, {n: np.abs(a) for n, a in h64.items()})
    points = sum(len(t.stencil.entries) for t in sweep.terms)
    tol = 2 * (points + 2) * UNIT_ROUNDOFF[grid.dtype] * bound + 1e-300
    inner = got[grid.interior]
    where = f"{name} {shape} {dtype} strategy={step.strategy} tile={step.tile} seed={seed}"
    assert np.isfinite(inner).all(), f"unwritten (NaN) interior cells: {where}"
    err = np.abs(inner - ref)
    assert (err <= tol).all(), f"max error {err.max():.3e} over bound at {np.unravel_index(np.argmax(err - tol), err.shape)}: {where}"
    ghost = np.ones(grid.padded_shape, bool)
    ghost[grid.interior] = False
    # host[sweep.out] is what the output held before the launch: NaN, or the input of an in-place sweep (wave3d)
    assert np.array_equal(got[ghost], host[sweep.out][ghost], equal_nan=True), f"a ghost cell was written: {where}"
    return step


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", SWEEP_STRATEGIES)
@pytest.mark.parametrize(
    "name,shape",
    [
        ("poisson2d", (1000, 1537)),
        ("poisson2d", (5, 9)),
        ("heat2d", (1000, 1537)),
        ("heat2d", (3, 4)),
        ("heat3d", (129, 67, 255)),
        ("heat3d", (3, 5, 7)),
    ],
)
def test_sweeps_match_oracle(name, shape, dtype, strategy):
    sweep_case(name, shape, dtype, backend(strategy))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", SWEEP_STRATEGIES)
@pytest.mark.parametrize("radius", range(1, 9))
def test_wave3d_every_radius_small(radius, dtype, strategy):
    r = radius
    sweep_case("wave3d", (2 * r + 1, 2 * r + 3, 2 * r + 6), dtype, backend(strategy), radius=r)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", SWEEP_STRATEGIES)
@pytest.mark.parametrize("radius", [1, 4, 8])
def test_wave3d_awkward_shape(radius, dtype, strategy):
    sweep_case("wave3d", (129, 67, 255), dtype, backend(strategy), radius=radius)


@pytest.mark.parametrize(
    "strategy,tile",
    [
        ("streaming", (1, 1, 32)), ("streaming", (3, 5, 7)), ("streaming", (130, 2, 64)),
        ("streaming_l1", (3, 5, 7)), ("streaming_l1", (130, 2, 64)),
        ("pipelined", (1, 1, 32)), ("pipelined", (3, 5, 7)), ("pipelined", (130, 2, 64)), ("pipelined", (5, 32, 32)),
        ("tiled", (3, 5, 7)), ("naive", (1, 3, 5)), ("rows", (3, 5, 7)), ("rows", (2, 1, 1024)),
    ],
)
def test_odd_tiles_and_tiles_larger_than_the_grid(strategy, tile):
    sweep_case("wave3d", (129, 67, 255), "float32", backend(strategy, tile), radius=3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("radius", [2, 4, 6, 8])
@pytest.mark.parametrize("shape", [(21, 35, 132), (129, 67, 252), "small"])
def test_streaming_vec_matches_oracle_and_scalar_streaming_bits(shape, radius, dtype):
    """Vectors of cells (x extents that are multiples of 4, so the vector kernel runs), against the
    oracle and bit for bit against scalar streaming: the arithmetic is pinned, only the access differs.
    `small` is below one tile on every axis."""
    if shape == "small":
        shape = (2 * radius + 1, 2 * radius + 1, 4 * (radius // 2 + 1))
    vec = backend("streaming_vec")
    assert sweep_case("wave3d", shape, dtype, vec, radius=radius).strategy == "streaming_vec"
    linear = problems.linear_step("wave3d", shape=shape, dtype=dtype, radius=radius)
    sweep, grid = linear.sweep, linear.lattice
    rng, seed = rng_with_seed()
    host = {n: rng.uniform(-1.0, 1.0, grid.padded_shape).astype(grid.dtype) for n in sweep.inputs}
    out = {}
    for strategy in ("streaming_vec", "streaming"):
        dev = {n: cp.asarray(a) for n, a in host.items()}
        backend(strategy).sweep(sweep, grid)(dev)
        out[strategy] = cp.asnumpy(dev[sweep.out])
    assert np.array_equal(out["streaming_vec"], out["streaming"]), f"wave3d r{radius} {shape} {dtype} seed={seed}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,params", [("heat3d", {}), ("poisson3d", {}), ("wave3d", {"radius": 2}), ("wave3d", {"radius": 8}),
                                         ("heat2d", {}), ("poisson2d", {})])
@pytest.mark.parametrize("shape", [(21, 35, 132), (129, 67, 252), (3, 5, 8)])
def test_rows_vec_matches_oracle_and_rows_bits(shape, name, params, dtype):
    """Vectors of cells along rows (x extents that are multiples of 4, so the vector kernel runs on the time
    loop's layout), against the oracle with NaN-poisoned outputs and ghost cells untouched, and bit for bit
    against `rows`: the arithmetic is pinned, only the loads differ. 2D problems take the shape's last two."""
    r = params.get("radius", 1)
    shape = tuple(max(n, 2 * r + 1) for n in shape[:2]) + (max(shape[2], 4 * (r // 2 + 1)),)
    shape = shape[1:] if name.endswith("2d") else shape
    assert sweep_case(name, shape, dtype, backend("rows_vec"), **params).strategy == "rows_vec"
    linear = problems.linear_step(name, shape=shape, dtype=dtype, **params)
    sweep, grid = linear.sweep, linear.lattice
    rng, seed = rng_with_seed()
    host = {n: rng.uniform(-1.0, 1.0, grid.padded_shape).astype(grid.dtype) for n in sweep.inputs}
    host.setdefault(sweep.out, np.full(grid.padded_shape, np.nan, grid.dtype))
    out = {}
    for strategy in ("rows_vec", "rows"):
        dev = {n: backend(strategy).field(a, grid.ghost) for n, a in host.items()}
        step = backend(strategy).sweep(sweep, grid)
        step(dev)
        assert step.strategy == strategy
        out[strategy] = cp.asnumpy(dev[sweep.out])
    assert np.array_equal(out["rows_vec"], out["rows"], equal_nan=True), f"{name} {params} {shape} {dtype} seed={seed}"


@pytest.mark.parametrize("tile", [(1, 1, 1), (3, 5, 8), (130, 2, 64), (2, 32, 32), (1, 1, 1024)])
def test_rows_vec_odd_tiles(tile):
    assert sweep_case("heat3d", (129, 67, 252), "float32", backend("rows_vec", tile)).strategy == "rows_vec"


def test_rows_vec_falls_back_to_rows_where_a_row_is_not_whole_vectors():
    assert sweep_case("heat3d", (21, 35, 133), "float32", CudaBackend(strategy="rows_vec")).strategy == "rows"


@pytest.mark.parametrize("tile", [(1, 1, 4), (3, 5, 8), (130, 2, 64), (5, 32, 32)])
def test_streaming_vec_odd_tiles(tile):
    sweep_case("wave3d", (129, 67, 252), "float32", backend("streaming_vec", tile), radius=4)


def test_streaming_vec_falls_back_where_rows_do_not_start_on_a_vector():
    """An x extent or a pointer off the vector: scalar streaming runs, with the right answer."""
    be = CudaBackend(strategy="streaming_vec")
    assert sweep_case("wave3d", (21, 35, 133), "float32", be, radius=8).strategy == "streaming"
    linear = problems.linear_step("wave3d", shape=(21, 35, 132), dtype="float32", radius=8)
    sweep, grid = linear.sweep, linear.lattice
    rng = np.random.default_rng(5)
    host = {n: rng.uniform(-1.0, 1.0, grid.padded_shape).astype(np.float32) for n in sweep.inputs}
    aligned = {n: cp.asarray(a) for n, a in host.items()}
    shifted = {}
    for n, a in host.items():
        buf = cp.empty(a.size + 1, dtype=np.float32)
        shifted[n] = buf[1:].reshape(a.shape)
        shifted[n][...] = cp.asarray(a)
    assert shifted[sweep.out].data.ptr % 16 and shifted[sweep.out].flags.c_contiguous
    step = be.sweep(sweep, grid)
    step(aligned)
    assert step.strategy == "streaming_vec"
    step(shifted)
    assert step.strategy == "streaming"  # the shifted call ran the scalar kernel
    assert cp.array_equal(aligned[sweep.out], shifted[sweep.out])


def jacobi_grid_sweep(shape, dtype, radius):
    """A poisson2d-like Jacobi sweep of any radius (reads u around the cell, f at it) on a grid of ghost width radius."""
    grid = Grid(tuple(shape), (0.01, 0.013), np.dtype(dtype), radius, (0.0, 0.0))
    return grid, poisson2d.jacobi_sweep(Stencil.laplacian(2, radius, grid.spacing), with_rhs=True)


def heat_grid_sweep(shape, dtype, radius):
    """A 3D heat-like sweep (u + c * laplacian u) of any radius on a grid of ghost width radius."""
    grid = Grid(tuple(shape), (0.1, 0.11, 0.12), np.dtype(dtype), radius, (0.0, 0.0, 0.0))
    lap = Stencil.laplacian(3, radius, grid.spacing)
    return grid, Sweep("u_new", (Term("u", Stencil.identity(3) + lap.scaled(1e-3)),))


def check_fused(grid, sweep, where, tile=None, steps=2):
    """The fused pass against the float64 oracle applied `steps` times, each middle state's ghost cells
    being its own walls array's (random, unlike u's and each other's), and bit for bit against as many
    `rows` sweeps; the output's interior NaN-poisoned first, its ghost cells left as they were."""
    rng, seed = rng_with_seed()
    where = f"{where} steps={steps} seed={seed}"
    (u,) = sweep.stencil_inputs
    host = {n: rng.uniform(-1.0, 1.0, grid.padded_shape).astype(grid.dtype) for n in sweep.inputs}
    walls = {}
    for s in range(1, steps):
        w = rng.uniform(-1.0, 1.0, grid.padded_shape).astype(grid.dtype)
        w[grid.interior] = np.nan
        walls[fused_walls(s, sweep.out)] = w
    out_walls = walls[sweep.out] if steps > 1 else None
    be = backend("auto")
    fused = be.sweep_fused(sweep, grid, tile, steps)
    assert fused is not None and fused.steps == steps
    dev = {n: be.asarray(a) for n, a in {**host, **walls}.items()}
    fused(dev)
    got = be.to_host(dev[sweep.out])
    h64 = {n: a.astype(np.float64) for n, a in host.items()}
    g64 = Grid(grid.shape, grid.spacing, np.dtype(np.float64), grid.ghost, grid.lower)
    state, bstate = h64[u], np.abs(h64[u])
    absolute = {n: np.abs(a) for n, a in h64.items()}
    for s in range(1, steps):
        mid, bmid = walls[fused_walls(s, sweep.out)].astype(np.float64), np.abs(walls[fused_walls(s, sweep.out)].astype(np.float64))
        mid[grid.interior] = evaluate_sweep(sweep, g64, {**h64, u: state})
        bmid[grid.interior] = evaluate_sweep(abs_sweep(sweep), g64, {**absolute, u: bstate})
        state, bstate = mid, bmid
    ref = evaluate_sweep(sweep, g64, {**h64, u: state})
    bound = evaluate_sweep(abs_sweep(sweep), g64, {**absolute, u: bstate})
    points = sum(len(t.stencil.entries) for t in sweep.terms)
    tol = 2 * steps * (points + 2) * UNIT_ROUNDOFF[grid.dtype] * bound + 1e-300
    inner = got[grid.interior]
    assert np.isfinite(inner).all(), f"unwritten (NaN) interior cells: {where}"
    err = np.abs(inner - ref)
    assert (err <= tol).all(), f"max error {err.max():.3e} over bound: {where}"
    ghost = np.ones(grid.padded_shape, bool)
    ghost[grid.interior] = False
    assert np.array_equal(got[ghost], out_walls[ghost]), f"a ghost cell of the output was written: {where}"
    # and bit for bit what single `rows` steps give, so fusing never changes a run's answer
    rows = backend("rows").sweep(sweep, grid)
    state = be.asarray(host[u])
    for s in range(1, steps + 1):
        out = cp.full(grid.padded_shape, np.nan, dtype=grid.dtype)
        rows({**{n: be.asarray(a) for n, a in host.items()}, u: state, sweep.out: out})
        if s < steps:
            state = be.asarray(walls[fused_walls(s, sweep.out)])
            state[grid.interior] = out[grid.interior]
    assert np.array_equal(be.to_host(out)[grid.interior], inner), f"fused pass differs from single rows sweeps: {where}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("radius", [1, 2, 4, 8])
@pytest.mark.parametrize("shape", [(1000, 1537), (37, 300), (5, 9), (3, 4), (1, 40)])
def test_fused_pair_matches_two_oracle_sweeps_and_two_rows_sweeps(shape, radius, dtype):
    grid, sweep = jacobi_grid_sweep(shape, dtype, radius)
    check_fused(grid, sweep, f"{shape} r={radius} {dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("radius,steps", [(1, 3), (1, 4), (1, 6), (1, 9), (2, 3), (2, 5), (4, 3)])
@pytest.mark.parametrize("shape", [(1000, 1537), (37, 300), (5, 9), (1, 40), (70, 3)])
def test_fused_steps_match_the_oracle_and_single_rows_sweeps(shape, radius, steps, dtype):
    grid, sweep = jacobi_grid_sweep(shape, dtype, radius)
    check_fused(grid, sweep, f"{shape} r={radius} {dtype}", steps=steps)


@pytest.mark.parametrize("tile", [(1, 32), (3, 64), (16, 128), (7, 1024)])
def test_fused_steps_odd_tiles(tile):
    grid, sweep = jacobi_grid_sweep((517, 1001), "float32", 1)
    check_fused(grid, sweep, f"tile {tile}", tile, steps=4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("radius", [1, 2])
@pytest.mark.parametrize("shape", [(129, 67, 255), (70, 3, 31), (5, 9, 40), (1, 1, 33), (2, 40, 7)])
def test_fused_3d_pair_matches_two_oracle_sweeps_and_two_rows_sweeps(shape, radius, dtype):
    grid, sweep = heat_grid_sweep(shape, dtype, radius)
    check_fused(grid, sweep, f"{shape} r={radius} {dtype}")


@pytest.mark.parametrize("tile", [(1, 1, 32), (3, 5, 64), (200, 2, 1024), (7, 16, 96)])
def test_fused_3d_pair_odd_tiles(tile):
    grid, sweep = heat_grid_sweep((129, 67, 255), "float32", 1)
    check_fused(grid, sweep, f"tile {tile}", tile)


def test_fusion_is_offered_only_where_it_applies():
    grid, sweep = jacobi_grid_sweep((64, 64), "float32", 1)
    chosen = backend("auto").sweep_fused(sweep, grid)
    assert (chosen.steps, chosen.tile) == fused_choice(sweep, grid.dtype)[:2] and chosen.steps > 2
    assert backend("auto").sweep_fused(jacobi_grid_sweep((64, 64), "float32", 2)[1], Grid((64, 64), (0.01, 0.01), np.dtype(np.float32), 2,
                                                                                              (0.0, 0.0))).steps == 2
    assert backend("rows").sweep_fused(sweep, grid) is None  # an explicit strategy is honoured
    heat3d = problems.linear_step("heat3d", shape=(8, 8, 8))
    assert backend("auto").sweep_fused(heat3d.sweep, heat3d.lattice).steps == 2
    wave3d = problems.linear_step("wave3d", shape=(8, 8, 8), radius=2)
    assert backend("auto").sweep_fused(wave3d.sweep, wave3d.lattice) is None  # a leapfrog
    thin = Grid((64, 64), (0.01, 0.01), np.dtype(np.float32), 1, (0.0, 0.0))
    assert backend("auto").sweep_fused(jacobi_grid_sweep((64, 64), "float32", 2)[1], thin) is None  # ghost < radius


@pytest.mark.parametrize("name,shape", [("heat2d", (333, 517)), ("poisson2d", (200, 301)), ("heat3d", (40, 33, 65))])
def test_fused_runs_equal_single_step_runs_bit_for_bit(name, shape):
    """Through the time loop, time-dependent walls (heat) included: the fused run's fields and error are the
    single-step run's, with most steps taken in fused passes."""
    opts = dict(steps=203, check_every=50)
    single = run(named(name, shape), backend=backend("auto"), fuse_steps=False, **opts)
    fused = run(named(name, shape), backend=backend("auto"), **opts)
    assert fused.summary["fused_steps"] > 150 and "fused_steps" not in single.summary
    assert single.fields and all(cp.array_equal(fused.fields[k], single.fields[k]) for k in single.fields)
    assert fused.summary["errors"] == single.summary["errors"]


def abs_operator(op: AxisOperator) -> AxisOperator:
    def w(rows):
        return tuple(tuple((o, abs(float(c))) for o, c in row) for row in rows)

    outs = tuple(
        Derivative1D(d.out, w((d.interior,))[0], w(d.left), w(d.right), abs(d.scale)) for d in op.outputs
    )
    return AxisOperator(op.inp, op.axis, op.ndim, outs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", ["naive", "flat", "rows", "pencil", "auto"])
@pytest.mark.parametrize("orders", [(1, 2), (1,), (2,)])
@pytest.mark.parametrize("accuracy", deriv.ACCURACIES)
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(1000, 1537), (7, 9), (300, 7)])
def test_axis_operator_matches_oracle(shape, axis, accuracy, orders, strategy, dtype):
    checked_axis_operator(shape, axis, accuracy, orders, strategy, dtype)


def checked_axis_operator(shape, axis, accuracy, orders, strategy, dtype):
    """The operator's launcher, after checking its outputs against the oracle on random data."""
    op = deriv.operator(axis, 1.0 / (shape[axis] - 1), accuracy, orders)
    if shape[axis] < op.min_length:
        pytest.skip("axis shorter than the closures")
    rng, seed = rng_with_seed()
    u = rng.uniform(-1, 1, shape).astype(dtype)
    be = backend(strategy)
    outs = [cp.full(shape, np.nan, dtype=dtype) for _ in orders]
    run = be.axis_operator(op, np.dtype(dtype))
    run(be.asarray(u), *outs)
    u64 = u.astype(np.float64)
    ref = [np.empty(shape) for _ in orders]
    bound = [np.empty(shape) for _ in orders]
    evaluate_axis_operator(op, u64, ref)
    evaluate_axis_operator(abs_operator(op), np.abs(u64), bound)
    k = 2 * (2 * accuracy + 4)
    for got, want, b in zip(outs, ref, bound):
        got = cp.asnumpy(got)
        where = f"axis={axis} acc={accuracy} orders={orders} {strategy} {dtype} {shape} seed={seed}"
        assert np.isfinite(got).all(), f"unwritten cells: {where}"
        err = np.abs(got - want)
        assert (err <= k * UNIT_ROUNDOFF[np.dtype(dtype)] * b + 1e-300).all(), f"max error {err.max():.3e}: {where}"
    return run


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("orders", [(1, 2), (1,), (2,)])
@pytest.mark.parametrize("accuracy", deriv.ACCURACIES)
@pytest.mark.parametrize("shape", [(1000, 1536), (7, 12), (3, 1000), (1000, 1537)])
def test_rows_vec_operator_matches_oracle(shape, accuracy, orders, dtype):
    """Vectors of cells along x; an x extent off the vector (1537) runs the scalar `rows` kernel."""
    run = checked_axis_operator(shape, 1, accuracy, orders, "rows_vec", dtype)
    width = 4 if dtype == "float32" else 2
    assert run.strategy == ("rows_vec" if shape[1] % width == 0 else "rows"), "the kernel that ran"


def test_flat_operator_hands_grids_over_its_cell_limit_to_rows(monkeypatch):
    """Beyond FLAT_CELLS cells its 32-bit index would wrap; the limit is lowered here so a small grid crosses it."""
    op = deriv.operator(1, 0.01, 4, (1, 2))
    u = np.random.default_rng(5).uniform(-1, 1, (300, 37))
    ref = [np.empty(u.shape) for _ in range(2)]
    evaluate_axis_operator(op, u, ref)
    be = CudaBackend(strategy="flat")
    run = be.axis_operator(op, np.float64)
    for limit, ran in ((FLAT_CELLS, "flat"), (u.size, "rows")):
        monkeypatch.setattr(cuda_kernel, "FLAT_CELLS", limit)
        outs = [cp.full(u.shape, np.nan) for _ in range(2)]
        run(cp.asarray(u), *outs)
        assert run.strategy == ran
        for got, want in zip(outs, ref):
            np.testing.assert_allclose(cp.asnumpy(got), want, rtol=1e-12, atol=1e-9)


def test_rows_vec_operator_falls_back_on_a_misaligned_pointer(caplog):
    be = CudaBackend(strategy="rows_vec")
    op = deriv.operator(1, 0.01, 4, (1,))
    u = np.random.default_rng(3).uniform(-1, 1, (64, 256))
    run = be.axis_operator(op, np.float64)
    aligned_in, aligned_out = cp.asarray(u), cp.full(u.shape, np.nan)
    run(aligned_in, aligned_out)
    assert run.strategy == "rows_vec"
    buf = cp.empty(u.size + 1)
    shifted_in = buf[1:].reshape(u.shape)
    shifted_in[...] = aligned_in
    shifted_out = cp.full(u.shape, np.nan)
    assert shifted_in.data.ptr % 16 and shifted_in.flags.c_contiguous
    with caplog.at_level(logging.WARNING, logger="stencilforge"):
        run(shifted_in, shifted_out)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "falls back to rows" in warnings[0]
    ref = np.empty(u.shape)
    evaluate_axis_operator(op, u, [ref])
    np.testing.assert_allclose(cp.asnumpy(aligned_out), ref, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(cp.asnumpy(shifted_out), ref, rtol=1e-12, atol=1e-9)
    assert run.strategy == "rows"  # the shifted call ran the scalar kernel


def test_fused_operator_writes_both_outputs_and_is_timed():
    be = CudaBackend(strategy="pencil")
    op = deriv.operator(1, 0.1, 2, (1, 2))
    u = be.asarray(np.random.default_rng().uniform(-1, 1, (64, 64)))
    before = be.kernel_seconds()
    outs = [cp.full(u.shape, np.nan) for _ in range(2)]
    be.axis_operator(op, np.float64)(u, *outs)
    assert be.kernel_seconds() > before
    assert all(bool(cp.isfinite(o).all()) for o in outs)


def test_kernel_clock_starts_at_the_first_reading():
    """Launches before anyone reads kernel_seconds are not timed (no event pair per launch); later ones are."""
    be = CudaBackend(strategy="flat")
    op = deriv.operator(1, 0.1, 2, (1, 2))
    u = be.asarray(np.random.default_rng().uniform(-1, 1, (256, 256)))
    outs = [cp.full(u.shape, np.nan) for _ in range(2)]
    apply = be.axis_operator(op, np.float64)
    for _ in range(5):
        apply(u, *outs)
    assert be.kernel_seconds() == 0.0
    apply(u, *outs)
    assert be.kernel_seconds() > 0.0


# ---------------------------------------------------------------- arrays in and out


def test_asarray_copies_noncontiguous_inputs_faithfully():
    be = backend("auto")
    base = np.random.default_rng().uniform(-1, 1, (40, 60))
    for host in (base[:, ::2], base.T, np.asfortranarray(base), base[::3, 1:]):
        dev = be.asarray(host)
        assert dev.flags.c_contiguous
        np.testing.assert_array_equal(cp.asnumpy(dev), host)
    dbase = cp.asarray(base)
    for dev_in in (dbase[:, ::2], dbase.T):
        dev = be.asarray(dev_in)
        assert dev.flags.c_contiguous
        np.testing.assert_array_equal(cp.asnumpy(dev), cp.asnumpy(dev_in))
    same = be.asarray(dbase)
    assert same.data.ptr == dbase.data.ptr
    assert be.asarray(base, dtype=np.float32).dtype == np.float32


def test_sweep_refuses_strided_or_mis_shaped_fields():
    linear = problems.linear_step("heat2d", shape=(30, 40), dtype="float32")
    grid = linear.lattice
    u = initial_array(linear.problem, grid, "u", 0, linear.values, linear.values["dt"])  # on the host
    be = backend("auto")
    step = be.sweep(linear.sweep, grid)
    good = be.asarray(u)
    strided = cp.zeros((grid.padded_shape[0], 2 * grid.padded_shape[1]), np.float32)[:, ::2]
    for bad in (strided, cp.zeros((5, 5), np.float32), cp.zeros(grid.padded_shape, np.float64), u):
        with pytest.raises(StencilforgeError, match="must be a CuPy float32 array of shape .* with contiguous rows"):
            step({"u": good, "u_new": bad})
    with pytest.raises(StencilforgeError, match="must share one row layout"):
        step({"u": good, "u_new": be.field(u, grid.ghost)})
    heat3d = problems.linear_step("heat3d", shape=(6, 7, 8), dtype="float32")
    padded = heat3d.lattice.padded_shape
    gapped = cp.zeros((padded[0], padded[1] + 1, padded[2]), np.float32)[:, :-1]  # a gap between planes
    with pytest.raises(StencilforgeError, match="with contiguous rows and planes"):
        be.sweep(heat3d.sweep, heat3d.lattice)({"u": gapped, "u_new": gapped})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ghost", [1, 2, 8])
@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 33), (2, 3, 32)])
def test_field_puts_interior_rows_on_cache_lines(shape, ghost, dtype):
    be = backend("auto")
    host = np.random.default_rng().uniform(-1, 1, tuple(n + 2 * ghost for n in shape)).astype(dtype)
    for source in (host, cp.asarray(host), host[..., ::-1].copy()[..., ::-1]):
        dev = be.field(source, ghost)
        assert dev.shape == host.shape and dev.dtype == host.dtype
        np.testing.assert_array_equal(cp.asnumpy(dev), host)
        item = host.itemsize
        assert dev.strides[-1] == item and dev.strides[-2] % 128 == 0
        assert (dev.data.ptr + ghost * item) % 128 == 0
        if len(shape) == 3:
            assert dev.strides[0] == dev.strides[1] * host.shape[1]
    flat = cp.asarray(host.reshape(-1))
    one = be.field(flat, ghost)  # one axis: no rows to place, still a new array
    assert one.flags.c_contiguous and not cp.shares_memory(one, flat)
    np.testing.assert_array_equal(cp.asnumpy(one), host.reshape(-1))


# ---------------------------------------------------------------- errors


def test_out_of_memory_is_refused_before_allocation():
    free, _ = cp.cuda.runtime.memGetInfo()
    with pytest.raises(StencilforgeError, match=r"not enough GPU memory: \d+ bytes .* needed, \d+ bytes"):
        check_fits(free * 4)


def test_unknown_strategy_and_wrong_kind():
    with pytest.raises(StencilforgeError, match="unknown CUDA strategy"):
        get_backend("cuda", strategy="fastest")
    linear = problems.linear_step("heat2d", shape=(30, 40))
    with pytest.raises(StencilforgeError, match="does not apply"):
        CudaBackend(strategy="pencil").sweep(linear.sweep, linear.lattice)
    with pytest.raises(StencilforgeError, match="does not apply"):
        CudaBackend(strategy="streaming").axis_operator(deriv.operator(0, 0.1), np.float64)


# ---------------------------------------------------------------- through the time loop


@pytest.mark.parametrize(
    "name,shape,params,strategy",
    [
        ("heat3d", (33, 20, 45), {}, "rows"),
        ("wave3d", (40, 33, 50), {"radius": 4}, "streaming_vec"),
        ("wave3d", (40, 33, 51), {"radius": 4}, "streaming"),
    ],
)
def test_time_loop_matches_numpy(name, shape, params, strategy):
    want = run(named(name, shape, "float64", **params), steps=20, backend=NumpyBackend())
    be = CudaBackend()
    got = run(named(name, shape, "float64", **params), steps=20, backend=be)
    assert got.summary["sweeps"] == {"u_next": strategy} and got.summary["kernel_s"] > 0
    np.testing.assert_allclose(be.to_host(got.fields["u"]), want.fields["u"], rtol=1e-9, atol=1e-11)


def test_time_loop_of_an_axis_operator_matches_numpy():
    """An operator-stepped problem keeps dense arrays (sweeps' fields take the row-pitched layout)."""
    want = run(named("derivatives", (40, 70)), steps=1, backend=NumpyBackend())
    be = CudaBackend()
    got = run(named("derivatives", (40, 70)), steps=1, backend=be)
    assert want.fields.keys() == got.fields.keys() == {"u", "d1", "d2"} and got.summary["kernel_s"] > 0
    for name, arr in want.fields.items():
        np.testing.assert_allclose(be.to_host(got.fields[name]), arr, rtol=1e-12, atol=1e-12)


def test_poisson_residual_on_device_converges_like_numpy():
    opts = dict(steps=400, tol=1e-3, check_every=50)
    want = run(named("poisson2d", (40, 50)), backend=NumpyBackend(), **opts).summary
    got = run(named("poisson2d", (40, 50)), backend=CudaBackend(), **opts).summary
    assert got["fused_steps"] > 0
    assert got["iterations"] == want["iterations"]
    assert got["residual"] == pytest.approx(want["residual"], rel=1e-9)


@pytest.mark.parametrize("name,shape", [("poisson2d", (300, 257)), ("heat2d", (300, 257)), ("heat3d", (40, 33, 70))])
def test_fused_steps_give_the_single_steps_bits(name, shape):
    """Through the loop, walls time-dependent for heat: fused and single-stepped runs end bit for bit equal."""
    opts = dict(steps=41, check_every=10)
    single = run(named(name, shape), backend=CudaBackend(), fuse_steps=False, **opts)
    fused = run(named(name, shape), backend=CudaBackend(), **opts)
    assert fused.summary["fused_steps"] > 0 and "fused_steps" not in single.summary
    assert single.fields
    for k in single.fields:
        assert cp.array_equal(fused.fields[k], single.fields[k]), f"{name}: field {k} differs"
    assert fused.summary["errors"] == single.summary["errors"]


def test_the_backend_plans_shared_memory_with_the_devices_own_limits():
    """The limits read from the device are the published ones for its architecture where we know them,
    and a `pipelined` ring is built within them (the strategy tests run it against the oracle)."""
    from stencilforge.backends.cuda.kernel import ARCH_LIMITS

    b = backend("pipelined")
    assert 0 < b.limits.reserved_per_block < b.limits.smem_per_block < b.limits.smem_per_sm
    if b.arch in ARCH_LIMITS:
        assert b.limits == ARCH_LIMITS[b.arch]
    wave = problems.linear_step("wave3d", shape=(21, 35, 133), radius=8)
    kernel = codegen.sweep_kernel(wave.sweep, "pipelined", "float32", limits=b.limits)
    assert kernel.dynamic_smem <= b.limits.smem_per_block
