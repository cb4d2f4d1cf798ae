"""Exact solutions, boundary conditions, stability limits and blow-up detection."""

import math

import numpy as np
import pytest

import stencilforge as sf
from stencilforge import StencilforgeError, problems, solve, timeloop
from stencilforge.backends import get_backend
from stencilforge.boundary import Dirichlet, Neumann, Periodic, all_faces, ghost_region
from stencilforge.grid import Grid, pitched, row_pitch
from stencilforge.ir.nodes import Constant
from stencilforge.plan import Sweep, Term
from stencilforge.printers.numpy import wall_values
from stencilforge.problems.wave3d import ricker
from stencilforge.simulation import initial_array
from stencilforge.stencil import Stencil


def time_step(problem) -> float:
    """The problem's dt: its constant's value, or the number it was given."""
    return problem.values()[problem.dt.name] if isinstance(problem.dt, Constant) else problem.dt.value


def wall_of(step):
    """The one Dirichlet wall of x and t on every face of a named problem's u, as a run binds it."""
    (cond,) = set(step.problem.boundary["u"])
    return wall_values(cond.value, step.values)


@pytest.mark.parametrize(
    "name,shape,steps,bound",
    [
        ("heat2d", (40, 48), 200, 5e-4),  # O(h^2), h ~ 1/45
        ("heat3d", (20, 22, 24), 100, 3e-3),  # O(h^2), h ~ 1/22
        ("wave3d", (24, 24, 24), 40, 2e-3),  # O(dt^2), dt ~ h/10
        ("derivatives", (200, 300), 1, 5e-3),  # first-order closures of the seed operator
    ],
)
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_exact_solution(name, shape, steps, bound, backend):
    result = solve(name, shape=shape, steps=steps, backend=backend, dtype="float64")
    assert result.summary["error"]["rel_l2"] < bound
    assert result.summary["steps"] == steps


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_poisson_converges_to_tolerance(backend):
    result = solve("poisson2d", shape=(24, 20), tol=1e-8, backend=backend, check_every=10, method="jacobi")
    s = result.summary
    assert s["converged"] and s["residual"] < 1e-8
    assert 0 < s["iterations"] < 200_000
    assert s["error"]["max_abs"] < 5e-3


def test_poisson_fixed_iterations_reports_residual():
    s = solve("poisson2d", shape=(16, 16), steps=10, backend="numpy", method="jacobi").summary
    assert s["iterations"] == 10 and s["converged"] is False and s["residual"] > 1e-3


def test_heat_refuses_unstable_dt():
    limit = time_step(problems.problem("heat2d", shape=(32, 32))[0]) / 0.9
    with pytest.raises(StencilforgeError, match=f"largest stable dt is {limit:.6g}"):
        problems.problem("heat2d", shape=(32, 32), dt=limit * 1.01)
    assert time_step(problems.problem("heat2d", shape=(32, 32), dt=limit * 0.99)[0]) == limit * 0.99


def test_wave_refuses_unstable_dt():
    with pytest.raises(StencilforgeError, match="largest stable dt"):
        problems.problem("wave3d", shape=(20, 20, 20), dt=1.0)


def test_blow_up_is_reported_with_its_step():
    heat = problems.problem("heat2d", shape=(16, 16))[0]  # alpha 20 times over: alpha dt 18 times the stable limit
    with pytest.raises(StencilforgeError, match=r"blew up: NaN or Inf found at step \d+"):
        sf.run(heat, steps=5000, check_every=50, backend="numpy", params={"alpha": 20.0})


