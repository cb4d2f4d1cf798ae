"""sf.Iterate: a fixed number of inner iterations of some of a step's equations, each pass compiled once.

The reference is the "12 steps to Navier-Stokes" course's cavity (step 11) written out in plain NumPy as the
course teaches it, sharing nothing with the IR; examples/cavity_jacobi.py writes the same step as equations.
"""

from __future__ import annotations

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.numba import NumbaBackend
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.convergence import load_problem_file
from stencilforge.fingerprint import canonical, difference
from stencilforge.simulation import Simulation
from test_examples import EXAMPLES, NAMES

cavity_jacobi = load_problem_file(EXAMPLES[NAMES.index("cavity_jacobi")])


# ---------------------------------------------------------------- the course's code, as taught (41 x 41 nodes)

def build_up_b(b, rho, dt, u, v, dx, dy):
    b[1:-1, 1:-1] = (rho * (1 / dt *
                            ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx) +
                             (v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy)) -
                            ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx))**2 -
                            2 * ((u[2:, 1:-1] - u[0:-2, 1:-1]) / (2 * dy) *
                                 (v[1:-1, 2:] - v[1:-1, 0:-2]) / (2 * dx)) -
                            ((v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy))**2))
    return b


def pressure_poisson(p, dx, dy, b, nit):
    for _ in range(nit):
        pn = p.copy()
        p[1:-1, 1:-1] = (((pn[1:-1, 2:] + pn[1:-1, 0:-2]) * dy**2 +
                          (pn[2:, 1:-1] + pn[0:-2, 1:-1]) * dx**2) /
                         (2 * (dx**2 + dy**2)) -
                         dx**2 * dy**2 / (2 * (dx**2 + dy**2)) *
                         b[1:-1, 1:-1])
        p[:, -1] = p[:, -2]  # dp/dx = 0 at x = 2
        p[0, :] = p[1, :]  # dp/dy = 0 at y = 0
        p[:, 0] = p[:, 1]  # dp/dx = 0 at x = 0
        p[-1, :] = 0  # p = 0 at y = 2
    return p


def cavity_flow(nt, nit, nx=41, ny=41):
    dx, dy = 2 / (nx - 1), 2 / (ny - 1)
    rho, nu, dt = 1, 0.1, 0.001
    u, v, p, b = (np.zeros((ny, nx)) for _ in range(4))
    for _ in range(nt):
        un, vn = u.copy(), v.copy()
        b = build_up_b(b, rho, dt, u, v, dx, dy)
        p = pressure_poisson(p, dx, dy, b, nit)
        u[1:-1, 1:-1] = (un[1:-1, 1:-1] -
                         un[1:-1, 1:-1] * dt / dx *
                         (un[1:-1, 1:-1] - un[1:-1, 0:-2]) -
                         vn[1:-1, 1:-1] * dt / dy *
                         (un[1:-1, 1:-1] - un[0:-2, 1:-1]) -
                         dt / (2 * rho * dx) * (p[1:-1, 2:] - p[1:-1, 0:-2]) +
                         nu * (dt / dx**2 *
                               (un[1:-1, 2:] - 2 * un[1:-1, 1:-1] + un[1:-1, 0:-2]) +
                               dt / dy**2 *
                               (un[2:, 1:-1] - 2 * un[1:-1, 1:-1] + un[0:-2, 1:-1])))
        v[1:-1, 1:-1] = (vn[1:-1, 1:-1] -
                         un[1:-1, 1:-1] * dt / dx *
                         (vn[1:-1, 1:-1] - vn[1:-1, 0:-2]) -
                         vn[1:-1, 1:-1] * dt / dy *
                         (vn[1:-1, 1:-1] - vn[0:-2, 1:-1]) -
                         dt / (2 * rho * dy) * (p[2:, 1:-1] - p[0:-2, 1:-1]) +
                         nu * (dt / dx**2 *
                               (vn[1:-1, 2:] - 2 * vn[1:-1, 1:-1] + vn[1:-1, 0:-2]) +
                               dt / dy**2 *
                               (vn[2:, 1:-1] - 2 * vn[1:-1, 1:-1] + vn[0:-2, 1:-1])))
        u[0, :] = 0
        u[:, 0] = 0
        u[:, -1] = 0
        u[-1, :] = 1  # the lid
        v[0, :] = 0
        v[-1, :] = 0
        v[:, 0] = 0
        v[:, -1] = 0
    return {"u": u, "v": v, "p": p, "b": b}


