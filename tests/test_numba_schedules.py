"""Numba's schedules: each applies where it says, builds a kernel there and says why not elsewhere, and the lookup
takes the family the backend took before it had a registry; the 3D sweeps bit for bit against the NumPy oracle on
shapes that are not multiples of any tile or row chunk, with every output cell the kernel must not write poisoned
with NaN."""

from __future__ import annotations

import logging
import math

import numba
import numpy as np
import pytest

from stencilforge import problems
from stencilforge.backends.numba import NumbaBackend
from stencilforge.backends.numba.backend import load_kernel
from stencilforge.backends.numba.kernel import FUSED_VIEW_LIMIT, HEADER, row_views
from stencilforge.backends.numba.schedules import MARCHES, SWEEPS, choose, sweep_source
from stencilforge.backends.numba.schedules.loop import LOOP_CELLS
from stencilforge.backends.numpy_ref import evaluate_sweep
from stencilforge.errors import StencilforgeError
from stencilforge.grid import Grid
from stencilforge.plan import Sweep, Term
from stencilforge.problems.poisson2d import jacobi_sweep
from stencilforge.stencil import Stencil


def lattice(shape, ghost):
    nd = len(shape)
    return Grid(tuple(shape), (0.01, 0.013, 0.017)[:nd], np.dtype("float64"), ghost, (0.0,) * nd)


def case(name):
    """(grid, sweep, {schedule: None where it applies, else words of its reason})."""
    if name == "heat2d":
        step = problems.linear_step("heat2d", shape=(20, 24))
        return step.lattice, step.sweep, {"row": None, "wide": None, "loop": None, "march": None}
    if name == "wave3d r8":
        step = problems.linear_step("wave3d", shape=(20, 19, 18), radius=8)
        return step.lattice, step.sweep, {"row": "not 51", "wide": None, "loop": "at most 8192 cells", "march": "of one field"}
    if name == "jacobi3d r4":
        grid = lattice((9, 10, 11), 4)
        return grid, jacobi_sweep(Stencil.laplacian(3, 4, grid.spacing), True), {"row": "not 25", "wide": None, "loop": "not 25",
                                                                                 "march": "not 25"}
    if name == "two fields":
        lap = Stencil.laplacian(2, 1)
        return lattice((9, 10), 1), Sweep("o", (Term("u", lap), Term("v", lap))), {"row": None, "wide": None, "loop": "of one field",
                                                                                 "march": "of one field"}
    if name == "reach beyond the ghosts":
        grid = lattice((9, 10), 1)
        return grid, jacobi_sweep(Stencil.laplacian(2, 2, grid.spacing), True), {"row": None, "wide": None, "loop": "ghost layer",
                                                                                 "march": "ghost layer"}
    grid = lattice((30,), 9)  # 1D
    radius = 1 if name == "1D" else 9
    return grid, jacobi_sweep(Stencil.laplacian(1, radius, grid.spacing), False), {
        "row": None if radius == 1 else "not 18", "wide": "not 1D", "loop": None if radius == 1 else "not 18", "march": "not 1D"}


CASES = ["heat2d", "wave3d r8", "jacobi3d r4", "two fields", "reach beyond the ghosts", "1D", "1D r9"]


@pytest.mark.parametrize("name", CASES)
def test_each_schedule_builds_where_it_applies_and_says_why_not_elsewhere(name):
    grid, sweep, expected = case(name)
    assert [s.name for s in SWEEPS + MARCHES] == list(expected)
    for s in SWEEPS + MARCHES:
        why = s.applies(sweep, grid)
        if expected[s.name] is None:
            assert why is None, f"{s.name}: {why}"
            source = s.build(sweep, grid, 2) if s in MARCHES else s.build(sweep, grid)
            assert source.startswith(HEADER) and callable(load_kernel(source))
        else:
            assert why is not None and expected[s.name] in why and "\n" not in why, f"{s.name}: {why}"
            assert why.startswith(f"numba's {s.name}")