def unstable_poisson(shape=(16, 16)):
    """poisson2d's Jacobi step with its weights tripled: it grows without bound; its residual is the problem's."""
    from stencilforge.problems.poisson2d import unit_grid

    grid = unit_grid(shape, "float64", 2, "poisson2d")
    u, f = sf.Field("u", grid), sf.Field("f", grid, levels=1)
    lap = Stencil.laplacian(2, 1, grid.spacing)
    centre = lap.as_dict()[(0, 0)]
    off_diagonal = Stencil.from_dict({o: c for o, c in lap.entries if any(o)})
    exact = sf.sin(math.pi * grid.y) * sf.sin(math.pi * grid.x)
    return sf.Problem([sf.Eq(u.next, sf.stencil(off_diagonal.scaled(-3 / centre), u) + (3 / centre) * f)],
                      initial={f: -2.0 * math.pi**2 * exact}, boundary={u: sf.Dirichlet(exact)}, exact={u: exact},
                      residual=f - sf.stencil(lap, u), residual_scale=f, steps=200_000, name="poisson2d")


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_blow_up_of_a_problem_with_a_residual_is_reported_at_the_same_check(backend):
    """A run to a tolerance measures the residual at each check, where the NaN test also runs: it stops at the
    first check whose solution holds a NaN or an infinity, as a run of steps alone does, and both keep the same last
    finite state."""
    from stencilforge.runner import run_with

    loop = dict(steps=5000, check_every=25, backend=backend, keep_finite=True, stall_checks=0)
    with pytest.raises(StencilforgeError, match=r"blew up: NaN or Inf found at step \d+") as measured:
        run_with(unstable_poisson(), None, tol=1e-30, **loop)
    with pytest.raises(StencilforgeError, match=r"blew up: NaN or Inf found at step \d+") as stepped:
        run_with(unstable_poisson(), None, **loop)
    assert measured.value.step == stepped.value.step and measured.value.last_finite == stepped.value.last_finite > 0
    kept = measured.value.finite_fields["u"]
    assert np.isfinite(kept).all() and np.array_equal(kept, stepped.value.finite_fields["u"])


def test_neumann_conserves_heat(rng):
    grid = Grid((12, 15), (1.0, 1.0), np.dtype(np.float64), 1, (0.5, 0.5))
    u = grid.zeros()
    u[grid.interior] = rng.random(grid.shape)
    total = u[grid.interior].sum()
    fill = Neumann().bind(grid)
    step = get_backend("numba").sweep(Sweep("v", (Term("u", Stencil.identity(2) + Stencil.five_point().scaled(0.2)),)), grid)
    fields = {"u": u, "v": grid.zeros()}
    for _ in range(50):
        fill(fields["u"], 0.0)
        step(fields)
        fields["u"], fields["v"] = fields["v"], fields["u"]
    assert fields["u"][grid.interior].sum() == pytest.approx(total, rel=1e-12)


def test_periodic_ghosts_wrap(rng):
    grid = Grid.unit_box((6, 7), "float64", ghost=2, periodic=True)
    u = grid.zeros()
    u[grid.interior] = rng.random(grid.shape)
    Periodic().bind(grid)(u, 0.0)
    np.testing.assert_array_equal(u[0:2, 2:9], u[6:8, 2:9])
    np.testing.assert_array_equal(u[8:10, 2:9], u[2:4, 2:9])
    np.testing.assert_array_equal(u[2:8, 0:2], u[2:8, 7:9])


def test_time_dependent_dirichlet_follows_exact_solution():
    step = problems.linear_step("heat2d", shape=(10, 12), dtype="float64")
    fill = wall_of(step).bind(step.lattice)
    u = step.lattice.zeros()
    fill(u, 0.01)
    x, y = step.lattice.mesh()
    expected = np.exp(-2 * np.pi**2 * 0.01) * np.sin(np.pi * (x + 0.25)) * np.sin(np.pi * (y + 0.25))
    np.testing.assert_allclose(u[0, :], np.broadcast_to(expected, u.shape)[0, :])
    np.testing.assert_allclose(u[:, -1], np.broadcast_to(expected, u.shape)[:, -1])


