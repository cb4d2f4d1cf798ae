"""sf.Solve: a multigrid solve inside the step, against SciPy's sparse direct solve of the same 5-point system."""

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sparse
import scipy.sparse.linalg as splinalg

import stencilforge as sf
from stencilforge.backends import get_backend
from stencilforge.convergence import load_problem_file
from stencilforge.simulation import Simulation

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SHAPE = (40, 36)  # 1440 unknowns: multigrid coarsens (the coarsest level holds at most 512)
KINDS = {"dirichlet": sf.Dirichlet, "neumann": sf.Neumann, "periodic": sf.Periodic}


def second_difference(n: int, h: float, wall: str):
    """d^2/dx^2 on n points with the walls' ghost cells: Dirichlet ghosts moved to the right-hand side,
    Neumann's mirror (ghost = first point), periodic's wrap."""
    main = np.full(n, -2.0)
    if wall == "neumann":
        main[0] = main[-1] = -1.0
    mat = sparse.diags([np.ones(n - 1), main, np.ones(n - 1)], [-1, 0, 1], format="lil")
    if wall == "periodic":
        mat[0, n - 1] = mat[n - 1, 0] = 1.0
    return mat.tocsr() / (h * h)


def laplacian_matrix(grid, walls):
    (n0, n1), (h0, h1) = grid.shape, grid.spacing
    return (sparse.kron(second_difference(n0, h0, walls[0]), sparse.identity(n1))
            + sparse.kron(sparse.identity(n0), second_difference(n1, h1, walls[1]))).tocsc()


def coordinates(grid):
    y, x = (o + np.arange(n) * h for o, n, h in zip(grid.origin, grid.shape, grid.spacing))
    return y[:, None], x[None, :]


def reference(grid, walls, rhs, wall_value, a=0.0, b=-1.0):
    """(a - b lap) u = rhs with SciPy: Dirichlet ghosts (wall_value at the ghost points) moved to the right-hand side;
    with no Dirichlet wall and a = 0 the mean of rhs removed and the zero-mean solution returned."""
    (n0, n1), (h0, h1) = grid.shape, grid.spacing
    y, x = coordinates(grid)
    f = np.array(rhs(y, x) * np.ones(grid.shape), dtype=np.float64)
    if walls[0] == "dirichlet":
        f[0, :] += b * wall_value(y[0] - h0, x)[0] / h0 ** 2
        f[-1, :] += b * wall_value(y[-1] + h0, x)[0] / h0 ** 2
    if walls[1] == "dirichlet":
        f[:, 0] += b * wall_value(y, x[:, 0] - h1)[:, 0] / h1 ** 2
        f[:, -1] += b * wall_value(y, x[:, -1] + h1)[:, 0] / h1 ** 2
    mat = a * sparse.identity(n0 * n1) - b * laplacian_matrix(grid, walls)
    singular = a == 0 and "dirichlet" not in walls
    if singular:
        f -= f.mean()
        bordered = sparse.bmat([[mat, np.ones((n0 * n1, 1))], [np.ones((1, n0 * n1)), None]]).tocsc()
        u = splinalg.spsolve(bordered, np.append(f.ravel(), 0.0))[:-1]
    else:
        u = splinalg.spsolve(mat.tocsc(), f.ravel())
    return u.reshape(grid.shape), mat, f


def rhs_of(y, x):
    return np.sin(3 * x) * np.cos(2 * y) + x * y


def walls_of(y, x):
    return 1 + x - 0.5 * y ** 2


def poisson_problem(walls, tol=1e-11, a=0.0, b=-1.0, steps=1):
    grid = sf.Grid(SHAPE, extent=(1.0, 1.3))
    p, q = sf.Field("p", grid, levels=1), sf.Field("q", grid)
    y, x = grid.y, grid.x
    wall = 1 + x - 0.5 * y ** 2
    conds = tuple(sf.Dirichlet(wall) if w == "dirichlet" else KINDS[w]() for w in walls)
    eqs = [sf.Solve(p, sf.sin(3 * x) * sf.cos(2 * y) + x * y, a=a, b=b, tol=tol), sf.Eq(q.next, q + p)]
    return sf.Problem(eqs, boundary={p: conds}, steps=steps), grid


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("walls", [("dirichlet", "dirichlet"), ("neumann", "neumann"), ("periodic", "periodic"),
                                   ("periodic", "dirichlet"), ("neumann", "periodic")])