@pytest.mark.parametrize("name", [n for n in CASES if n != "1D r9"])  # that one no kernel of main's took
def test_the_lookup_takes_the_family_the_backends_branches_took(name):
    """Before the registry: `row` up to FUSED_VIEW_LIMIT row views, else `wide`; the march for 2D and 3D sweeps of
    one field within that limit and the ghost layer; since, `loop` before the march on grids of at most LOOP_CELLS
    cells with their ghosts, in 1D too."""
    grid, sweep, _ = case(name)
    fits = len(row_views(sweep)) <= FUSED_VIEW_LIMIT
    assert choose(SWEEPS, sweep, grid).name == ("row" if fits else "wide")
    assert sweep_source(sweep, grid) == choose(SWEEPS, sweep, grid).build(sweep, grid)
    fuses = sweep.iterates_one_field and fits and grid.ghost >= sweep.radius
    if fuses and math.prod(grid.padded_shape) <= LOOP_CELLS[grid.ndim]:
        assert choose(MARCHES, sweep, grid).name == "loop"
    elif fuses and grid.ndim in (2, 3):
        assert choose(MARCHES, sweep, grid).name == "march"
    else:
        with pytest.raises(StencilforgeError):
            choose(MARCHES, sweep, grid)


def test_refusals_are_the_schedules_own_reasons_in_one_line(caplog):
    grid, sweep, _ = case("1D r9")
    with pytest.raises(StencilforgeError) as refused:
        NumbaBackend().sweep(sweep, grid)
    assert str(refused.value) == "; ".join(s.applies(sweep, grid) for s in SWEEPS)
    grid, sweep, _ = case("two fields")
    with caplog.at_level(logging.INFO, logger="stencilforge.backends.numba.backend"):
        assert NumbaBackend().sweep_fused(sweep, grid) is None
    assert caplog.messages[-1] == f"o: single steps, no fused kernel: {'; '.join(s.applies(sweep, grid) for s in MARCHES)}"


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


def wide_2d(which):
    grid = Grid((23, 41), (0.01, 0.013), np.dtype("float64"), 4, (0.0, 0.0))
    lap = Stencil.laplacian(2, 4, grid.spacing)
    if which == "jacobi":
        return grid, jacobi_sweep(lap, with_rhs=True)
    return grid, Sweep("u_new", (Term("u", lap, factor="f"), Term("f", lap), Term("u", Stencil.identity(2))))


@pytest.mark.parametrize("which", ["jacobi", "two wide terms"])
def test_wide_2d_sweep_is_the_oracle_bit_for_bit(which):
    grid, sweep = wide_2d(which)
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


def test_a_1d_sweep_no_schedule_takes_runs_as_its_generated_pass():
    """A 1D equation reading 19 neighbours (wider than one loop, where no numba sweep schedule applies) runs as its
    generated kernel: the same bits as numpy's."""
    import stencilforge as sf

    g = sf.Grid((200,), extent=1.0, dtype="float64")
    u = sf.Field("u", g)
    rhs = u + 1e-3 * sum((u[k] + u[-k] - 2 * u) / k**2 for k in range(1, 10))
    p = sf.Problem([sf.Eq(u.next, rhs)], initial={u: sf.sin(np.pi * g.x)}, boundary={u: sf.Dirichlet(0.0)}, dt=1e-3)
    numba, numpy = sf.run(p, steps=20, backend="numba"), sf.run(p, steps=20, backend="numpy")
    assert numba.summary["sweeps"] == {} and np.asarray(numba.fields["u"]).tobytes() == np.asarray(numpy.fields["u"]).tobytes()


def test_a_runs_summary_names_the_numba_schedule_that_ran():
    import stencilforge as sf

    heat = sf.run(problems.problem("heat2d", shape=(12, 14))[0], steps=3, backend="numba").summary
    wave = sf.run(problems.problem("wave3d", shape=(17, 18, 19), radius=8)[0], steps=3, backend="numba").summary
    assert heat["sweeps"] == {"u_next": "row"} and wave["sweeps"] == {"u_next": "wide"}