@pytest.mark.parametrize("shape,ghost", [((5, 7), 2), ((4, 6, 3), 1), ((8, 7, 9), 3)])
@pytest.mark.parametrize("subset", [False, True])
def test_dirichlet_writes_every_ghost_slab_cell_and_nothing_else(shape, ghost, subset, rng):
    grid = Grid.unit_box(shape, "float64", ghost=ghost)
    faces = all_faces(grid.ndim)
    if subset:  # a decomposed block's physical faces: some sides are internal cuts
        faces = [f for i, f in enumerate(faces) if rng.random() < 0.5 or i == 0]
    expected = np.zeros(grid.padded_shape, bool)
    for axis, side in faces:
        expected[ghost_region(grid, axis, side)] = True
    for bc in (
        Dirichlet(lambda t, **xs: t + xs["x"] * 0 + 7.0, time_dependent=True),
        Dirichlet(lambda t, **xs: 4.0 + 0 * xs["x"], time_factor=lambda t: 1.0 + t),
    ):
        u = np.full(grid.padded_shape, np.nan)
        bc.bind(grid, np, faces)(u, 1.0)
        np.testing.assert_array_equal(~np.isnan(u), expected)
        assert np.all(u[expected] == 8.0)


def test_separable_dirichlet_matches_the_function(rng):
    step = problems.linear_step("wave3d", shape=(9, 8, 10), radius=2, dtype="float64")
    bc = wall_of(step)
    assert bc.time_factor is not None and not bc.static
    general = Dirichlet(bc.value, time_dependent=True)
    for t in (0.0, 0.37, 1.9):
        a = rng.random(step.lattice.padded_shape)
        b = a.copy()
        bc.bind(step.lattice)(a, t)
        general.bind(step.lattice)(b, t)
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)


def test_dirichlet_refuses_a_field_of_another_layout():
    grid = Grid.unit_box((6, 6), "float64", ghost=1)
    fill = Dirichlet(lambda x, y, t: x + y + t, time_dependent=True).bind(grid)
    with pytest.raises(ValueError, match="rows 8 elements apart"):
        fill(np.zeros((8, 16))[:, ::2], 0.0)
    with pytest.raises(ValueError, match="rows 8 elements apart"):
        fill(np.zeros((8, 12))[:, :8], 0.0)


@pytest.mark.parametrize("shape", [(6, 7), (5, 6, 7)])
@pytest.mark.parametrize("scaled", [False, True])
def test_dirichlet_fills_a_field_whose_rows_lie_a_pitch_apart(shape, scaled):
    """The layout the cuda backend's `field` gives (rows on cache lines): same ghost values as the
    C-contiguous fill, the interior and the padding between rows untouched."""
    grid = Grid.unit_box(shape, "float64", ghost=2)
    value = ((lambda t, **xs: np.sin(xs["x"]) + xs["y"]) if scaled
             else (lambda t, **xs: sum((k + 1) * c for k, c in enumerate(xs.values())) + t))
    bc = Dirichlet(value, time_factor=(lambda t: 1 + t) if scaled else None, time_dependent=not scaled)
    pitch, first = 16, 3
    rows = int(np.prod(grid.padded_shape[:-1]))
    buf = np.full(rows * pitch + first, -7.0)
    view = pitched(buf, grid.padded_shape, pitch, first)
    view[...] = 5.0
    dense = np.full(grid.padded_shape, 5.0)
    bc.bind(grid, pitch=pitch)(view, 0.3)
    bc.bind(grid)(dense, 0.3)
    np.testing.assert_array_equal(view, dense)
    assert (buf[:first] == -7.0).all()
    assert (buf[first:].reshape(-1, pitch)[:, grid.padded_shape[-1]:] == -7.0).all()
    assert (dense[grid.interior] == 5.0).all() and (dense != 5.0).any()


