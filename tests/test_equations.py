"""The equation API: user problems on numpy and numba, validation, operators' orders, CUDA source."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import stencilforge as sf
from stencilforge.backends.numba import NumbaBackend
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.printers import cuda as cuda_printer, numba as numba_printer

pytestmark = pytest.mark.usefixtures("passes_compiled_first")  # Numba's passes, not NumPy's while they compile


def gray_scott(shape=(64, 48), dtype="float64", F=0.04, k=0.06):
    grid = sf.Grid(shape, extent=2.5, dtype=dtype)
    u, v = sf.Field("u", grid), sf.Field("v", grid)
    Du, Dv = sf.Constant("Du", 2e-5), sf.Constant("Dv", 1e-5)
    Fc, kc, dt = sf.Constant("F", F), sf.Constant("k", k), sf.Constant("dt", 1.0)
    uvv = u * v**2
    eqs = [
        sf.Eq(u.next, u + dt * (Du * sf.laplacian(u) - uvv + Fc * (1 - u))),
        sf.Eq(v.next, v + dt * (Dv * sf.laplacian(v) + uvv - (Fc + kc) * v)),
    ]
    x, y = grid.x, grid.y
    seed = sf.where((x - 1.25) ** 2 + (y - 1.25) ** 2 < 0.04, 1.0, 0.0)
    return sf.Problem(
        eqs, initial={u: 1 - 0.5 * seed, v: 0.25 * seed}, boundary={u: sf.Periodic(), v: sf.Periodic()}, dt=dt, steps=50
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gray_scott_numba_equals_numpy(dtype):
    p = gray_scott(dtype=dtype)
    assert len(p.analysis.passes) == 1  # u and v read only the current level: one pass
    assert p.analysis.bytes_per_cell() == 4 * np.dtype(dtype).itemsize
    a = sf.run(p, backend="numpy")
    b = sf.run(p, backend="numba")
    for name in ("u", "v"):
        assert np.isfinite(a.fields[name]).all()
        np.testing.assert_array_equal(a.fields[name], b.fields[name])
    assert float(a.fields["v"].max()) > 0.05  # the seed has not simply decayed



def test_a_small_grids_serial_pass_gives_the_parallel_passs_bits(monkeypatch):
    """At most SERIAL_CELLS interior cells, a pass's loop nest is serial and one function (it compiles faster); the
    cells' arithmetic, and so the fields, are the parallel nest's, whose rows are a function of their own."""
    p = gray_scott(shape=(40, 30))
    pass_ = p.analysis.passes[0]
    serial, parallel = (numba_printer.pass_source(pass_, 2, "float64", p.constants, n)[0] for n in (1200, 1200 * 4))
    assert "parallel=False" in serial and "def row" not in serial and "prange" not in serial
    assert "parallel=True" in parallel and "def row" in parallel and "numba.prange" in parallel
    runs = []
    for serial_cells in (numba_printer.SERIAL_CELLS, 0):  # the kernels compile before the first step (no NumPy passes)
        monkeypatch.setattr(numba_printer, "SERIAL_CELLS", serial_cells)
        sim = sf.Simulation(p, "numba")
        sim.step(20)
        runs.append({name: sim.field(name) for name in ("u", "v")})
    for name, arr in runs[0].items():
        assert np.isfinite(arr).all() and np.array_equal(arr, runs[1][name]), name


def test_parameters_change_without_new_source():
    """Kernels take constants and literals as arguments: new values or a new grid, same source."""
    one, two = gray_scott(F=0.04), gray_scott(shape=(70, 60), F=0.03)
    src = [numba_printer.pass_source(p.analysis.passes[0], 2, "float64", p.constants, math.prod(p.grid.shape))[0] for p in (one, two)]
    assert src[0] == src[1]
    a = sf.run(one, backend="numpy", params={"F": 0.03}, steps=5)
    b = sf.run(one, backend="numpy", params={"F": 0.04}, steps=5)
    assert not np.array_equal(a.fields["u"], b.fields["u"])
    assert a.summary["params"]["F"] == 0.03


def test_run_does_not_change_the_problem():
    p = gray_scott()
    first = sf.run(p, backend="numba", steps=20).fields["v"].copy()
    again = sf.run(p, backend="numba", steps=20).fields["v"]
    np.testing.assert_array_equal(first, again)


def heat(shape, alpha=0.5, dtype="float64", order=2):
    """u_t = alpha lap u, exact decaying mode, time-dependent Dirichlet walls from the exact solution."""
    grid = sf.Grid(shape, spacing=[1.0 / (n + 1) for n in shape], origin=[1.0 / (n + 1) for n in shape], dtype=dtype)
    u = sf.Field("u", grid)
    a = sf.Constant("alpha", alpha)
    h = min(grid.spacing)
    dt = 0.2 * h * h / alpha
    xs = grid.coordinates
    mode = 1.0
    for c in xs:
        mode = mode * sf.sin(math.pi * (c + 0.25))
    exact = sf.exp(-len(shape) * math.pi**2 * a * grid.t) * mode
    return sf.Problem(
        [sf.Eq(u.next, u + dt * a * sf.laplacian(u, order=order))],
        initial={u: exact}, boundary={u: sf.Dirichlet(exact)}, exact={u: exact}, dt=dt,
    ), dt


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_heat_converges_to_second_order(ndim):
    errors, hs = [], []
    for n in (8, 16, 32) if ndim < 3 else (6, 12, 24):
        p, dt = heat((n,) * ndim)
        steps = int(round(0.02 / dt)) if ndim < 3 else int(round(0.01 / dt))
        # the exact time must be hit: run the step count whose t matches, and compare at that t
        r = sf.run(p, steps=steps, backend="numpy")
        errors.append(r.summary["errors"]["u"])
        hs.append(1.0 / (n + 1))
    slope = np.polyfit(np.log(hs), np.log(errors), 1)[0]
    assert abs(slope - 2) < 0.25, (slope, errors)


def _smooth(grid):
    x = grid.x
    return sf.sin(2.0 * x) + sf.cos(3.0 * x) * 0.5


def _slope(make, ns):
    errs, hs = [], []
    for n in ns:
        grid = sf.Grid((n,), spacing=1.0 / n, origin=0.0)
        value, exact = make(grid)
        u = sf.Field("u", grid, levels=1)
        w = sf.Field("w", grid, levels=1)
        p = sf.Problem([sf.Eq(w, _substitute(value, u))], initial={u: _smooth(grid)}, exact={w: exact}, steps=1)
        errs.append(sf.run(p, backend="numpy", steps=1).summary["errors"]["w"])
        hs.append(1.0 / n)
    return np.polyfit(np.log(hs), np.log(errs), 1)[0], errs


def _substitute(op, u):
    return op(u)


@pytest.mark.parametrize("order", [2, 4, 6, 8])
def test_laplacian_order(order):
    slope, errs = _slope(lambda g: (lambda u: sf.laplacian(u, order=order),
                                    -4.0 * sf.sin(2.0 * g.x) - 4.5 * sf.cos(3.0 * g.x)), [8, 10, 12, 16])
    assert abs(slope - order) < 0.3, (slope, errs)


@pytest.mark.parametrize("order", [2, 4, 6, 8, 10, 12, 14, 16])
def test_laplacian_exact_on_polynomials(order):
    """A centred stencil of accuracy p differentiates polynomials of degree p + 1 exactly."""
    n = 3 * order
    grid = sf.Grid((n,), spacing=1.6 / n, origin=-0.8)
    u = sf.Field("u", grid, levels=1)
    w = sf.Field("w", grid, levels=1)
    x = grid.x
    deg = order + 1
    p = sf.Problem([sf.Eq(w, sf.laplacian(u, order=order))], initial={u: x**deg}, exact={w: deg * (deg - 1) * x ** (deg - 2)})
    err = sf.run(p, backend="numpy", steps=1).summary["errors"]["w"]
    assert err < 1e-9 * deg * deg * (n / 1.6) ** 2  # rounding only: weights times 1/h^2 of values below 1


@pytest.mark.parametrize("accuracy", [2, 4, 6])
def test_first_derivative_order(accuracy):
    slope, errs = _slope(lambda g: (lambda u: sf.d(u, "x", accuracy=accuracy),
                                    2.0 * sf.cos(2.0 * g.x) - 1.5 * sf.sin(3.0 * g.x)), [16, 24, 32, 48])
    assert abs(slope - accuracy) < 0.3, (slope, errs)


@pytest.mark.parametrize("accuracy", [1, 2, 3])
@pytest.mark.parametrize("velocity", [1.0, -1.0])
def test_upwind_order(accuracy, velocity):
    slope, errs = _slope(lambda g: (lambda u: sf.upwind(u, "x", velocity, accuracy=accuracy),
                                    2.0 * sf.cos(2.0 * g.x) - 1.5 * sf.sin(3.0 * g.x)), [16, 24, 32, 48, 64])
    assert abs(slope - accuracy) < 0.2, (slope, errs)


def test_div_grad_order():
    def make(g):
        k = 2.0 + sf.sin(g.x)
        # d/dx((2 + sin x)(2 cos 2x - 1.5 sin 3x))
        dk = sf.cos(g.x) * (2.0 * sf.cos(2.0 * g.x) - 1.5 * sf.sin(3.0 * g.x))
        ku = (2.0 + sf.sin(g.x)) * (-4.0 * sf.sin(2.0 * g.x) - 4.5 * sf.cos(3.0 * g.x))
        return (lambda u: sf.div_grad(k, u)), dk + ku

    slope, errs = _slope(make, [16, 24, 32, 48])
    assert abs(slope - 2) < 0.2, (slope, errs)


def _standing_wave_error(n):
    grid = sf.Grid((n,), spacing=1.0 / (n + 1), origin=1.0 / (n + 1))
    u = sf.Field("u", grid, levels=3)
    c, dt = 1.0, 0.5 / (n + 1)
    x, t = grid.x, grid.t
    exact = sf.sin(math.pi * x) * sf.cos(math.pi * c * t)
    p = sf.Problem(
        [sf.Eq(u.next, 2 * u - u.prev + (c * dt) ** 2 * sf.laplacian(u))],
        initial={u: sf.sin(math.pi * x), "u.prev": sf.sin(math.pi * x) * math.cos(math.pi * c * dt)},
        boundary={u: sf.Dirichlet(0.0)}, exact={u: exact}, dt=dt,
    )
    return sf.run(p, steps=5 * (n + 1), backend="numba").summary["errors"]["u"]


def test_leapfrog_wave_rotates_three_levels():
    """u.prev, u, u.next rotate each step: the standing wave converges at second order."""
    coarse, fine = _standing_wave_error(19), _standing_wave_error(39)
    assert 3.0 < coarse / fine < 5.0, (coarse, fine)


def test_terms_of_no_field_are_hoisted_out_of_numbas_kernel_and_computed_by_numpys_oracle():
    """A forcing term, a coefficient of the coordinates or a factor of t calling exp, sin, ... is evaluated by NumPy
    (once, or each pass where it reads t): the kernel reads its values, so it calls no such function per cell, and the
    pass rounds as the oracle; a call on a field's value stays in the kernel."""
    grid = sf.Grid((12, 10), extent=1.0)
    u = sf.Field("u", grid)
    k = sf.Constant("k", 2.0)
    coefficient, forcing = 1 + sf.sin(k * grid.y), sf.cos(grid.x - grid.t) * sf.exp(-grid.t)
    p = sf.Problem([sf.Eq(u.next, u + 1e-3 * (coefficient * sf.laplacian(u) + forcing))], initial={u: grid.x},
                   boundary={u: sf.Periodic()}, dt=1e-3).analysis.passes[0]
    assert numba_printer.hoisted(p) == (coefficient, forcing)
    source = numba_printer.pass_source(p, 2, "float64", (), 10**6)[0]
    assert "np.sin" not in source and "np.cos" not in source and "np.exp" not in source and "lift1" in source
    assert numba_printer.rounds_as_oracle(p)
    q = sf.Problem([sf.Eq(u.next, u + 1e-3 * sf.sin(u) * forcing)], initial={u: grid.x}, boundary={u: sf.Periodic()},
                   dt=1e-3).analysis.passes[0]
    assert numba_printer.hoisted(q) == (forcing,)
    assert "np.sin(" in numba_printer.pass_source(q, 2, "float64", (), 10**6)[0] and not numba_printer.rounds_as_oracle(q)
    wave, shape = sf.cos(grid.x - grid.t), sf.sin(grid.y)  # a term of t over two axes: hoisted in parts of one axis each
    r = sf.Problem([sf.Eq(u.next, u + 1e-3 * (wave * shape))], initial={u: grid.x}, boundary={u: sf.Periodic()},
                   dt=1e-3).analysis.passes[0]
    assert numba_printer.hoisted(r) == (wave, shape) and numba_printer.rounds_as_oracle(r)