# ---------------------------------------------------------------- the same fields

@pytest.mark.usefixtures("passes_compiled_first")
@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("nt, nit", [(3, 50), (6, 50), (4, 7)])
def test_cavity_is_the_courses_bit_for_bit(backend, nt, nit):
    """The course's arrays start at zero, the lid too, so its first step only sets the walls: its nt steps are the
    example's nt - 1 (whose walls hold from the start). Every pass of the step rounds as NumPy does on numba too
    (`rounds_as_oracle`), so both backends give the course's bits, p's last iterate included."""
    ref = cavity_flow(nt, nit)
    got = sf.run(cavity_jacobi.build(nit=nit), steps=nt - 1, backend=backend).fields
    assert np.abs(ref["p"]).max() > 0.1 and np.abs(ref["v"]).max() > 1e-3
    for name, arr in ref.items():
        assert np.array_equal(np.asarray(got[name]), arr[1:-1, 1:-1]), name


def jacobi(n: int | None, shape=(10, 12)) -> sf.Problem:
    """u.next = the mean of u's neighbours minus a source, with static walls: `n` iterations in one step, or a plain
    step (None). Linear, so numba runs the pass as its sweep kernel."""
    grid = sf.Grid(shape, extent=1.0)
    u = sf.Field("u", grid)
    eq = sf.Eq(u.next, 0.25 * (u[0, 1] + u[0, -1] + u[1, 0] + u[-1, 0]) - 0.001 * sf.Field("f", grid, levels=1))
    return sf.Problem([eq] if n is None else [sf.Iterate(n, [eq])], initial={"u": grid.x * grid.y, "f": sf.sin(5 * grid.x)},
                      boundary={u: (sf.Dirichlet(1.0), (sf.Neumann(), sf.Dirichlet(0.5)))}, name="jacobi")


@pytest.mark.usefixtures("passes_compiled_first")
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_n_iterations_in_a_step_are_n_steps_of_the_same_equation(backend):
    """With walls that do not change in time an iteration is a step: 3 steps of 5 iterations give 15 steps' bits.
    Such a step is never fused into several steps a pass (`build_fused`), though its pass runs as a sweep."""
    iterated = jacobi(5)
    got = sf.run(iterated, steps=3, backend=backend)
    want = sf.run(jacobi(None), steps=15, backend=backend)
    assert got.summary["steps"] == 3 and got.summary["passes_per_step"] == 5
    assert np.array_equal(np.asarray(got.fields["u"]), np.asarray(want.fields["u"]))
    sim = Simulation(iterated, get_backend(backend))
    assert sim.sweeps and sim.build_fused() == "a step runs sf.Iterate's passes several times" and sim.fused is None


def get_backend(name: str):
    return {"numpy": NumpyBackend, "numba": NumbaBackend}[name]()


class CountingNumba(NumbaBackend):
    """Numba, counting the generated passes it builds (what it compiles)."""

    def __init__(self):
        super().__init__()
        self.built: list = []

    def equation_pass(self, p, *args, **kwargs):
        self.built.append(p)
        return super().equation_pass(p, *args, **kwargs)


def test_passes_are_compiled_once_however_many_iterations():
    """The step's three passes (b, p.next, u.next and v.next) are built once each, for 1 or 50 iterations; the
    pressure pass is launched once per iteration."""
    for nit in (1, 50):
        backend = CountingNumba()
        sim = Simulation(cavity_jacobi.build(nit=nit), backend)
        assert len(backend.built) == len(sim.passes) == 3, nit
        assert [eq.label for eq in backend.built[1].equations] == ["p.next"]
        assert sim.passes_per_step == 2 + nit
        sim.step(2)
        assert len(backend.built) == 3


