"""Multigrid Poisson solver: against a sparse direct solve, per-cycle factors, FMG, orders, precision, CG, bad input."""

import json

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve
from typer.testing import CliRunner

from stencilforge import StencilforgeError, poisson, problems
from stencilforge.backends import get_backend
from stencilforge.cli import app, join_multi_values
from stencilforge.simulation import initial_array
from stencilforge.solvers.multigrid import build_levels, coarse_inverse
from stencilforge.verification import multigrid_checks


def reference_matrix(shape, walls, h, k):
    """The 5/7-point div(k grad) assembled independently: harmonic faces, walls as documented."""
    n_total = int(np.prod(shape))
    index = np.arange(n_total).reshape(shape)
    rows, cols, vals = [], [], []
    for a, (n, wall) in enumerate(zip(shape, walls)):
        for node in np.ndindex(*shape):
            i = node[a]
            for side in (-1, 1):
                j = i + side
                if wall == "periodic":
                    j %= n
                elif not 0 <= j < n:
                    if wall == "neumann":
                        continue
                    k0 = k[node]
                    k1 = k[tuple(i - side if b == a else c for b, c in enumerate(node))]
                    kw = k0 * min(max(k0 / k1, 0.5), 2.0)
                    c = 2 * k0 * kw / (k0 + kw) / h[a] ** 2
                    rows.append(index[node]), cols.append(index[node]), vals.append(-c)
                    continue
                other = tuple(j if b == a else c for b, c in enumerate(node))
                c = 2 * k[node] * k[other] / (k[node] + k[other]) / h[a] ** 2
                rows += [index[node], index[node]]
                cols += [index[other], index[node]]
                vals += [c, -c]
    return sp.csr_matrix((vals, (rows, cols)), shape=(n_total, n_total))


def direct(shape, walls, h, k, f):
    mat = reference_matrix(shape, walls, h, k)
    if all(w != "dirichlet" for w in walls):  # bordered by sum(u) = 0
        ones = sp.csr_matrix(np.ones((1, mat.shape[0])))
        mat = sp.bmat([[mat, ones.T], [ones, None]], format="csc")
        return spsolve(mat, np.append(f.ravel(), 0.0))[:-1].reshape(shape)
    return spsolve(mat.tocsc(), f.ravel()).reshape(shape)


CASES = [
    ((23, 30), "dirichlet"),
    ((24, 30), "neumann"),
    ((24, 27), "periodic"),
    ((22, 31), ("periodic", "dirichlet")),
    ((9, 10, 11), "dirichlet"),
    ((8, 10, 12), "neumann"),
    ((10, 9, 12), ("periodic", "periodic", "neumann")),
]


@pytest.mark.parametrize("shape,walls", CASES)
@pytest.mark.parametrize("variable", [False, True])
def test_matches_sparse_direct_solve(shape, walls, variable, rng):
    wall_list = (walls,) * len(shape) if isinstance(walls, str) else walls
    f = rng.standard_normal(shape)
    if all(w != "dirichlet" for w in wall_list):
        f -= f.mean()
    k = np.exp(rng.uniform(-1, 1, shape)) if variable else np.ones(shape)
    h = tuple(0.5 / n for n in shape)
    result = poisson(f, h, boundary=walls, k=k if variable else None, tol=1e-12, backend="numpy", max_cycles=200)
    assert result.summary["converged"]
    assert len(result.summary["levels"]) >= 2
    expected = direct(shape, wall_list, h, k, f)
    np.testing.assert_allclose(result.u, expected, rtol=0, atol=1e-9 * np.abs(expected).max())


def test_nonzero_dirichlet_walls_match_sparse_direct_solve(rng):
    shape = (20, 27)
    h = (1 / 21, 1 / 28)
    walls = lambda x, y: 1 + x * x - 2 * y  # noqa: E731
    f = rng.standard_normal(shape)
    result = poisson(f, h, value=walls, tol=1e-12, backend="numpy")
    g = np.zeros((22, 29))
    ys, xs = np.meshgrid(np.arange(22) * h[0], np.arange(29) * h[1], indexing="ij")  # x is the last axis
    g[[0, -1], :] = walls(xs, ys)[[0, -1], :]
    g[:, [0, -1]] = walls(xs, ys)[:, [0, -1]]
    rhs = f.copy()  # move the wall values to the right-hand side
    rhs[0, :] -= g[0, 1:-1] / h[0] ** 2
    rhs[-1, :] -= g[-1, 1:-1] / h[0] ** 2
    rhs[:, 0] -= g[1:-1, 0] / h[1] ** 2
    rhs[:, -1] -= g[1:-1, -1] / h[1] ** 2
    expected = direct(shape, ("dirichlet", "dirichlet"), h, np.ones(shape), rhs)
    np.testing.assert_allclose(result.u, expected, rtol=0, atol=1e-10 * np.abs(expected).max())