def test_second_pass_reads_new_level_at_neighbours():
    """A staggered velocity-pressure step: p.next reads v.next at neighbours, so it runs in a second
    pass after v.next's walls are filled; numpy and numba agree."""
    grid = sf.Grid((30, 20), extent=1.0)
    v, q = sf.Field("v", grid), sf.Field("q", grid)
    dt = 0.002
    eqs = [sf.Eq(v.next, v - dt * sf.d(q, "x")), sf.Eq(q.next, q - dt * sf.d(v.next, "x"))]
    p = sf.Problem(eqs, initial={q: sf.sin(6.283185307179586 * grid.x)}, boundary={v: sf.Periodic(), q: sf.Periodic()}, dt=dt)
    assert len(p.analysis.passes) == 2
    a, b = sf.run(p, backend="numpy", steps=30), sf.run(p, backend="numba", steps=30)
    np.testing.assert_array_equal(a.fields["q"], b.fields["q"])
    assert float(np.abs(a.fields["v"]).max()) > 0


BAD = {
    "unknown field in initial": lambda g, u, v: sf.Problem([sf.Eq(u.next, u)], initial={"w": 1.0}),
    "reads a neighbour of an in-place field": lambda g, u, v: sf.Problem(
        [sf.Eq(v, u + 1), sf.Eq(u.next, u + v[1, 0])], boundary={u: sf.Periodic(), v: sf.Periodic()}),
    "writes the current level": lambda g, u, v: sf.Problem([sf.Eq(u, u + 1)]),
    "reads next before it is computed": lambda g, u, v: sf.Problem([sf.Eq(u.next, u.next + 1)]),
    "stencil wider than the grid": lambda g, u, v: sf.Problem([sf.Eq(u.next, u[6, 0])], boundary={u: sf.Periodic()}),
    "fields of different grids": lambda g, u, v: sf.Problem(
        [sf.Eq(u.next, u + sf.Field("w", sf.Grid((5, 5), extent=1.0), levels=1))]),
    "no boundary for a neighbour read": lambda g, u, v: sf.Problem([sf.Eq(u.next, sf.laplacian(u))]),
    "two equations for one field": lambda g, u, v: sf.Problem([sf.Eq(u.next, u), sf.Eq(u.next, 2 * u)]),
    "non-finite constant": lambda g, u, v: sf.Constant("a", float("nan")),
    "non-finite literal": lambda g, u, v: u + float("inf"),
    "not an identifier": lambda g, u, v: sf.Field("my field", g),
    "reserved name": lambda g, u, v: sf.Field("x", g),
    "non-integer power": lambda g, u, v: u**0.5,
    "truth value of an expression": lambda g, u, v: bool(u > 0),
    "prev of a two-level field": lambda g, u, v: u.prev,
    "wrong index rank": lambda g, u, v: u[1],
    "unknown parameter": lambda g, u, v: sf.run(sf.Problem([sf.Eq(u.next, u)]), backend="numpy", params={"nu": 1.0}),
    "time-levelled field never advanced": lambda g, u, v: sf.Problem([sf.Eq(v, u)]),
    "dt an expression": lambda g, u, v: sf.Problem([sf.Eq(u.next, u)], dt=0.5 * sf.Constant("tau", 0.1)),
    "dt not positive": lambda g, u, v: sf.Problem([sf.Eq(u.next, u)], dt=0.0),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_problems_are_refused_with_one_line(case):
    grid = sf.Grid((5, 5), extent=1.0)
    u, v = sf.Field("u", grid), sf.Field("v", grid, levels=1)
    with pytest.raises(sf.StencilforgeError) as info:
        BAD[case](grid, u, v)
    message = str(info.value)
    assert message and "\n" not in message


# ---------------------------------------------------------------- generated equations

offsets = st.tuples(st.integers(-2, 2), st.integers(-2, 2))
terms = st.lists(st.tuples(st.sampled_from(["u", "v", "k"]), offsets, st.floats(-1, 1, allow_nan=False), st.booleans()),
                 min_size=1, max_size=4)
walls = st.sampled_from(["periodic", "neumann", "dirichlet"])


def _random_problem(u_terms, v_terms, wall, fn, dtype, shape, storage=None):
    grid = sf.Grid(shape, extent=(1.0, 1.3), dtype=dtype)
    u, v = sf.Field("u", grid, storage=storage), sf.Field("v", grid, storage=storage)
    k = sf.Field("k", grid, levels=1, storage=storage)
    fields = {"u": u, "v": v, "k": k}
    c = sf.Constant("c", 0.05)

    def rhs(ts, own):
        total = own
        for name, off, w, product in ts:
            a = fields[name][off]
            term = w * a * (own if product else 1.0)
            total = total + c * term
        return total

    funcs = {"none": lambda e: e, "tanh": sf.tanh, "min": lambda e: sf.minimum(e, 0.5),
             "where": lambda e: sf.where(e > 0, e, 0.5 * e), "abs": sf.absolute}
    forcing = c * sf.sin(grid.x + grid.t) + c * sf.exp(-grid.y)  # hoisted out of numba's kernel: one of t, one not
    eqs = [sf.Eq(u.next, funcs[fn](rhs(u_terms, u))), sf.Eq(v.next, rhs(v_terms, v) - u * v * c + forcing)]
    cond = {"periodic": sf.Periodic(), "neumann": sf.Neumann(), "dirichlet": sf.Dirichlet(0.1 * grid.x + grid.y)}[wall]
    rng = np.random.default_rng(len(u_terms) * 7 + len(v_terms))
    uses_k = any(name == "k" for name, *_ in u_terms + v_terms)
    return sf.Problem(
        eqs,
        initial={u: rng.random(shape), v: rng.random(shape), **({k: 1.0 + grid.x * grid.y} if uses_k else {})},
        boundary={u: cond, v: cond, **({k: cond} if uses_k else {})}, dt=0.1,
    )


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(terms, terms, walls, st.sampled_from(["none", "tanh", "min", "where", "abs"]),
       st.sampled_from(["float32", "float64"]), st.tuples(st.integers(5, 13), st.integers(5, 17)))
def test_generated_equations_numba_matches_numpy(u_terms, v_terms, wall, fn, dtype, shape):
    """Within rounding, and bitwise where every pass `rounds_as_oracle` (NumPy may then take a run's first passes)."""
    p = _random_problem(u_terms, v_terms, wall, fn, dtype, shape)
    a = sf.run(p, backend=NumpyBackend(), steps=3)
    b = sf.run(p, backend=NumbaBackend(), steps=3)
    exact = all(numba_printer.rounds_as_oracle(q) for q in p.analysis.passes)
    assert exact == (fn not in ("tanh", "min"))
    tol = 0 if exact else 1e-5 if dtype == "float32" else 1e-12
    for name in ("u", "v"):
        assert np.isfinite(a.fields[name]).all()
        np.testing.assert_allclose(b.fields[name], a.fields[name], rtol=tol, atol=tol)


def _nvrtc_available():
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _nvrtc_available(), reason="cuda-bindings (NVRTC) not installed")
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(terms, terms, walls, st.sampled_from(["none", "tanh", "min", "where", "abs"]), st.sampled_from(["float32", "float64"]))
def test_generated_equations_compile_for_cuda(u_terms, v_terms, wall, fn, dtype):
    from stencilforge.backends.cuda.compile import compile_cubin

    p = _random_problem(u_terms, v_terms, wall, fn, dtype, (8, 9))
    for arch in ("sm_80", "sm_90"):
        for q in p.analysis.passes:
            source, names = cuda_printer.pass_source(q, 2, dtype, p.constants)
            assert set(names) >= {"u_next", "v_next"}
            assert compile_cubin(source, arch, "a generated pass", cuda_printer.OPTIONS)