def nonlinear(n: int, walls, shape=(9, 11)) -> sf.Problem:
    """A generated pass (a cube term) iterated n times, with the walls given, a source read beside it."""
    grid = sf.Grid(shape, extent=1.0)
    u, f = sf.Field("u", grid), sf.Field("f", grid, levels=1)
    eq = sf.Eq(u.next, u + 0.2 * sf.laplacian(u) * grid.spacing[0] ** 2 - 0.1 * u ** 3 + 0.01 * f[0, 1])
    rng = np.random.default_rng(n)
    return sf.Problem([sf.Iterate(n, [eq])], initial={"u": rng.random(shape), "f": rng.random(shape)},
                      boundary={u: walls, f: sf.Neumann()}, name="nonlinear")


@pytest.mark.usefixtures("passes_compiled_first")
@pytest.mark.parametrize("n", [1, 2, 3, 8])
@pytest.mark.parametrize("walls", [sf.Neumann(), (sf.Periodic(), (sf.Neumann(), sf.Dirichlet(0.5))),
                                   ((sf.Neumann(), sf.Dirichlet(0.0)), sf.Periodic())], ids=["neumann", "periodic-x", "periodic-y"])
def test_compiled_iterations_give_the_bits_of_a_call_a_run(n, walls):
    """On numba an iterated generated pass whose walls between runs are copies runs as one compiled call a step
    (`Backend.iterated_pass`): the same bits, ghost cells and both levels included, as a call per run in Python,
    for odd and even counts (the last iterate left where the loop's swaps leave it)."""
    problem = nonlinear(n, walls)
    compiled, python = (Simulation(problem, NumbaBackend()) for _ in range(2))
    assert compiled._iterated[0] is not None and compiled._iterated[0].ready()
    python._iterated = [None]
    for sim in (compiled, python):
        sim.step(3)
    for name in ("u", "f"):
        for a, b in zip(compiled.levels[name], python.levels[name]):
            assert np.array_equal(a, b, equal_nan=True), name
    assert np.abs(compiled.levels["u"][-1]).max() > 0


def test_iterations_run_a_call_a_run_where_walls_are_not_copies():
    """Walls that change in time between runs, a sweep, the numpy backend: no compiled loop. The cavity's
    pressure loop (Neumann walls, and a static Dirichlet one) is one."""
    grid = sf.Grid((8, 8), extent=1.0)
    u = sf.Field("u", grid)
    moving = sf.Problem([sf.Iterate(3, [sf.Eq(u.next, u + 0.1 * sf.laplacian(u) * grid.spacing[0] ** 2 - 0.1 * u ** 3)])],
                        initial={"u": grid.x}, boundary={u: sf.Dirichlet(lambda x, y, t: x + t, time_dependent=True)})
    assert Simulation(moving, NumbaBackend())._iterated == [None]
    assert Simulation(jacobi(4), NumbaBackend())._iterated == [None]
    assert Simulation(nonlinear(3, sf.Neumann()), NumpyBackend())._iterated == [None]
    assert [it is not None for it in Simulation(cavity_jacobi.build(nit=4), NumbaBackend())._iterated] == [False, True, False]