def test_row_pitch_reads_the_layouts_sweeps_accept_and_refuses_others():
    dense = np.zeros((4, 5, 6))
    assert row_pitch(dense) == 6 and row_pitch(dense[1]) == 6 and row_pitch(dense[1, 2]) == 6
    lined = pitched(np.zeros(4 * 5 * 16 + 3), (4, 5, 6), 16, 3)
    assert lined.shape == (4, 5, 6) and row_pitch(lined) == 16 and row_pitch(lined[1:3]) == 16
    assert row_pitch(np.zeros((5, 8))[:, :6]) == 8
    for other in (dense[..., ::2], dense[:, ::-1], np.zeros((4, 6, 6))[:, :5], dense.transpose(1, 0, 2), np.zeros((5, 8))[:, 2::2]):
        assert row_pitch(other) is None


def test_wave_velocity_models(tmp_path):
    layered = problems.linear_step("wave3d", shape=(18, 17, 17), velocity="layered", radius=2)
    dt = time_step(layered.problem)
    vel = initial_array(layered.problem, layered.lattice, "vel", 0, layered.values, dt)[layered.lattice.interior]
    assert vel[0].max() < vel[-1].min()
    assert layered.problem.exact == {}
    good = tmp_path / "v.npy"
    np.save(good, np.full((17, 17, 17), 1.5))
    assert problems.problem("wave3d", shape=(17, 17, 17), velocity=str(good))[0].exact == {}
    np.save(tmp_path / "shape.npy", np.ones((4, 4, 4)))
    with pytest.raises(StencilforgeError, match="has shape"):
        problems.problem("wave3d", shape=(17, 17, 17), velocity=str(tmp_path / "shape.npy"))
    bad = np.ones((17, 17, 17))
    bad[3, 3, 3] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    with pytest.raises(StencilforgeError, match="NaN"):
        problems.problem("wave3d", shape=(17, 17, 17), velocity=str(tmp_path / "nan.npy"))


def test_ricker_wavelet_is_the_second_derivative_of_a_gaussian_delayed_one_period():
    """(1 - 2a) exp(-a) with a = (pi f (t - 1/f))^2: peak 1 at t = 1/f, symmetric about it, zero mean."""
    f = 20.0
    w = np.vectorize(ricker(f))
    t = np.linspace(0.0, 2.0 / f, 4001)
    a = (np.pi * f * (t - 1.0 / f)) ** 2
    np.testing.assert_allclose(w(t), (1 - 2 * a) * np.exp(-a), rtol=1e-14, atol=1e-15)
    assert w(1.0 / f) == 1.0 and np.all(w(t) <= 1.0)
    np.testing.assert_allclose(w(t), w(t[::-1]), rtol=1e-9, atol=1e-12)
    assert abs(w(t).sum()) < 1e-3 * np.abs(w(t)).sum()  # on a uniform grid: the integrals' ratio


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_ricker_source_is_a_point_delta_of_the_wavelet_at_the_centre(backend):
    """From rest, one leapfrog step leaves (c dt)^2 w(t0) / h^3 in the centre cell and nothing elsewhere:
    the discrete u_tt = c^2 (laplacian u + w(t) delta(x - centre))."""
    c, f = 1.5, 20.0
    step = problems.linear_step("wave3d", shape=(20, 20, 20), radius=2, source=True, frequency=f, c=c, dtype="float64")
    dt, lattice = time_step(step.problem), step.lattice
    for level in (0, -1):  # at rest: u and u.prev
        assert not initial_array(step.problem, lattice, "u", level, step.values, dt)[lattice.interior].any()
    result = sf.run(step.problem, steps=1, backend=backend)
    u = np.asarray(result.fields["u"])
    centre = tuple(n // 2 for n in lattice.shape)
    assert [tuple(int(i) for i in cell) for cell in np.argwhere(u)] == [centre]
    cell_volume = float(np.prod(lattice.spacing))
    np.testing.assert_allclose(u[centre] * cell_volume, (c * dt) ** 2 * ricker(f)(0.0), rtol=1e-12)
    assert "error" not in result.summary


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(name="heat9d"), "unknown problem"),
        (dict(name="heat2d", shape=(2, 40)), "too small"),
        (dict(name="heat2d", shape=(40, 40, 40)), "2D shape"),
        (dict(name="heat2d", radius=3), "does not take --radius"),
        (dict(name="wave3d", radius=9), "radius must be"),
        (dict(name="heat2d", alpha=-1.0), "alpha must be"),
        (dict(name="derivatives", accuracy=3), "accuracy must be"),
        (dict(name="derivatives", axis=2), "axis must be"),
        (dict(name="heat2d", dtype="int32"), "unsupported dtype"),
    ],
)
def test_bad_problem_input(kwargs, match):
    name = kwargs.pop("name")
    with pytest.raises(StencilforgeError, match=match):
        problems.problem(name, **kwargs)


