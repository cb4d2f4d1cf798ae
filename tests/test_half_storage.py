"""Fields stored in float16: float32 arithmetic on widened values, every stored value rounded to float16.

The oracle's rule is checked against the float32 run itself: one step of a half-precision problem equals
one float32 step from the same (widened) state, rounded to float16, for every array and ghost cell.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import stencilforge as sf
from stencilforge.backends.numba import NumbaBackend
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.boundary import Dirichlet
from stencilforge.grid import Grid
from stencilforge.problems import heat, wave3d
from test_equations import _nvrtc_available, _random_problem, terms, walls


def _stepped_against_float32(half, single, steps):
    """Step the float16 problem; before each step load its widened state into the float32 one and step
    that too: every array must equal the float32 result rounded to float16."""
    a, b = sf.Simulation(half, NumpyBackend()), sf.Simulation(single, NumpyBackend())
    for n in range(steps):
        b.load(n, {k: v.astype(np.float32) for k, v in a.state().items()})
        a.step()
        b.step()
        for slot, arr in a.state().items():
            assert arr.dtype == np.float16
            np.testing.assert_array_equal(arr, b.state()[slot].astype(np.float16), err_msg=f"{slot} after step {n + 1}")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms, terms, walls, st.sampled_from(["none", "tanh", "min", "where", "abs"]), st.tuples(st.integers(5, 13), st.integers(5, 17)))
def test_a_half_step_is_the_float32_step_rounded(u_terms, v_terms, wall, fn, shape):
    half = _random_problem(u_terms, v_terms, wall, fn, "float32", shape, storage="float16")
    single = _random_problem(u_terms, v_terms, wall, fn, "float32", shape)
    _stepped_against_float32(half, single, 3)


def test_walls_sources_and_initial_values_round_through_float32():
    """A constant wall, a wall of x, a point source and initial values given as an expression and as a
    float64 array: each stored value is the float32 value rounded to float16 (CuPy rounds a double to half
    through float, so the host does the same)."""
    grid = sf.Grid((9, 11), extent=1.0, dtype="float32")

    def build(storage):
        u, v = sf.Field("u", grid, storage=storage), sf.Field("v", grid, storage=storage)
        values = np.random.default_rng(3).random((9, 11)) / 3.0
        k = 0.2 * grid.spacing[0] ** 2
        return sf.Problem([sf.Eq(u.next, u + k * sf.laplacian(u)), sf.Eq(v.next, v + k * sf.laplacian(v) + 0.01 * u)],
                          initial={u: sf.sin(grid.x) / 3.0, v: values},
                          boundary={u: sf.Dirichlet(1.0 / 3.0), v: sf.Dirichlet(grid.x / 7.0 + grid.y / 3.0)},
                          sources=[sf.Source(u, (0.5, 0.5), lambda t: 1.0 / 3.0 + t)], dt=0.01)

    _stepped_against_float32(build("float16"), build(None), 4)
    sim = sf.Simulation(build("float16"), NumpyBackend())
    assert sim.levels["u"][0][0, 0] == np.float16(np.float32(1.0 / 3.0))


@pytest.mark.parametrize("kind", ["constant", "function", "scaled"])
def test_wall_fills_of_a_half_field_round_through_float32(kind):
    """Each kind of Dirichlet fill writes round16(round32(value)) into a float16 field's ghost cells. The
    values sit where rounding a double straight to half differs from rounding it through float."""
    lattice = Grid((6, 7), (0.1, 0.1), np.dtype(np.float32), 1, (0.0, 0.0))
    tie = 1.0 + 2.0**-11 + 2.0**-40  # just above a half-way point of float16, which float32 rounds down onto it
    assert np.float16(tie) != np.float16(np.float32(tie))
    wall = {"constant": Dirichlet(tie),
            "function": Dirichlet(lambda x, y, t: tie + 0 * x, time_dependent=True),
            "scaled": Dirichlet(lambda x, y, t: tie + 0 * x, time_factor=lambda t: 1.0)}[kind]
    arr = np.full(lattice.padded_shape, np.nan, dtype=np.float16)
    wall.bind(lattice)(arr, 0.0)
    assert (arr[0, 1:-1] == np.float16(np.float32(tie))).all()


def test_half_storage_halves_the_bytes_and_reports_float16_fields():
    p, p32 = heat.problem(2, (16, 20), storage="float16"), heat.problem(2, (16, 20))
    assert p.analysis.bytes_per_cell() * 2 == p32.analysis.bytes_per_cell() == 8
    result = sf.run(p, steps=3, backend="numpy")
    assert result.fields["u"].dtype == np.float16
    assert result.summary["bytes_per_cell"] == 4 and result.summary["sweeps"] == {}
    exact = sf.run(p32, steps=3, backend="numpy")
    assert 0 < np.abs(result.fields["u"].astype(np.float64) - exact.fields["u"]).max() < 2e-3


def test_what_cannot_take_half_storage_says_so_in_one_line():
    p = heat.problem(2, (16, 20), storage="float16")
    assert sf.Simulation(heat.problem(2, (16, 20)), NumpyBackend()).sweeps  # float32: its linear pass runs as a sweep
    assert sf.Simulation(p, NumpyBackend()).sweeps == {}  # the sweeps keep every field in the grid's dtype: its generated pass
    refusal = r"^heat2d: fields stored in float16 \(u\) run on the numpy and cuda backends, not numba$"
    with pytest.raises(sf.StencilforgeError, match=refusal):
        sf.run(p, steps=1, backend=NumbaBackend())
    grid64 = sf.Grid((8, 8), extent=1.0, dtype="float64")
    with pytest.raises(sf.StencilforgeError, match="float16 storage computes in float32"):
        sf.Field("u", grid64, storage="float16")
    grid = sf.Grid((8, 8), extent=1.0, dtype="float32")
    for bad in ("bfloat16", "int8", "float64", object()):
        with pytest.raises(sf.StencilforgeError, match="storage must be 'float16' or the grid's dtype"):
            sf.Field("u", grid, storage=bad)
    assert not sf.Field("u", grid, storage="float32").half


def test_a_half_run_resumes_bit_for_bit_and_snapshots_widen(tmp_path):
    p = heat.problem(2, (12, 10), storage="float16")
    whole = sf.run(p, steps=6, backend="numpy")
    sf.run(p, steps=3, backend="numpy", out=str(tmp_path / "a.npz"), snapshot_every=3,
           checkpoint=str(tmp_path / "a.ckpt.h5"), checkpoint_every=3)
    rest = sf.run(p, steps=3, backend="numpy", resume=str(tmp_path / "a.ckpt.h5"))
    np.testing.assert_array_equal(rest.fields["u"], whole.fields["u"])
    snap = np.load(tmp_path / "a.npz")["fields/u"]
    assert snap.dtype == np.float32 and np.array_equal(snap[-1].astype(np.float16), snap[-1])


@pytest.mark.skipif(not _nvrtc_available(), reason="cuda-bindings (NVRTC) not installed")
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms, terms, walls, st.sampled_from(["none", "tanh", "where"]))
def test_half_passes_compile_for_cuda(u_terms, v_terms, wall, fn):
    from stencilforge.backends.cuda.compile import compile_cubin
    from stencilforge.printers import cuda

    p = _random_problem(u_terms, v_terms, wall, fn, "float32", (8, 9), storage="float16")
    (pas,) = p.analysis.passes
    source, names = cuda.pass_source(pas, 2, np.float32, p.constants, images={"u_next": ("Periodic", "Neumann")})
    assert "const unsigned short* __restrict__ a_u" in source and "sf_f2h(e0)" in source
    for arch in ("sm_80", "sm_90"):
        compile_cubin(source, arch, "half pass", cuda.OPTIONS)


def test_half_passes_take_more_cells_per_thread_on_the_gpu():
    """A thread's float16 loads are 2 bytes: where every array is float16 and a padded row holds whole 4-byte
    words, a thread takes the two cells of a word; otherwise 4 rows (planes) of 2 columns."""
    from stencilforge.backends.cuda.tune import PASS_HALF, PASS_HALF_WORDS, pass_schedule

    for ndim, shape in ((2, (16, 20)), (3, (6, 7, 8))):
        half, single = heat.problem(ndim, shape, storage="float16"), heat.problem(ndim, shape)
        assert pass_schedule(half.analysis.passes[0], ndim, 22) == PASS_HALF_WORDS[ndim]
        assert pass_schedule(half.analysis.passes[0], ndim, 23) == PASS_HALF[ndim]
        assert pass_schedule(single.analysis.passes[0], ndim, 22) not in (PASS_HALF[ndim], PASS_HALF_WORDS[ndim])
    grid = sf.Grid((16, 20), extent=1.0, dtype="float32")
    u, k = sf.Field("u", grid, storage="float16"), sf.Field("k", grid, levels=1)
    mixed = sf.Problem([sf.Eq(u.next, u + 0.01 * k * sf.laplacian(u))], boundary={u: sf.Periodic()}, dt=0.1)
    assert pass_schedule(mixed.analysis.passes[0], 2, 22) == PASS_HALF[2]


@pytest.mark.skipif(not _nvrtc_available(), reason="cuda-bindings (NVRTC) not installed")
@pytest.mark.parametrize("ndim,walls", [(1, ("Periodic",)), (2, ("Periodic", "Neumann")), (3, ("Neumann", "Periodic", "Periodic"))])
def test_word_passes_compile_with_their_ghost_images(ndim, walls):
    from stencilforge.backends.cuda.compile import compile_cubin
    from stencilforge.printers import cuda

    grid = sf.Grid((6, 7, 8)[:ndim], extent=1.0, dtype="float32")
    u, v = sf.Field("u", grid, storage="float16"), sf.Field("v", grid, storage="float16")
    p = sf.Problem([sf.Eq(u.next, u + 0.01 * sf.laplacian(u) - u * v * v + sf.sin(grid.coordinates[-1])),
                    sf.Eq(v.next, v + 0.01 * sf.laplacian(v) + u.next * v)],
                   boundary={u: sf.Periodic(), v: sf.Periodic()}, dt=0.1)
    (pas,) = p.analysis.passes
    source, names = cuda.pass_source(pas, ndim, np.float32, p.constants, rows=4, words=True,
                                     images={"u_next": walls, "v_next": walls})
    assert "((unsigned int*)a_u_next)[r + p]" in source and "sf_word(a_u, r" in source and "sf_h2f(b0_1)" in source
    for arch in ("sm_80", "sm_90"):
        compile_cubin(source, arch, f"{ndim}D words", cuda.OPTIONS)


def _leapfrog_wave(n: int, radius: int, storage: str) -> sf.Problem:
    """The standing wave of wave3d as 2u - u.prev + dt^2 c^2 L u, its squared speed stored (O(1))."""
    from stencilforge.problems.wave3d import standing_wave_frequency

    seed, _ = wave3d.problem((n, n, n), radius=radius)
    grid = seed.analysis.grid
    u, c2 = sf.Field("u", grid, levels=3, storage=storage), sf.Field("c2", grid, levels=1, storage=storage)
    dt = seed.dt.value
    s0, s1, s2 = (sf.sin(np.pi * x) for x in grid.coordinates)
    omega = standing_wave_frequency(1.0)
    standing = sf.cos(omega * grid.t) * s0 * s1 * s2
    return sf.Problem([sf.Eq(u.next, 2 * u - u.prev + sf.Constant("dt2", dt * dt) * (c2 * sf.laplacian(u, order=2 * radius)))],
                      initial={u: standing, c2: 1.0}, boundary={u: sf.Dirichlet(sf.cos(omega * grid.t) * (s0 * s1 * s2))},
                      exact={u: standing}, dt=dt)


def test_half_wave_takes_the_increment_form_and_drifts_less_than_leapfrog():
    """2u - u.prev rounds the step's small change against u; d = u - u.prev stored on its own keeps it. At
    32^3, radius 4, 200 steps the leapfrog form's float16 error is 8.9e-3 and the increment form's 3.1e-3
    (at 128^3, radius 8: 0.36 against 4.5e-3, the runs in docs/performance.md)."""
    half, params = wave3d.problem((32, 32, 32), radius=4, storage="float16")
    assert params["storage"] == "float16" and {f.name for f in half.analysis.fields} == {"u", "d", "c2"}
    assert all(f.half for f in half.analysis.fields)
    increment = sf.run(half, steps=200, backend="numpy").summary["errors"]["u"]
    leapfrog = sf.run(_leapfrog_wave(32, 4, "float16"), steps=200, backend="numpy").summary["errors"]["u"]
    single = sf.run(wave3d.problem((32, 32, 32), radius=4)[0], steps=200, backend="numpy").summary["errors"]["u"]
    assert single < 1e-3 < increment < 10 * 2.0**-11 < leapfrog  # float16's rounding, not the scheme, sets the error
    assert increment < leapfrog / 2
    assert wave3d.problem((8, 8, 8), radius=2, storage="float32")[1].get("storage") is None  # the grid's own dtype: leapfrog


def test_the_tutorials_increment_form_runs_as_written(capsys):
    """docs/tutorial.md's float16 wave is a whole program: it runs as printed, at float16's error."""
    text = (Path(__file__).parents[1] / "docs" / "tutorial.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if 'storage="float16"' in b)
    exec(compile(block, "docs/tutorial.md", "exec"), {})
    error = float(re.search(r"'u': ([0-9.e-]+)", capsys.readouterr().out).group(1))
    assert 1e-3 < error < 10 * 2.0**-11


def test_half_wave_source_moves_u_and_its_increment_alike():
    """A Ricker source adds to u and to d = u - u.prev, so the float16 run follows the float32 leapfrog."""
    half, _ = wave3d.problem((24, 24, 24), radius=2, storage="float16", source=True)
    assert sorted(s.field.name for s in half.sources) == ["d", "u"]
    got = sf.run(half, steps=40, backend="numpy").fields["u"].astype(np.float64)
    want = sf.run(wave3d.problem((24, 24, 24), radius=2, source=True)[0], steps=40, backend="numpy").fields["u"]
    peak = float(np.abs(want).max())
    assert peak > 0.05
    assert float(np.abs(got - want).max()) < 0.02 * peak


def test_verify_reports_float16_errors_against_float32_and_the_exact_solution():
    from stencilforge.verification import StorageCheck, storage_checks
    from test_cli import invoke as cli

    checks = list(storage_checks(NumpyBackend(), "float16", quick=True))
    assert [c.name.split()[0] for c in checks] == ["heat2d", "heat3d", "wave3d"]
    for c in checks:
        assert c.passed and 0 < c.difference <= c.bound
        assert c.wide_error < 1e-3 and c.narrow_error > c.wide_error  # float16's rounding shows in the error
    assert not StorageCheck("x", "float16", 10, 1e-5, 1e-2, 0.2, 0.1).passed  # past the rounding bound
    assert not StorageCheck("x", "float16", 10, 1e-5, float("nan"), 0.0, 0.1).passed  # blew up
    r = cli("verify", "--storage", "float16", "--quick", "--backend", "numpy")
    assert r.exit_code == 0 and "heat3d" in r.output and "wave3d r4" in r.output and "FAIL" not in r.output
    for args, message in ((("--storage", "int8"), "float16 is the storage narrower"),
                          (("--storage", "float16", "examples/heat9.py"), "give no problem files"),
                          (("--storage", "float16", "--backend", "numba"), "not numba")):
        r = cli("verify", "--quick", *args)
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