@pytest.mark.parametrize(
    "shape,walls,dtype",
    [((33, 40), ("periodic", "neumann"), "float64"), ((17, 18, 19), "dirichlet", "float32")],
)
def test_numba_kernels_match_numpy(shape, walls, dtype, rng):
    f = rng.standard_normal(shape)
    if walls != "dirichlet":
        f -= f.mean()
    k = np.exp(rng.standard_normal(shape)) if dtype == "float64" else None
    for smoother in ("rbgs", "jacobi"):
        a = poisson(f, boundary=walls, k=k, backend="numpy", dtype=dtype, max_cycles=3, tol=1e-30, smoother=smoother)
        b = poisson(f, boundary=walls, k=k, backend="numba", dtype=dtype, max_cycles=3, tol=1e-30, smoother=smoother)
        scale = np.abs(a.u).max()
        assert np.abs(a.u - b.u).max() <= (1e-12 if dtype == "float64" else 1e-5) * scale
        assert b.summary["bytes_per_cycle"] < a.summary["bytes_per_cycle"]  # the fused residual + restriction


@pytest.mark.parametrize("shape", [(127, 127), (100, 100), (31, 31, 31), (24, 24, 24)])
def test_v22_red_black_reduces_the_residual_tenfold_per_cycle(shape, rng):
    s = poisson(rng.standard_normal(shape), tol=1e-30, max_cycles=4, fmg=False, backend="numba").summary
    assert s["cycles"] == 4
    assert max(s["factors"]) < 0.1, s["factors"]
    w = poisson(rng.standard_normal(shape), tol=1e-30, max_cycles=3, fmg=False, cycle="W", backend="numba").summary
    assert max(w["factors"]) < 0.1, w["factors"]
    jac = poisson(rng.standard_normal(shape), tol=1e-30, max_cycles=3, fmg=False, smoother="jacobi", backend="numba").summary
    assert max(jac["factors"]) < 0.35, jac["factors"]


@pytest.mark.parametrize("name,shape", [("poisson2d", (127, 127)), ("poisson2d", (200, 150)), ("poisson3d", (31, 31, 31))])
def test_one_fmg_cycle_reaches_the_discretisation_error(name, shape):
    once = problems.multigrid(*problems.problem(name, shape), backend="numba", tol=1e-30, max_cycles=1).summary
    converged = problems.multigrid(*problems.problem(name, shape), backend="numba", tol=1e-12).summary
    assert once["cycles"] == 1 and converged["converged"]
    assert once["error"]["max_abs"] <= 1.5 * converged["error"]["max_abs"]


def test_second_order_under_refinement_for_every_wall_and_variable_k():
    checks = list(multigrid_checks(get_backend("numba"), quick=False))
    assert {check.name.split(", ")[-1] for check in checks} == {"dirichlet", "neumann", "periodic", "variable k"}
    for check in checks:
        assert check.passed, (check.name, check.observed)


def test_mixed_precision_reaches_float64_accuracy():
    step = problems.linear_step("poisson3d", shape=(31, 31, 31))
    f = initial_array(step.problem, step.lattice, "f", 0, step.values, 1.0)[step.lattice.interior]
    single = poisson(f, tol=1e-11, backend="numba", dtype="float32").summary
    mixed = poisson(f, tol=1e-11, backend="numba", mixed=True).summary
    double = poisson(f, tol=1e-11, backend="numba").summary
    assert not single["converged"] and single["residual"] > 1e-7  # float32 alone stalls at its rounding floor
    assert mixed["converged"] and mixed["residual"] < 1e-11 and mixed["precision"] == "mixed"
    assert double["converged"] and mixed["cycles"] <= double["cycles"] + 2


def test_cg_preconditioned_by_a_v_cycle_handles_a_coefficient_jump_of_1e4(rng):
    shape = (63, 63)
    k = np.ones(shape)
    k[16:40, 20:50] = 1e4
    k[45:60, 5:15] = 1e4
    f = rng.standard_normal(shape)
    h = (1 / 64, 1 / 64)
    cg = poisson(f, h, k=k, method="cg", tol=1e-10, backend="numba", max_cycles=60).summary
    mg = poisson(f, h, k=k, method="multigrid", tol=1e-10, backend="numba", max_cycles=20).summary
    assert cg["converged"] and cg["cycles"] <= 30
    assert not mg["converged"]  # the plain cycle is not robust for this jump; the Krylov wrapper is
    u = poisson(f, h, k=k, method="cg", tol=1e-12, backend="numpy", max_cycles=60).u
    expected = direct(shape, ("dirichlet", "dirichlet"), h, k, f)
    np.testing.assert_allclose(u, expected, rtol=0, atol=1e-8 * np.abs(expected).max())