@pytest.mark.parametrize(
    "name,kwargs,match",
    [
        ("poisson2d", dict(steps=-1, method="jacobi"), "non-negative"),
        ("poisson2d", dict(tol=0.0, method="jacobi"), "positive"),
        ("poisson2d", dict(steps=-1), "max_cycles must be a positive integer"),
        ("poisson2d", dict(method="sor"), "method must be multigrid or jacobi"),
        ("heat2d", dict(tol=1e-3), "poisson2d only"),
    ],
)
def test_bad_loop_options(name, kwargs, match):
    with pytest.raises(StencilforgeError, match=match):
        solve(name, shape=(8, 8), backend="numpy", **kwargs)


def test_unknown_or_missing_backend():
    with pytest.raises(StencilforgeError, match="unknown backend"):
        get_backend("fortran")


def test_solve_returns_the_result_and_summary_keys_of_sf_run():
    """One Result class and one summary schema: a named problem through `sf.solve`, the same equation written by hand
    through `sf.run`, and a Poisson problem, solved by multigrid as `stencilforge run poisson2d` solves it."""
    import stencilforge as sf
    from stencilforge.problems.heat import problem as heat_problem

    named = sf.solve("heat2d", shape=(20, 24), steps=5, backend="numpy")
    own = sf.run(heat_problem(2, (20, 24)), steps=5, backend="numpy", generated=True)
    poisson = sf.solve("poisson2d", shape=(31, 31), tol=1e-8, backend="numpy")
    common = {"problem", "backend", "shape", "dtype", "steps", "step", "wall_s", "gcells_per_s", "teff_gbps", "params",
              "errors"}
    for result in (named, own, poisson):
        assert type(result) is sf.Result and common <= set(result.summary), set(common) - set(result.summary)
    assert set(named.summary["errors"]) == set(own.summary["errors"]) == {"u"}
    assert named.summary["errors"]["u"] == pytest.approx(own.summary["errors"]["u"], rel=1e-3)
    assert poisson.summary["converged"] and "cycles" in poisson.summary and poisson.summary["errors"]["u"] < 1e-2
    with pytest.raises(StencilforgeError, match="method applies to poisson2d, poisson3d, not heat2d"):
        sf.solve("heat2d", method="jacobi")


def _growing(wall=0.0, dt_factor=3.0):
    """Forward Euler heat above its stability limit (it grows without bound), Dirichlet walls `wall`."""
    import stencilforge as sf

    grid = sf.Grid((12, 10), extent=1.0)
    u = sf.Field("u", grid)
    dt = dt_factor * 0.25 * min(grid.spacing) ** 2
    return sf.Problem([sf.Eq(u.next, u + dt * sf.laplacian(u))], initial={u: sf.sin(3 * grid.x) * grid.y},
                      boundary={u: sf.Dirichlet(wall)}, dt=dt, name="growing")


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("generated", [False, True])
def test_a_blow_up_is_caught_before_a_snapshot_would_hold_it(backend, generated, tmp_path):
    """Snapshots every 20 steps, checks every 100: the first non-finite snapshot is refused, the file holds only
    finite ones, the message names the field and the last finite step (a snapshot's, not step 0), and the
    exception carries the state where it was seen."""
    import h5py

    import stencilforge as sf
    from stencilforge.errors import BlowUp

    with pytest.raises(BlowUp) as info:
        sf.run(_growing(), steps=100000, backend=backend, check_every=100, out=str(tmp_path / "r.h5"), snapshot_every=20,
               generated=generated)
    err = info.value
    assert err.step % 20 == 0 and err.last_finite == err.step - 20 and err.last_finite > 0
    assert f"found at step {err.step} in u (interior) (finite at step {err.last_finite}" in str(err) and "reduce dt" in str(err)
    assert not np.isfinite(err.fields["u"]).all()
    with h5py.File(tmp_path / "r.h5", "r") as f:
        steps = [s for s in f["step"][:] if s >= 0]
        assert steps[-1] == err.last_finite and all(np.isfinite(f["fields/u"][i]).all() for i in range(len(steps)))