def test_poisson_matches_scipy(backend, walls):
    problem, grid = poisson_problem(walls)
    result = sf.run(problem, backend=backend)
    want, mat, f = reference(grid, walls, rhs_of, walls_of)
    got = result.fields["p"]
    assert np.max(np.abs(got - want)) <= 1e-8 * np.max(np.abs(want))
    assert np.linalg.norm(f.ravel() - mat @ got.ravel()) <= 1e-11 * np.linalg.norm(f)
    if "dirichlet" not in walls:
        assert abs(got.mean()) <= 1e-12 * np.max(np.abs(got))
    assert np.array_equal(result.fields["q"], got)  # the equation after the solve reads what it solved
    assert result.summary["solves"]["p"]["walls"] == list(walls)


@pytest.mark.parametrize("walls", [("dirichlet", "dirichlet"), ("neumann", "periodic")])
def test_screened_matches_scipy(walls):
    """a u - b lap u = rhs, the backward-Euler form: no null space even without a Dirichlet wall."""
    problem, grid = poisson_problem(walls, a=1.0, b=0.01)
    got = sf.run(problem, backend="numba").fields["p"]
    want, _, _ = reference(grid, walls, rhs_of, walls_of, a=1.0, b=0.01)
    assert np.max(np.abs(got - want)) <= 1e-8 * np.max(np.abs(want))


@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-10])
def test_the_tolerance_is_honoured(tol):
    walls = ("dirichlet", "neumann")
    problem, grid = poisson_problem(walls, tol=tol)
    result = sf.run(problem, backend="numpy")
    _, mat, f = reference(grid, walls, rhs_of, walls_of)
    residual = np.linalg.norm(f.ravel() - mat @ result.fields["p"].ravel()) / np.linalg.norm(f)
    solves = result.summary["solves"]["p"]
    assert residual < tol and solves["largest_residual"] == pytest.approx(residual, rel=1e-6)
    assert residual > tol / 1e4  # it stopped near tol, not at the rounding floor: fewer cycles for a looser tol
    assert solves["cycles"] <= {1e-3: 2, 1e-6: 4, 1e-10: 8}[tol]


def test_warm_start_from_the_previous_step():
    """The right-hand side does not change, so after the first step's cycles the next steps need none."""
    problem, _ = poisson_problem(("dirichlet", "dirichlet"), tol=1e-9, steps=3)
    one = sf.run(problem, steps=1, backend="numpy").summary["solves"]["p"]
    three = sf.run(problem, steps=3, backend="numpy").summary["solves"]["p"]
    assert one["cycles"] >= 3 and three["cycles"] == one["cycles"] and three["solves"] == 3


def test_a_time_dependent_right_hand_side_is_solved_each_step():
    """Each step solves with its own right-hand side (t: the start of the step, as in equations) and its walls at t + dt,
    the time of the value it computes: the second step's solve gives the solution at t = 1."""
    grid = sf.Grid(SHAPE, extent=(1.0, 1.3))
    p = sf.Field("p", grid, levels=1)
    y, x, t = grid.y, grid.x, grid.t
    dt = 0.5
    exact = (1 + t) * sf.sin(np.pi * x) * sf.cos(y)
    rhs = -(np.pi ** 2 + 1) * (1 + t + dt) * sf.sin(np.pi * x) * sf.cos(y)
    problem = sf.Problem([sf.Solve(p, rhs, tol=1e-10)], boundary={p: sf.Dirichlet(exact)}, dt=dt, steps=2)
    got = sf.run(problem, backend="numpy").fields["p"]
    ys, xs = coordinates(grid)
    shape = np.sin(np.pi * xs) * np.cos(ys)
    assert np.max(np.abs(got - 2.0 * shape)) < 2e-3  # the 5-point Laplacian's error
    assert np.max(np.abs(got - 1.5 * shape)) > 0.4