@pytest.mark.skipif(not _nvrtc_available(), reason="cuda-bindings (NVRTC) not installed")
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_cuda_source_compiles_in_1d_to_3d(ndim):
    from stencilforge.backends.cuda.compile import compile_cubin

    p, _ = heat((6,) * ndim)
    walls = {"u_next": ("Neumann",) + ("Periodic",) * (ndim - 1)}
    for vector, wide, images in ((1, True, None), (2, False, None), (1, False, walls), (2, True, walls)):
        source, _ = cuda_printer.pass_source(p.analysis.passes[0], ndim, "float32", p.constants, vector=vector,
                                             wide_index=wide, images=images)
        assert ("i0 < g" in source) == bool(images)
        assert compile_cubin(source, "sm_90", "heat", cuda_printer.OPTIONS)
        if ndim == 3:
            source, _ = cuda_printer.pass_source(p.analysis.passes[0], 3, "float64", p.constants, vector=vector,
                                                 wide_index=wide, images=images, planes_per_thread=2)
            assert "blockIdx.z * 2" in source
            for arch in ("sm_80", "sm_90"):
                assert compile_cubin(source, arch, "heat, planes per thread", cuda_printer.OPTIONS)


def test_3d_passes_reading_two_fields_above_and_below_take_planes_per_thread():
    from stencilforge.backends.cuda.tune import pass_schedule

    one, _ = heat((6, 7, 8))
    grid = sf.Grid((6, 7, 8), spacing=1.0)
    u, v = sf.Field("u", grid), sf.Field("v", grid)
    two = sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u) - u * v * v), sf.Eq(v.next, v + 0.1 * sf.laplacian(v))],
                     boundary={u: sf.Periodic(), v: sf.Periodic()}, dt=0.1)
    in_plane = sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u) - v[0, 1, 0]), sf.Eq(v.next, v + u[0, 0, 1])],
                          boundary={u: sf.Periodic(), v: sf.Periodic()}, dt=0.1)
    assert pass_schedule(one.analysis.passes[0], 3, 10) == {}
    assert pass_schedule(in_plane.analysis.passes[0], 3, 10) == {}
    assert pass_schedule(two.analysis.passes[0], 3, 10) == {"block": (32, 8), "planes_per_thread": 2}