def _blow_up(path, backend, **opts):
    """The BlowUp of `_growing` run through `path`: "passes" (sf.run, its linear pass as the backend's sweep) or
    "generated" (sf.run, every pass its generated kernel); each keeps the last finite state unless told not to."""
    from stencilforge.errors import BlowUp

    with pytest.raises(BlowUp) as info:
        _run_growing(path, backend, steps=100000, **opts)
    return info.value


def _run_growing(path, backend, **opts):
    return sf.run(_growing(), backend=backend, generated=path == "generated", **opts)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("path", ["passes", "generated"])
def test_a_blow_up_keeps_the_last_finite_state(path, backend):
    """The exception holds the watched field as the last check found it finite: bit for bit what a run of exactly
    that many steps ends with (numba fuses steps differently in the two runs), and the message says so."""
    err = _blow_up(path, backend, check_every=20)
    assert err.last_finite > 0 and set(err.finite_fields) == {"u"} and isinstance(err.finite_fields["u"], np.ndarray)
    assert np.isfinite(err.finite_fields["u"]).all() and not np.isfinite(err.fields["u"]).all()
    assert f"(finite at step {err.last_finite}, the last check, whose state the exception's finite_fields hold)" in str(err)
    last = _run_growing(path, backend, steps=err.last_finite, check_every=20)
    assert np.array_equal(err.finite_fields["u"], last.fields["u"])
    assert list(last.summary["sweeps"]) == (["u_next"] if path == "passes" else [])  # the lowered sweep, or generated


@pytest.mark.parametrize("path", ["passes", "generated"])
def test_a_blow_up_at_the_first_check_keeps_the_initial_state(path):
    err = _blow_up(path, "numpy", check_every=1000)
    assert err.last_finite == 0
    assert np.array_equal(err.finite_fields["u"], _run_growing(path, "numpy", steps=0).fields["u"])


def test_an_initial_state_holding_nan_is_not_kept():
    from stencilforge.errors import BlowUp
    from stencilforge.simulation import PassStepper, Simulation

    backend = get_backend("numpy")
    sim = Simulation(_growing(), backend)
    sim.state()["u"][3, 3] = np.nan
    with pytest.raises(BlowUp) as info:
        timeloop.run_stepper(lambda: PassStepper(sim), backend, timeloop.LoopOptions(steps=10, check_every=5, keep_finite=True))
    assert info.value.last_finite == 0 and info.value.finite_fields is None


@pytest.mark.parametrize("path", ["passes", "generated"])
def test_keeping_off_leaves_no_last_finite_state(path):
    err = _blow_up(path, "numpy", check_every=20, keep_finite=False)
    assert err.finite_fields is None and "finite_fields" not in str(err) and err.last_finite > 0


def test_a_copy_that_would_take_half_the_memory_is_not_made(monkeypatch, caplog):
    """It only helps after a failure: it must not make the run fail or the host kill it. The log says why."""
    import logging

    monkeypatch.setattr(timeloop, "available_bytes", lambda: 1000)
    with caplog.at_level(logging.INFO, logger="stencilforge"):
        err = _blow_up("passes", "numpy", check_every=20)
    assert err.finite_fields is None
    assert any("is not kept: it would take more than half the memory available" in r.getMessage() for r in caplog.records)