def test_a_checkpoint_resumes_bit_for_bit():
    """A solve's state is its field: a run continued from a saved state repeats the whole run's bits (the warm start too)."""
    problem = load_problem_file(EXAMPLES / "taylor_green.py").build((24, 24))
    whole = Simulation(problem, get_backend("numpy"))
    whole.step(4)
    first = Simulation(problem, get_backend("numpy"))
    first.step(2)
    second = Simulation(problem, get_backend("numpy"))
    second.load(2, {name: np.array(arr) for name, arr in first.state().items()})
    second.step(2)
    for name, arr in whole.fields.items():
        assert np.array_equal(second.fields[name], arr), name


def test_the_step_splits_around_the_solve():
    grid = sf.Grid((8, 8), extent=1.0)
    u, us, p = sf.Field("u", grid), sf.Field("us", grid, levels=1), sf.Field("p", grid, levels=1)
    problem = sf.Problem([sf.Eq(us, u + 1), sf.Solve(p, sf.laplacian(us)), sf.Eq(u.next, us + sf.d(p, "x"))],
                         boundary={u: sf.Periodic(), us: sf.Periodic(), p: sf.Neumann()})
    an = problem.analysis
    assert [type(s).__name__ for s in an.stages] == ["Pass", "SolveStage", "Pass"]
    assert an.solves[0].halo == (("us", 0),) and an.solves[0].writes == (("p", 0),)
    assert an.written == ("us", "p", "u") and len(an.passes) == 2


def _one_line(build, message):
    with pytest.raises(sf.StencilforgeError, match=message) as info:
        build()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("make, message", [
    (lambda g, p, q: sf.Problem([sf.Solve(p, 1.0)]), "solve for p: give p a boundary condition"),
    (lambda g, p, q: sf.Problem([sf.Solve(p, 1.0), sf.Eq(p, q)], boundary={p: sf.Neumann()}), "field p is written by two"),
    (lambda g, p, q: sf.Problem([sf.Solve(q.next, q.next)], boundary={q: sf.Neumann()}), "solve for q.next reads q.next before"),
    (lambda g, p, q: sf.Problem([sf.Solve(p, 1.0, a=g.x)], boundary={p: sf.Neumann()}), "a must be a number or an expression of"),
    (lambda g, p, q: sf.Problem([sf.Solve(q.next, q, k=q)], boundary={q: sf.Neumann()}), "k is fixed for the run"),
    (lambda g, p, q: sf.Solve(p, 1.0, tol=0), "tol must be a number between 0 and 1"),
    (lambda g, p, q: sf.Solve(p, 1.0, max_cycles=0), "max_cycles must be a positive integer"),
    (lambda g, p, q: sf.Solve(p[1, 0], 1.0), "at offset 0"),
    (lambda g, p, q: sf.Problem([sf.Solve(sf.Field("w", sf.Grid(8, extent=1.0), levels=1), 1.0)]), "multigrid needs a 2D or 3D grid"),
])
def test_mistakes_are_refused_in_one_line(make, message):
    grid = sf.Grid((8, 8), extent=1.0)
    _one_line(lambda: make(grid, sf.Field("p", grid, levels=1), sf.Field("q", grid)), message)


@pytest.mark.parametrize("a, b, message", [(0.0, 0.0, "b = 0 leaves"), (1.0, -1.0, "makes an indefinite operator")])
def test_operators_multigrid_cannot_solve_are_refused(a, b, message):
    problem, _ = poisson_problem(("dirichlet", "dirichlet"), a=a, b=b)
    _one_line(lambda: sf.run(problem, backend="numpy"), message)
