"""The examples are the API's templates: each must build, run the same on numpy and numba,
and converge at its stated order (the cavity, with no exact solution, matches published data)."""

from pathlib import Path

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.convergence import load_problem_file, observed_order
from stencilforge.printers.numba import rounds_as_oracle

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))
NAMES = ["advection_diffusion", "allen_cahn3d", "cavity", "cavity_jacobi", "cavity_staggered", "channel", "crank_nicolson",
         "gray_scott", "heat9",
         "implicit_heat", "taylor_green", "variable_diffusion", "wave2d_sponge"]
CONVERGING = [p for p in EXAMPLES if hasattr(load_problem_file(p), "ORDER")]  # those with an exact solution


def example(name):
    return load_problem_file(EXAMPLES[NAMES.index(name)])


def test_every_example_is_here():
    assert [p.stem for p in EXAMPLES] == NAMES


@pytest.mark.usefixtures("passes_compiled_first")
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_numpy_and_numba_agree(path):
    problem = load_problem_file(path).build()
    initial = sf.run(problem, steps=0, backend="numpy").fields
    ref = sf.run(problem, steps=3, backend="numpy").fields
    got = sf.run(problem, steps=3, backend="numba").fields
    assert any(not np.array_equal(ref[name], initial[name]) for name in ref), "three steps changed nothing"
    # bitwise: heat9's step also lowers on both; multigrid's numba kernels round unlike NumPy's (to 1e-15 here)
    exact = all(rounds_as_oracle(p) for p in problem.analysis.passes) and not problem.analysis.solves
    for name, a in ref.items():
        assert np.isfinite(a).all()
        assert np.max(np.abs(got[name] - a)) <= (0 if exact else 1e-12 * np.max(np.abs(a))), name


@pytest.mark.parametrize("path", CONVERGING, ids=lambda p: p.stem)
def test_observed_order(path):
    m = load_problem_file(path)
    build = getattr(m, "build_manufactured", m.build)
    slope, hs, errors = observed_order(build, m.SHAPES, m.T_END)
    assert len(errors) == len(m.SHAPES) and hs == sorted(hs, reverse=True)
    assert abs(slope - m.ORDER) <= 0.1, (slope, errors)


def test_every_example_but_the_flows_has_an_order():
    flows = ("cavity", "cavity_jacobi", "cavity_staggered", "channel")
    assert sorted(set(EXAMPLES) - set(CONVERGING)) == [EXAMPLES[NAMES.index(name)] for name in flows]


def test_channel_flow_keeps_poiseuille_and_reaches_it_at_the_slowest_modes_rate():
    """Plane Poiseuille flow is a fixed point of the discrete step (the centred second difference of a parabola is
    exact), to rounding; from rest the gap to it after T is the slowest mode's, exp(-pi^2 nu T) times that mode's
    share of the parabola (8 / pi^3 over its height 1/4); from a start that is not divergence-free the solves work
    (a cycle a step) and the flow still settles on the profile."""
    channel = example("channel")
    kept = sf.run(channel.build(start="steady"), steps=50, backend="numpy")
    assert channel.profile_error(kept.fields["u"]) < 1e-13 and np.abs(kept.fields["v"]).max() < 1e-13
    rest = sf.run(channel.build(), backend="numpy")
    slowest = 32 / np.pi**3 * np.exp(-np.pi**2 * channel.NU * rest.summary["t"])
    assert channel.profile_error(rest.fields["u"]) == pytest.approx(slowest, rel=0.03)
    perturbed = sf.run(channel.build(start="perturbed"), backend="numpy", steps=400)
    assert perturbed.summary["solves"]["p"]["cycles"] >= 400 and channel.profile_error(perturbed.fields["u"]) < 1e-3


def test_cavity_matches_ghia():
    """u(y) and v(x) on the centre lines at Re = 100, 33 x 33 nodes, steady (t = 12), against Ghia, Ghia & Shin (1982)
    Tables I and II, interpolated linearly between nodes. Measured for u: 0.040 at most (y = 0.4531, near the minimum:
    the scheme's u_min is -0.173 where Ghia's is -0.211), 0.011 at 65 x 65 nodes: second order, so the gap is the
    grid's error; 0.05 allows a quarter more. For v: 0.053 (0.065 allows a quarter more). Without the pressure solve
    (u_next = u*) the gap in u is 0.29."""
    cavity = example("cavity")
    problem = cavity.build((31, 31))
    result = sf.run(problem, backend="numba", threads=1)
    y, u = cavity.centre_line(result.fields["u"])
    gap_u, gap_v = cavity.ghia_gaps(result.fields["u"], result.fields["v"])
    assert gap_u.max() < 0.05 and gap_v.max() < 0.065, (gap_u, gap_v)
    assert u.min() == pytest.approx(-0.211, abs=0.05) and 0.4 < y[np.argmin(u)] < 0.5
    solves = result.summary["solves"]["p"]
    assert solves["solves"] == problem.default_steps and solves["cycles_per_solve"] < 4  # warm starts
    after = sf.run(problem, backend="numba", threads=1, steps=problem.default_steps + 50).fields["u"]
    assert np.max(np.abs(after - result.fields["u"])) < 1e-3  # steady