def test_2d_passes_reading_one_field_at_neighbours_take_four_rows_per_thread():
    from stencilforge.backends.cuda.tune import pass_schedule

    one, _ = heat((16, 20))
    assert pass_schedule(one.analysis.passes[0], 2, 22) == {"rows": 4}
    assert pass_schedule(gray_scott(shape=(16, 20)).analysis.passes[0], 2, 22) == {}


@pytest.mark.parametrize("shape,ghost", [((7, 9), 1), ((5, 3), 2), ((3, 4, 6), 3), ((2, 5, 2), 2)])
def test_ghost_images_written_by_a_cuda_pass_are_the_gather(shape, ghost):
    """The CUDA pass's image stores (conditions and offsets as printed) evaluated over every interior cell: each
    ghost cell is written exactly once, from the cell the gather copies it from, for every mix of walls; and
    the two-step kernel's ghost-to-image map sends each ghost cell to that same cell."""
    import itertools
    from types import SimpleNamespace

    from stencilforge.boundary import Neumann, Periodic
    from stencilforge.grid import Grid as Lattice

    lat = Lattice(shape, (1.0,) * len(shape), np.dtype("float64"), ghost, (0.0,) * len(shape))
    strides = np.cumprod((1,) + tuple(n + 2 * ghost for n in reversed(shape)))[:-1][::-1]
    index = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    env = {"g": ghost, **{f"i{a}": index[a] for a in range(len(shape))}, **{f"n{a}": n for a, n in enumerate(shape)},
           **{f"s{a}": int(st) for a, st in enumerate(strides)}}
    cell = sum((index[a] + ghost) * int(strides[a]) for a in range(len(shape)))
    for kinds in itertools.product(("Periodic", "Neumann"), repeat=len(shape)):
        dst, src = [], []
        for cond, offset in cuda_printer.image_cases(kinds):
            where = np.logical_and.reduce([eval(part, {}, env) for part in cond.split(" && ")])
            target = cell + eval(offset, {}, env)
            dst.append(np.broadcast_to(target, cell.shape)[where])
            src.append(cell[where])
        dst, src = np.concatenate(dst), np.concatenate(src)
        want_dst, want_src = sf.Simulation._ghost_images(SimpleNamespace(lattice=lat, _pitch=None),
                                                         [{"Periodic": Periodic(), "Neumann": Neumann()}[k] for k in kinds])
        order = np.argsort(dst)
        assert len(np.unique(dst)) == len(dst), kinds
        np.testing.assert_array_equal(dst[order], want_dst)
        np.testing.assert_array_equal(src[order], want_src)
        # the two-step kernel's map the other way: every ghost index j to its image, as printed, per axis
        padded = np.meshgrid(*[np.arange(-ghost, n + ghost) for n in shape], indexing="ij")
        image = []
        for a, kind in enumerate(kinds):
            below, above = (e.format(j="j", n="n") for e in cuda_printer.GHOST_IMAGE[kind])
            j, n = padded[a], shape[a]
            image.append(np.where(j < 0, eval(below, {}, {"j": j, "n": n}), np.where(j >= n, eval(above, {}, {"j": j, "n": n}), j)))
        flat = sum((padded[a] + ghost) * int(strides[a]) for a in range(len(shape)))
        mapped = sum((image[a] + ghost) * int(strides[a]) for a in range(len(shape)))
        ghosts = np.isin(flat, want_dst)
        np.testing.assert_array_equal(flat[ghosts][np.argsort(flat[ghosts])], want_dst)
        np.testing.assert_array_equal(mapped[ghosts][np.argsort(flat[ghosts])], want_src)