GROWING_FILE = '''
import stencilforge as sf


def build(shape=None, dtype="float64"):
    grid = sf.Grid(shape or (12, 10), extent=1.0, dtype=dtype)
    u = sf.Field("u", grid)
    dt = 3.0 * 0.25 * min(grid.spacing) ** 2
    return sf.Problem([sf.Eq(u.next, u + dt * sf.laplacian(u))], initial={u: sf.sin(3 * grid.x) * grid.y},
                      boundary={u: sf.Dirichlet(0.0)}, dt=dt, name="growing")
'''


def _on_numpy(problem, **kwargs):
    import stencilforge as sf

    return sf.run(problem, backend="numpy", **kwargs)


def test_a_blow_up_names_the_checkpoint_that_leads_to_its_last_finite_state(tmp_path):
    """The message names the last checkpoint (files hold only finite states) and how far to resume it to reach the last
    finite state, which that resume gives bit for bit."""
    from stencilforge.errors import BlowUp

    ckpt = tmp_path / "g.ckpt.h5"
    with pytest.raises(BlowUp) as info:
        _on_numpy(_growing(), steps=100000, check_every=20, checkpoint=str(ckpt), checkpoint_every=30)
    err = info.value
    start = err.last_finite - err.last_finite % 30
    assert 0 < start < err.last_finite, (start, err.last_finite)
    assert str(err).endswith(f"last complete checkpoint: step {start} ({ckpt}); resume={str(ckpt)!r}, "
                             f"steps={err.last_finite - start} reproduces step {err.last_finite} bit for bit")
    resumed = _on_numpy(_growing(), steps=err.last_finite - start, resume=str(ckpt))
    assert np.array_equal(resumed.fields["u"], err.finite_fields["u"])


def test_the_cli_keeps_no_copy_and_says_how_to_reach_the_last_finite_state(tmp_path, monkeypatch):
    """Its process ends with the error, so a copy in memory would be lost: it names the checkpoint to resume instead."""
    import re

    import h5py
    from typer.testing import CliRunner

    from stencilforge.cli import app, join_multi_values

    file, ckpt = tmp_path / "growing.py", tmp_path / "g.ckpt.h5"
    file.write_text(GROWING_FILE)
    monkeypatch.setattr(timeloop.Monitor, "_keeper", lambda self: pytest.fail("the CLI keeps no copy"))
    common = ["run", str(file), "--backend", "numpy", "--check-every", "20"]
    blown = CliRunner().invoke(app, join_multi_values([*common, "--steps", "100000", "--checkpoint-every", "30", "--checkpoint",
                                                       str(ckpt)]))
    (line,) = [text for text in blown.stderr.splitlines() if text.startswith("error:")]  # after the stability warning
    assert blown.exit_code == 2, blown.output
    last = int(re.search(r"finite at step (\d+), the last check\)", line).group(1))
    start = last - last % 30
    assert line.endswith(f"last complete checkpoint: step {start} ({ckpt}); --resume {ckpt} --steps {last - start} "
                         f"reproduces step {last} bit for bit"), line
    resumed = CliRunner().invoke(app, join_multi_values([*common, "--resume", str(ckpt), "--steps", str(last - start)]))
    assert resumed.exit_code == 0, resumed.output
    with h5py.File(ckpt, "r") as f:
        assert f.attrs["step"] == last
        interior = f["fields/u"][1:-1, 1:-1]
    monkeypatch.undo()
    assert np.array_equal(interior, _on_numpy(_growing(), steps=last).fields["u"])


@pytest.mark.parametrize("generated", [False, True])
def test_a_non_finite_wall_is_named_as_the_cause(generated):
    import stencilforge as sf
    from stencilforge.errors import BlowUp

    with pytest.raises(BlowUp, match=r"in u \(interior and walls\).*the Dirichlet wall values of u are NaN or Inf"):
        sf.run(_growing(wall=float("inf"), dt_factor=0.5), steps=50, backend="numpy", check_every=10, generated=generated)