def test_staggered_cavity_matches_ghia():
    """The staggered (MAC) cavity at Re = 100 on 32 x 32 cells, steady (t = 12), against Ghia's Tables I and II.
    Measured: u 0.0067 and v 0.0043 at most, where the collocated scheme on the same grid (33 x 33 nodes) is 0.040
    and 0.053 off; 0.01 allows half as much again. Its divergence after the projection is zero to the solve's
    tolerance, computed here in NumPy from the faces' fluxes (the walls' fluxes are zero)."""
    cavity = example("cavity_staggered")
    problem = cavity.build((32, 32))
    result = sf.run(problem, backend="numba", threads=1)
    u, v = result.fields["u"], result.fields["v"]
    gap_u, gap_v = cavity.ghia_gaps(u, v)
    assert gap_u.max() < 0.01 and gap_v.max() < 0.01, (gap_u, gap_v)
    assert np.all(u[:, -1] == 0) and np.all(v[-1] == 0)  # the east wall's and the lid's faces
    flux_x, flux_y = np.diff(u, axis=1, prepend=0.0), np.diff(v, axis=0, prepend=0.0)
    assert np.abs(flux_x + flux_y).max() < 1e-7 * np.abs(u).max()
    assert result.summary["solves"]["p"]["missed"] == 0
    with pytest.raises(ValueError, match="even number of cells"):
        cavity.centre_line(np.zeros((31, 31)))


def test_a_time_between_steps_is_refused():
    heat = example("heat9")
    with pytest.raises(sf.StencilforgeError, match="not a whole number of steps"):
        observed_order(heat, heat.SHAPES, heat.T_END * 1.01)


def test_one_field_can_be_chosen():
    gray_scott = example("gray_scott")
    _, _, both = observed_order(gray_scott.build_manufactured, gray_scott.SHAPES[:2], gray_scott.T_END)
    _, _, v = observed_order(gray_scott.build_manufactured, gray_scott.SHAPES[:2], gray_scott.T_END, field="v")
    assert all(b >= e for b, e in zip(both, v))
    with pytest.raises(sf.StencilforgeError, match="no exact solution for 'w'"):
        observed_order(gray_scott.build_manufactured, gray_scott.SHAPES[:2], gray_scott.T_END, field="w")


def test_a_problem_without_an_exact_solution_is_refused():
    gray_scott = example("gray_scott")
    with pytest.raises(sf.StencilforgeError, match="no exact solution"):
        observed_order(gray_scott, [(16, 16), (32, 32)], 1.0)


@pytest.mark.parametrize(
    "text, message",
    [
        (None, "does not exist"),
        ("def build(:\n", r"mine\.py:1: SyntaxError: "),
        ("ORDER = 2\n", "defines no build"),
    ],
)
def test_problem_file_errors_are_one_line(tmp_path, text, message):
    path = tmp_path / "mine.py"
    if text is not None:
        path.write_text(text)
    with pytest.raises(sf.StencilforgeError, match=message) as info:
        load_problem_file(path)
    assert "\n" not in str(info.value)


def test_hoisted_terms_reach_the_kernel_in_the_arrays_it_was_compiled_for():
    """advection_diffusion's velocity and forcing are hoisted out of numba's kernel (`printers.numba.hoisted`); their
    arrays are typed as the compile's (writable: Numba types a read-only one apart), so a run compiles the pass once."""
    from stencilforge.backends.numba.backend import NumbaBackend, load_kernel
    from stencilforge.printers.numba import hoisted, pass_source
    from stencilforge.simulation import Simulation

    problem = example("advection_diffusion").build(shape=(24, 20))
    (p,) = problem.analysis.passes
    assert len(hoisted(p)) > 1
    sim = Simulation(problem, NumbaBackend())
    sim.step(2)
    kernel = load_kernel(pass_source(p, 2, sim.lattice.dtype, problem.constants, sim.lattice.cells)[0])
    assert len(kernel.signatures) == 1, kernel.signatures


def test_threads_are_honoured_and_reported_for_a_problem_file():
    """--threads reaches a problem file's numba run and its summary (it was ignored, and reported as null);
    Numba's own count comes back after the run; another backend refuses it."""
    import json

    import numba
    from typer.testing import CliRunner

    from stencilforge.cli import app

    before = numba.get_num_threads()
    path = str(EXAMPLES[NAMES.index("heat9")])
    args = ["run", path, "--backend", "numba", "--shape", "16,16", "--steps", "3", "--json"]
    result = CliRunner().invoke(app, [*args, "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["threads"] == 1 and numba.get_num_threads() == before
    assert sf.run(example("heat9").build((16, 16)), steps=3, backend="numba", threads=1).summary["threads"] == 1
    refused = CliRunner().invoke(app, ["run", path, "--backend", "numpy", "--steps", "3", "--threads", "1"])
    assert refused.exit_code == 2 and "threads apply to the numba backend, not numpy" in refused.output