@pytest.mark.parametrize("walls", [("periodic", "periodic"), ("neumann", "periodic"), ("periodic", "neumann"), ("neumann", "neumann")])
def test_gathered_walls_equal_face_by_face_fills(walls):
    """The one-gather fill of periodic/Neumann ghosts equals boundary.py's fills axis by axis, corners included."""
    from stencilforge.boundary import Neumann, Periodic

    kinds = {"periodic": Periodic(), "neumann": Neumann()}
    grid = sf.Grid((7, 9), extent=1.0)
    u = sf.Field("u", grid)
    p = sf.Problem([sf.Eq(u.next, u[2, -2] + u[-1, 2])], boundary={u: tuple(kinds[w] for w in walls)})
    sim = sf.Simulation(p, NumpyBackend())
    arr = np.random.default_rng(1).random(sim.lattice.padded_shape)
    want = arr.copy()
    for axis, w in enumerate(walls):
        kinds[w].bind(sim.lattice, np, faces=((axis, 0), (axis, 1)))(want, 0.0)
    (static, fill), = sim._fillers["u"]
    fill(arr, 0.0)
    np.testing.assert_array_equal(arr, want)


def test_cli_runs_a_problem_file_and_its_parameters(tmp_path):
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from stencilforge.cli import app

    example = str(Path(__file__).resolve().parents[1] / "examples" / "heat9.py")
    runner = CliRunner()
    res = runner.invoke(app, ["run", example, "--shape", "24,24", "--steps", "10", "--backend", "numpy", "--json", "--set", "alpha=0.5"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["steps"] == 10 and summary["params"]["alpha"] == 0.5
    assert summary["errors"]["u"] < 1e-3
    bad = runner.invoke(app, ["run", example, "--set", "beta=1", "--backend", "numpy"])
    assert bad.exit_code == 2 and "no parameter 'beta'" in bad.output
    missing = runner.invoke(app, ["run", str(tmp_path / "none.py")])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_harmonic_div_grad_is_second_order_across_a_jump():
    """A layered k with a jump: the exact steady flux is constant; the harmonic face average reproduces
    the piecewise-linear solution to rounding, the arithmetic one does not."""
    n = 20
    grid = sf.Grid((n,), extent=1.0)
    u, k = sf.Field("u", grid, levels=1), sf.Field("k", grid, levels=1)
    w = sf.Field("w", grid, levels=1)
    kx = sf.where(grid.x < 0.5, 1.0, 10.0)
    # u = x / k_left left of 0.5 and 0.5 + (x - 0.5) / k_right right of it: k u' = 1 everywhere
    ux = sf.where(grid.x < 0.5, grid.x, 0.5 + (grid.x - 0.5) / 10.0)
    errs = {}
    for avg in ("harmonic", "arithmetic"):
        p = sf.Problem([sf.Eq(w, sf.div_grad(k, u, average=avg))], initial={u: ux, k: kx}, exact={w: 0.0 * grid.x})
        errs[avg] = sf.run(p, backend="numpy", steps=1).summary["errors"]["w"]
    assert errs["harmonic"] < 1e-9 < errs["arithmetic"]


def test_abs_and_source_signal_numbers():
    grid = sf.Grid((6,), extent=1.0)
    u = sf.Field("u", grid)
    p = sf.Problem([sf.Eq(u.next, abs(u - 1.0))], sources=[sf.Source(u, at=(0.75,), signal=2.0)], steps=1)
    r = sf.run(p, backend="numpy")
    assert float(r.fields["u"][4]) == 3.0 and float(r.fields["u"][0]) == 1.0
    with pytest.raises(sf.StencilforgeError):
        sf.Problem([sf.Eq(u.next, u)], steps=10.7)


def test_cli_verify_checks_problem_files(tmp_path):
    """verify FILE.py passes an example and fails a file whose ORDER is wrong, with exit status 1."""
    from pathlib import Path

    from typer.testing import CliRunner

    from stencilforge.cli import app

    example = Path(__file__).resolve().parents[1] / "examples" / "heat9.py"
    wrong = tmp_path / "heat9_wrong.py"
    wrong.write_text(example.read_text().replace("ORDER = 2", "ORDER = 3"))
    runner = CliRunner()
    good = runner.invoke(app, ["verify", str(example), "--backend", "numpy"])
    assert good.exit_code == 0, good.output
    bad = runner.invoke(app, ["verify", str(wrong), "--backend", "numpy"])
    assert bad.exit_code == 1 and "FAIL" in bad.output


@pytest.mark.parametrize("factor", ["exp", "offset", "zero_start"])
def test_separable_wall_values_match_direct_evaluation(factor):
    """A wall f(t) g(x) is evaluated once and scaled; it equals evaluating the expression at each t."""
    from stencilforge.boundary import Dirichlet
    from stencilforge.grid import Grid as Lattice
    from stencilforge.printers.numpy import wall_values

    grid = sf.Grid((6, 7), extent=1.0)
    g = sf.sin(3.0 * grid.x) * sf.cos(2.0 * grid.y) + 0.5
    f = {"exp": sf.exp(-2.0 * grid.t), "offset": 2.0 + sf.sin(grid.t), "zero_start": sf.sin(grid.t)}[factor]
    wall = wall_values(f * g, {})
    direct = wall_values(f * g + 0.0, {})  # not of the form f(t) g(x): evaluated each time
    assert direct.time_dependent and direct.time_factor is None
    assert (wall.time_factor is None) == (factor == "zero_start")
    lattice = Lattice(grid.shape, grid.spacing, grid.dtype, 1, grid.origin)
    for t in (0.0, 0.3, 1.7):
        a, b = np.zeros(lattice.padded_shape), np.zeros(lattice.padded_shape)
        wall.bind(lattice)(a, t)
        direct.bind(lattice)(b, t)
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)
    assert isinstance(wall, Dirichlet)


def test_a_linear_step_runs_as_a_sweep_and_matches_the_generated_passes():
    """One linear equation lowers to the plan's sweep (fast schedules, two steps per pass); its result
    agrees with the generated passes to rounding, and its summary says which path ran."""
    p, _ = heat((20, 24))
    swept = sf.run(p, steps=30, backend="numba")
    generated = sf.run(p, steps=30, backend="numba", generated=True)
    assert list(swept.summary["sweeps"]) == ["u_next"] and generated.summary["sweeps"] == {}
    np.testing.assert_allclose(swept.fields["u"], generated.fields["u"], rtol=1e-13, atol=1e-14)
    assert abs(swept.summary["errors"]["u"] - generated.summary["errors"]["u"]) < 1e-12
    assert sf.run(gray_scott(), steps=2, backend="numpy").summary["sweeps"] == {}


def test_api_snapshots_of_generated_passes_and_checkpoints_of_a_sweep(tmp_path):
    """sf.run writes snapshots (every K steps and the final state) for any problem, and checkpoints
    for a step that lowers to a sweep, from which it resumes bit for bit; it refuses existing files."""
    import h5py

    p = gray_scott(shape=(12, 10))
    out = tmp_path / "gs.h5"
    r = sf.run(p, backend="numpy", steps=12, out=str(out), snapshot_every=5)
    assert r.summary["outputs"]["snapshots"]["count"] == 3
    with h5py.File(out, "r") as f:
        assert list(f["step"][:]) == [5, 10, 12]
        np.testing.assert_array_equal(f["fields/v"][-1], r.fields["v"])
        np.testing.assert_array_equal(f["fields/u"][-1], r.fields["u"])
    assert out.with_suffix(".xmf").exists()
    with pytest.raises(sf.StencilforgeError, match="already exists"):
        sf.run(p, backend="numpy", steps=2, out=str(out), snapshot_every=1)
    sf.run(p, backend="numpy", steps=2, checkpoint=str(tmp_path / "c.h5"), checkpoint_every=1)
    with pytest.raises(sf.StencilforgeError, match="exists"):
        sf.run(p, backend="numpy", steps=2, checkpoint=str(tmp_path / "c.h5"), checkpoint_every=1)
    heat_problem, _ = heat((10, 9))
    ckpt = tmp_path / "heat.ckpt.h5"
    r = sf.run(heat_problem, backend="numpy", steps=7, checkpoint=str(ckpt), checkpoint_every=5)
    assert r.summary["outputs"]["checkpoint"]["step"] == 7
    with h5py.File(ckpt, "r") as f:
        assert int(f.attrs["step"]) == 7
    resumed = sf.run(heat_problem, backend="numpy", steps=5, resume=str(ckpt))
    straight = sf.run(heat_problem, backend="numpy", steps=12)
    assert resumed.summary["sweeps"] and resumed.summary["step"] == 12
    assert all(np.array_equal(resumed.fields[k], straight.fields[k]) for k in straight.fields)


def test_cli_problem_file_writes_snapshots(tmp_path):
    from pathlib import Path

    import h5py
    from typer.testing import CliRunner

    from stencilforge.cli import app

    example = str(Path(__file__).resolve().parents[1] / "examples" / "gray_scott.py")
    out = tmp_path / "gs.h5"
    res = CliRunner().invoke(app, ["run", example, "--shape", "16,12", "--steps", "7", "--backend", "numpy",
                                   "--out", str(out), "--snapshot-every", "3", "--json"])
    assert res.exit_code == 0, res.output
    with h5py.File(out, "r") as f:
        assert list(f["step"][:]) == [3, 6, 7] and set(f["fields"]) == {"u", "v"}


def _neumann_jacobi(n=20):
    """Jacobi for a Poisson problem with Neumann walls, written with the API (lowers to a sweep)."""
    from stencilforge.stencil import Stencil

    grid = sf.Grid((n, n), extent=1.0)
    u, f = sf.Field("u", grid), sf.Field("f", grid, levels=1)
    lap = Stencil.laplacian(2, 1, grid.spacing)
    centre = lap.as_dict()[(0, 0)]
    off = Stencil.from_dict({o: c for o, c in lap.entries if any(o)})
    rhs = sf.cos(math.pi * grid.x) * sf.cos(math.pi * grid.y)
    return sf.Problem([sf.Eq(u.next, sf.stencil(off.scaled(-1 / centre), u) + (1 / centre) * f)],
                      initial={f: rhs}, boundary={u: sf.Neumann()}, residual=f - sf.stencil(lap, u), residual_scale=f,
                      steps=100_000)


def test_convergence_is_judged_on_refilled_walls():
    """A tol run under walls that read the field reports the residual of the iterate with its walls
    refilled, the one the returned field has; with stale ghosts it stopped early."""
    from stencilforge.boundary import Neumann

    p = _neumann_jacobi()
    r = sf.run(p, tol=1e-3, backend="numpy", check_every=7)
    assert r.summary["sweeps"] and r.summary["converged"]
    start = sf.Simulation(p, NumpyBackend())  # the initial state: f, and u's ghosted lattice
    lattice, state = start.lattice, start.state()
    u = state["u"].copy()
    u[lattice.interior] = r.fields["u"]
    Neumann().bind(lattice)(u, 0.0)
    lap = sf.Stencil.laplacian(2, 1, lattice.spacing)
    f = state["f"][lattice.interior]
    res = f - sf.apply(lap, u, backend="numpy")
    again = float(np.linalg.norm(res)) / float(np.linalg.norm(f))  # residual_scale=f
    assert again == pytest.approx(r.summary["residual"], rel=1e-10)
    assert again < 1e-3


def test_a_problem_runs_twice_from_the_same_state():
    from stencilforge import problems

    problem = problems.problem("heat2d", shape=(16, 16))[0]
    for backend in ("numpy", "numba"):
        first = sf.run(problem, steps=40, backend=backend)
        again = sf.run(problem, steps=40, backend=backend)
        assert first.summary["errors"]["u"] == again.summary["errors"]["u"] > 0
        np.testing.assert_array_equal(first.fields["u"], again.fields["u"])


def test_an_unstable_explicit_step_is_warned_of_before_the_run(caplog):
    """The step's linear part, read as a stencil, amplifies some Fourier mode: one line naming the equation and the
    dt its linear part is stable at (the diffusion limit, the upwind CFL limit), or that none is (centred advection
    under forward Euler). Stable steps, the examples and three-level schemes say nothing."""
    import logging

    from stencilforge.ir.stability import unstable

    def warnings_for(p, values):
        return unstable(p, values, periodic=False)[0]

    grid = sf.Grid((32, 32), extent=1.0)
    u = sf.Field("u", grid)
    h = grid.spacing[0]

    def lines(expr, dt, **kw):
        p = sf.Problem([sf.Eq(u.next, expr)], initial={u: 0.0}, boundary={u: sf.Periodic()}, dt=dt, name="p", **kw)
        return warnings_for(p, p.values())

    assert lines(u + 0.25 * h * h * sf.laplacian(u), 0.25 * h * h) == []
    (diffusion,) = lines(u + 0.3 * h * h * sf.laplacian(u) + sf.sin(grid.x), 0.3 * h * h)  # a forcing changes nothing
    assert f"about {0.25 * h * h:.3g} keeps its linear part stable" in diffusion and "u.next" in diffusion
    (cfl,) = lines(u - 1.5 * h * sf.upwind(u, "x", 1.0), 1.5 * h)
    assert f"about {h:.3g} keeps" in cfl
    (centred,) = lines(u - 0.01 * sf.d(u, "x"), 0.01)
    assert "no smaller dt" in centred
    assert lines(u + 0.2 * h * h * sf.laplacian(u) - 5 * u * u * u, 0.2 * h * h) == []  # cubic terms vanish at zero
    leapfrog = sf.Field("w", grid, levels=3)
    wave = sf.Problem([sf.Eq(leapfrog.next, 2 * leapfrog - leapfrog.prev + 9 * h * h * sf.laplacian(leapfrog))],
                      initial={leapfrog: 0.0}, boundary={leapfrog: sf.Periodic()}, dt=0.1)
    assert warnings_for(wave, wave.values()) == []
    walled = sf.Problem([sf.Eq(u.next, u + 0.3 * h * h * sf.laplacian(u))], initial={u: 0.0},
                        boundary={u: sf.Dirichlet(0.0)}, dt=0.3 * h * h, name="hot")
    with caplog.at_level(logging.WARNING, logger="stencilforge"):
        sf.run(walled, steps=2, backend="numpy")
    assert [r.message for r in caplog.records if r.message.startswith("hot: the step for u.next")]


def test_a_certainly_unstable_step_is_refused_before_the_run(tmp_path):
    """One linear equation on a grid periodic along every axis: the grid's own Fourier modes grow, so the run is
    refused (from the CLI, a problem file's --set dt=... too) in one line with the stable dt."""
    from typer.testing import CliRunner

    from stencilforge.cli import app

    grid = sf.Grid((32, 32), extent=1.0)
    u = sf.Field("u", grid)
    h = grid.spacing[0]
    dt = sf.Constant("dt", 0.2 * h * h)
    p = sf.Problem([sf.Eq(u.next, u + dt * sf.laplacian(u))], initial={u: 0.0}, boundary={u: sf.Periodic()}, dt=dt, name="hot")
    assert sf.run(p, steps=2, backend="numpy").summary["steps"] == 2
    with pytest.raises(sf.StencilforgeError, match=rf"run would blow up; dt at or below about {0.25 * h * h:.3g}"):
        sf.run(p, steps=2, backend="numpy", params={"dt": 0.3 * h * h})
    path = tmp_path / "hot.py"
    path.write_text("import stencilforge as sf\n\n\ndef build(shape=None, dtype='float64'):\n"
                    "    grid = sf.Grid(shape or (32, 32), extent=1.0, dtype=dtype)\n    u = sf.Field('u', grid)\n"
                    "    dt = sf.Constant('dt', 1e-4)\n    return sf.Problem([sf.Eq(u.next, u + dt * sf.laplacian(u))], "
                    "initial={u: sf.sin(6.283 * grid.x)}, boundary={u: sf.Periodic()}, dt=dt, name='hot')\n")
    assert CliRunner().invoke(app, ["run", str(path), "--backend", "numpy", "--steps", "2"]).exit_code == 0
    refused = CliRunner().invoke(app, ["run", str(path), "--backend", "numpy", "--steps", "2", "--set", "dt=4e-4"])
    assert refused.exit_code == 2 and "hot: the step for u.next" in refused.output and "would blow up" in refused.output


def test_warming_a_pass_stepper_leaves_the_run_bitwise_as_it_was():
    """The loop's warm-up fills the first step's ghost cells once before the clock starts (a GPU's first kernel
    calls, a decomposed run's first exchange): the step after it computes the same bits."""
    from stencilforge.simulation import PassStepper

    p, _ = heat((13, 17))
    warmed, cold = sf.Simulation(p, NumpyBackend()), sf.Simulation(p, NumpyBackend())
    PassStepper(warmed).warm()
    warmed.step(5)
    cold.step(5)
    for slot, arr in cold.arrays().items():
        np.testing.assert_array_equal(warmed.arrays()[slot], arr, err_msg=slot)
