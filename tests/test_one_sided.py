"""One-sided derivatives (`sf.d(u, axis, closure="one-sided")`): a stage of their own that runs the axis-operator kernels.

The oracle is literal NumPy (slices and the textbook closure rows), not the IR or the kernels' weights, so a
mistake in the weights or in how a stage reads and writes its arrays cannot pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import stencilforge as sf
from stencilforge import problems

BACKENDS = ["numpy", "numba"]


def literal(u: np.ndarray, h: float, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """d1, d2 of accuracy 2: central inside, one first-order row at each end (u[1]-u[0] / h; u[0]-2u[1]+u[2] / h^2)."""
    v = np.moveaxis(np.asarray(u, dtype=np.float64), axis, -1)
    d1, d2 = np.empty_like(v), np.empty_like(v)
    d1[..., 1:-1] = (v[..., 2:] - v[..., :-2]) / (2 * h)
    d1[..., 0] = (v[..., 1] - v[..., 0]) / h
    d1[..., -1] = (v[..., -1] - v[..., -2]) / h
    d2[..., 1:-1] = (v[..., 2:] - 2 * v[..., 1:-1] + v[..., :-2]) / h**2
    d2[..., 0] = (v[..., 0] - 2 * v[..., 1] + v[..., 2]) / h**2
    d2[..., -1] = (v[..., -3] - 2 * v[..., -2] + v[..., -1]) / h**2
    return np.moveaxis(d1, -1, axis), np.moveaxis(d2, -1, axis)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(7, 9), (23, 5), (40, 33)])
def test_a_problem_of_one_sided_derivatives_matches_literal_numpy(backend, axis, shape):
    rng = np.random.default_rng(sum(shape) + axis)
    grid = sf.Grid(shape, spacing=(0.3, 0.3), origin=(0.0, 0.0))
    u, ux, uxx = (sf.Field(n, grid, levels=1) for n in ("u", "ux", "uxx"))
    along = grid.axis_names[axis]
    values = rng.uniform(-1, 1, shape)
    problem = sf.Problem([sf.Eq(ux, sf.d(u, along, closure="one-sided")), sf.Eq(uxx, sf.d(u, along, 2, closure="one-sided"))],
                         initial={u: values}, steps=2)
    r = sf.run(problem, backend=backend)
    d1, d2 = literal(values, 0.3, axis)
    np.testing.assert_allclose(r.fields["ux"], d1, rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(r.fields["uxx"], d2, rtol=1e-13, atol=1e-11)
    assert r.summary["bytes_per_cell"] == 3 * 8 and r.summary["sweeps"]  # u read, ux and uxx written; the kernel ran


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_sided_derivatives_between_passes_of_a_step_with_ghost_layers(backend):
    """A step whose other passes need ghost layers: the derivative reads its operand's interior (through a dense copy),
    after the pass that computed it, and a later pass reads its result at the cell."""
    shape, h, dt = (17, 21), 0.1, 0.01
    grid = sf.Grid(shape, spacing=h, origin=(0.0, 0.0))
    u, q, qx = sf.Field("u", grid), sf.Field("q", grid, levels=1), sf.Field("qx", grid, levels=1)
    start = np.random.default_rng(3).uniform(0.5, 1.0, shape)
    problem = sf.Problem(
        [sf.Eq(q, u * u), sf.Eq(qx, sf.d(q, "x", closure="one-sided")), sf.Eq(u.next, u + dt * (sf.laplacian(u) - qx))],
        initial={u: start}, boundary={u: sf.Dirichlet(0.5)}, steps=3,
    )
    assert [type(s).__name__ for s in problem.analysis.stages] == ["Pass", "OperatorStage", "Pass"]
    r = sf.run(problem, backend=backend)
    v = np.pad(start, 1, constant_values=0.5)
    for _ in range(3):
        inner = v[1:-1, 1:-1]
        qx_ = literal(inner * inner, h, 1)[0]
        lap = (v[2:, 1:-1] - 2 * inner + v[:-2, 1:-1]) / h**2 + (v[1:-1, 2:] - 2 * inner + v[1:-1, :-2]) / h**2
        v = v.copy()
        v[1:-1, 1:-1] = inner + dt * (lap - qx_)
    np.testing.assert_allclose(r.fields["u"], v[1:-1, 1:-1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_named_problem_is_fourth_order_to_the_ends_with_accuracy_4(backend):
    errors = {}
    for n in (41, 81):
        problem, _ = problems.problem("derivatives", shape=(n, n), accuracy=4, axis=1)
        errors[n] = sf.run(problem, steps=1, backend=backend).summary["errors"]["d1"]
    order = math.log(errors[41] / errors[81]) / math.log(80 / 40)
    assert 3.6 < order < 4.4, errors


@pytest.mark.parametrize("make, message", [
    (lambda u, g: sf.d(u * u, "x", closure="one-sided"), "applies to a field"),
    (lambda u, g: sf.d(u, "x", closure="periodic"), "closure must be 'one-sided'"),
    (lambda u, g: sf.d(u, "x", accuracy=6, closure="one-sided"), "accuracy must be one of"),
])
def test_bad_one_sided_derivatives_are_refused_in_one_line(make, message):
    grid = sf.Grid((9, 9), extent=1.0)
    with pytest.raises(sf.StencilforgeError, match=message):
        make(sf.Field("u", grid, levels=1), grid)


def test_a_one_sided_derivative_inside_an_expression_is_refused():
    grid = sf.Grid((9, 9), extent=1.0)
    u, ux = sf.Field("u", grid, levels=1), sf.Field("ux", grid, levels=1)
    with pytest.raises(sf.StencilforgeError, match="an equation of its own"):
        sf.Problem([sf.Eq(ux, 2 * sf.d(u, "x", closure="one-sided"))])


def test_one_sided_derivatives_need_a_2d_grid():
    grid = sf.Grid((9, 9, 9), extent=1.0)
    with pytest.raises(sf.StencilforgeError, match="2D grids"):
        sf.d(sf.Field("u", grid, levels=1), "x", closure="one-sided")


def test_show_kernel_shows_the_axis_operator_of_a_named_problem():
    from stencilforge.sources import problem_source

    problem, _ = problems.problem("derivatives", shape=(64, 80))
    cuda, numba = problem_source(problem, "cuda"), problem_source(problem, "numba")
    assert "one-sided derivatives of u" in cuda and "__global__" in cuda
    assert "one-sided derivatives of u" in numba and "def kernel(u, o0, o1, coef)" in numba