def test_null_space_is_removed_and_incompatible_f_refused(rng):
    shape = (32, 32)
    f = rng.standard_normal(shape)
    f -= f.mean()
    u = poisson(f, boundary="neumann", tol=1e-10, backend="numpy").u
    assert abs(u.mean()) < 1e-12 * np.abs(u).max()
    shifted = poisson(f, boundary="periodic", tol=1e-10, backend="numpy").u
    assert abs(shifted.mean()) < 1e-12 * np.abs(shifted).max()
    with pytest.raises(StencilforgeError, match="incompatible with neumann walls.*subtract f.mean"):
        poisson(f + 0.1, boundary="neumann", backend="numpy")
    poisson(f + 0.1, boundary=("neumann", "dirichlet"), backend="numpy")  # one dirichlet axis: no null space


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(f=np.full((16, 16), np.nan)), "f contains NaN"),
        (dict(k=np.full((16, 16), np.nan)), "k contains NaN"),
        (dict(k=-np.ones((16, 16))), "k must be positive"),
        (dict(k=np.ones((15, 16))), "k has shape"),
        (dict(f=np.ones((2, 40))), "too small to coarsen"),
        (dict(f=np.ones((8, 8, 8, 8))), "2D or 3D"),
        (dict(boundary="robin"), "boundary must be"),
        (dict(method="sor"), "method must be"),
        (dict(cycle="F"), "cycle must be"),
        (dict(tol=0.0), "tol must be"),
        (dict(pre=0, post=0), "at least one"),
        (dict(mixed=True, dtype="float32"), "mixed precision"),
        (dict(value=np.ones((3, 3))), "ghosted shape"),
        (dict(dtype="int32"), "unsupported dtype"),
    ],
)
def test_bad_input_is_refused_in_one_line(kwargs, match):
    args = dict(f=np.ones((16, 16)), backend="numpy")
    args.update(kwargs)
    with pytest.raises(StencilforgeError, match=match) as info:
        poisson(args.pop("f"), **args)
    assert "\n" not in str(info.value)


runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, join_multi_values(list(args)))


def test_cli_runs_multigrid_by_default_and_jacobi_on_request():
    result = invoke("run", "poisson3d", "--shape", "15", "15", "15", "--tol", "1e-10", "--backend", "numba", "--json")
    assert result.exit_code == 0, result.output
    s = json.loads(result.stdout)
    assert s["method"] == "multigrid" and s["converged"] and 1 <= s["cycles"] <= 8
    assert s["error"]["max_abs"] < 1e-2 and s["teff_gbps"] > 0 and s["passes_per_cycle"] > 10
    jacobi = invoke("run", "poisson2d", "--shape", "16", "16", "--method", "jacobi", "--backend", "numpy", "--json")
    assert jacobi.exit_code == 0 and json.loads(jacobi.stdout)["iterations"] > 100
    human = invoke("run", "poisson2d", "--shape", "31", "31", "--backend", "numpy")
    assert human.exit_code == 0 and "per cycle" in human.stdout and "error vs exact" in human.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "poisson2d", "--shape", "2", "40"], "too small"),
        (["run", "poisson2d", "--method", "sor"], "--method must be"),
        (["run", "heat2d", "--method", "multigrid"], "--method applies to"),
        (["run", "poisson2d", "--snapshot-every", "5", "--out", "x.h5"], "apply to --method jacobi"),
    ],
)
def test_cli_refuses_bad_multigrid_input_with_exit_code_2(args, message):
    result = invoke(*args, "--backend", "numpy")
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output


def test_the_coarse_inverse_has_the_same_bits_on_any_number_of_blas_threads():
    """LAPACK's inverse changes in its last bits with the BLAS thread count (MPI ranks bound to different numbers of
    cores have different counts); the coarse inverse is computed on one thread, so every rank of a split solve, and
    any rank count, cycles with the same one. The 20 x 17 level bordered by its null space, as a periodic and Neumann
    40 x 34 grid's coarsest, is large enough for OpenBLAS to split the work."""
    from threadpoolctl import threadpool_limits

    level = build_levels((40, 34), ("periodic", "neumann"), (1 / 40, 1 / 34), None)[-1]
    assert level.shape == (20, 17)
    inverses = []
    for threads in (1, 2, 4):
        with threadpool_limits(limits=threads, user_api="blas"):
            inverses.append(coarse_inverse(level, singular=True))
    assert all(inv.tobytes() == inverses[0].tobytes() for inv in inverses[1:])


def test_threads_are_honoured_reported_and_given_back():
    """--threads and sf.poisson(threads=) as sf.run takes them: numba's count for the solve, in its summary, Numba's own
    restored after it; refused in one line on another backend."""
    import numba

    before = numba.get_num_threads()
    s = poisson(np.ones((17, 19)), backend="numba", threads=1).summary
    assert s["threads"] == 1 and numba.get_num_threads() == before
    res = invoke("run", "poisson2d", "--backend", "numba", "--threads", "1", "--shape", "17", "19", "--json")
    assert res.exit_code == 0 and json.loads(res.output)["threads"] == 1, res.output
    assert poisson(np.ones((17, 19)), backend="numpy").summary["threads"] is None
    with pytest.raises(StencilforgeError, match="threads apply to the numba backend, not numpy"):
        poisson(np.ones((17, 19)), backend="numpy", threads=1)