def test_the_example_runs_from_the_command_line():
    """`stencilforge run examples/cavity_jacobi.py` reports the launches of a step: b, 50 pressure passes, u and v."""
    import json

    from typer.testing import CliRunner

    from stencilforge.cli import app

    path = str(EXAMPLES[NAMES.index("cavity_jacobi")])
    result = CliRunner().invoke(app, ["run", path, "--backend", "numpy", "--steps", "3", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["passes_per_step"] == 52 and summary["steps"] == 3 and summary["params"] == {"nu": 0.1, "rho": 1.0}


def test_the_count_is_in_the_equations_a_checkpoint_records():
    """A resume with another count of iterations is refused, naming it (`fingerprint.canonical`)."""
    fifty, twenty = canonical(cavity_jacobi.build()), canonical(cavity_jacobi.build(nit=20))
    assert "iterate p.next: 50 times" in fifty.splitlines()
    assert difference(fifty, twenty) == "iterate p.next was '50 times', here it is '20 times'"


# ---------------------------------------------------------------- refusals

GRID = sf.Grid((8, 8), extent=1.0)
P, Q, W = sf.Field("p", GRID), sf.Field("q", GRID), sf.Field("w", GRID, levels=3)
R = sf.Field("r", GRID, levels=1)
JACOBI = sf.Eq(P.next, 0.25 * (P[0, 1] + P[0, -1] + P[1, 0] + P[-1, 0]))


@pytest.mark.parametrize("make, message", [
    (lambda: sf.Iterate(0, [JACOBI]), "positive integer count of iterations, got 0"),
    (lambda: sf.Iterate(2.5, [JACOBI]), "positive integer count of iterations, got 2.5"),
    (lambda: sf.Iterate(True, [JACOBI]), "positive integer count of iterations, got True"),
    (lambda: sf.Iterate(3, []), "needs at least one equation to iterate"),
    (lambda: sf.Iterate(3, JACOBI), r"sf.Iterate\(n, \[equations\]\) takes a list of equations"),
    (lambda: sf.Iterate(3, [sf.Iterate(2, [JACOBI])]), "sf.Iterate inside sf.Iterate is not supported"),
    (lambda: sf.Iterate(3, [sf.Solve(R, P)]), "the solve for r goes outside it"),
    (lambda: sf.Iterate(3, ["p = 1"]), "repeats sf.Eq"),
    (lambda: sf.Problem([sf.Iterate(3, [JACOBI]), sf.Eq(Q.next, Q + P)], boundary={P: sf.Neumann()}),
     "equation for q.next reads p after sf.Iterate computed it: read p.next, its last iterate"),
    (lambda: sf.Problem([sf.Iterate(3, [JACOBI]), sf.Iterate(2, [sf.Eq(Q.next, P + Q)])], boundary={P: sf.Neumann()}),
     "equation for q.next reads p after sf.Iterate computed it"),
    (lambda: sf.Problem([sf.Eq(R, P), sf.Iterate(3, [sf.Eq(R, 2 * R), JACOBI])], boundary={P: sf.Neumann()}),
     "field r is written inside sf.Iterate and outside it"),
    (lambda: sf.Problem([sf.Iterate(3, [sf.Eq(W.next, W + W.prev)])]), "w keeps three time levels"),
    (lambda: sf.Problem([sf.Iterate(3, [sf.Eq(Q.next, P.next), JACOBI])], boundary={P: sf.Neumann()}),
     "reads p.next before an equation of the step computes it"),
    (lambda: sf.Problem([sf.Iterate(3, [JACOBI])]), "field p is read at neighbouring cells: give it a boundary condition"),
    (lambda: sf.Problem([sf.Iterate(3, [sf.Eq(R, R + 1), sf.Eq(P.next, R[0, 1])])]), "reads r at a neighbouring cell"),
])
def test_what_cannot_iterate_is_refused_in_one_line(make, message):
    with pytest.raises(sf.StencilforgeError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


def test_the_last_iterate_and_earlier_reads_are_allowed():
    """Before the group p is the step's start value; after it p.next is the last iterate; a one-level field the
    group overwrites in place is read after it as its last value."""
    s = sf.Field("s", GRID, levels=1)
    problem = sf.Problem([sf.Eq(Q.next, Q + P[0, 1]), sf.Iterate(3, [sf.Eq(R, P + 1), JACOBI]), sf.Eq(s, R + P.next[1, 0])],
                         boundary={P: sf.Neumann()})
    an = problem.analysis
    assert [loop.count for loop in an.loops] == [3] and an.loops[0].rotated == ("p",)
    assert [[eq.label for eq in s.equations] for s in an.stages] == [["q.next"], ["r", "p.next"], ["s"]]
    assert repr(problem).startswith("Problem('problem': q.next, 3 x (r, p.next), s on")
