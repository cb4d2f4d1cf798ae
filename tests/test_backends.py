"""numba must equal the numpy oracle to rounding on random inputs and awkward shapes."""

import numpy as np
import pytest

from conftest import TOLERANCES
from stencilforge import problems
from stencilforge.backends import get_backend
from stencilforge.problems import derivatives
from stencilforge.runner import run

SHAPES = {
    "poisson2d": [(7, 13), (31, 17)],
    "heat2d": [(5, 3), (37, 41)],
    "heat3d": [(3, 5, 7), (13, 11, 17)],
    "wave3d": [(17, 19, 23)],
}


def random_fields(step, rng):
    """Every array the step's sweep takes, ghosted, random."""
    names = {*step.sweep.inputs, step.sweep.out}
    lattice = step.lattice
    return {name: rng.standard_normal(lattice.padded_shape).astype(lattice.dtype) for name in sorted(names)}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,shape", [(n, s) for n, shapes in SHAPES.items() for s in shapes])
def test_sweep_matches_oracle(name, shape, dtype, rng):
    step = problems.linear_step(name, shape=shape, dtype=dtype)
    sweep, lattice = step.sweep, step.lattice
    inputs = random_fields(step, rng)
    results = {}
    for backend_name in ("numpy", "numba"):
        backend = get_backend(backend_name)
        fields = {k: v.copy() for k, v in inputs.items()}
        if sweep.out not in sweep.inputs:
            fields[sweep.out][...] = np.nan
        backend.sweep(sweep, lattice)(fields)
        results[backend_name] = fields[sweep.out]
    interior = lattice.interior
    assert np.all(np.isfinite(results["numba"][interior])), "an interior cell was not written"
    np.testing.assert_allclose(results["numba"][interior], results["numpy"][interior], **TOLERANCES[dtype])
    if sweep.out not in sweep.inputs:
        ghost = np.ones(lattice.padded_shape, bool)
        ghost[interior] = False
        assert np.all(np.isnan(results["numba"][ghost])), "a ghost cell was written"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("accuracy", [2, 4])
@pytest.mark.parametrize("shape", [(7, 11), (53, 29)])
def test_axis_operator_matches_oracle(axis, accuracy, shape, dtype, rng):
    op = derivatives.operator(axis, 0.37, accuracy)
    u = rng.standard_normal(shape).astype(dtype)
    outs = {}
    for backend_name in ("numpy", "numba"):
        o = [np.full(shape, np.nan, dtype=dtype) for _ in op.outputs]
        get_backend(backend_name).axis_operator(op, np.dtype(dtype))(u, *o)
        outs[backend_name] = o
    for got, ref in zip(outs["numba"], outs["numpy"]):
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, ref, rtol=TOLERANCES[dtype]["rtol"] * 10, atol=TOLERANCES[dtype]["atol"] * 100)


def test_seed_closures_are_the_seeds_formulas(rng):
    u = rng.standard_normal((4, 9))
    h = 0.1
    d1, d2 = (np.full(u.shape, np.nan) for _ in range(2))
    get_backend("numpy").axis_operator(derivatives.operator(1, h, 2), np.dtype(np.float64))(u, d1, d2)
    np.testing.assert_allclose(d2[:, 0], (u[:, 0] - 2 * u[:, 1] + u[:, 2]) / h**2)
    np.testing.assert_allclose(d2[:, -1], (u[:, -3] - 2 * u[:, -2] + u[:, -1]) / h**2)
    np.testing.assert_allclose(d1[:, 0], (u[:, 1] - u[:, 0]) / h)
    np.testing.assert_allclose(d1[:, -1], (u[:, -1] - u[:, -2]) / h)
    np.testing.assert_allclose(d1[:, 4], (u[:, 5] - u[:, 3]) / (2 * h))
    np.testing.assert_allclose(d2[:, 4], (u[:, 3] - 2 * u[:, 4] + u[:, 5]) / h**2)


@pytest.mark.parametrize("name", problems.NAMES)
def test_whole_runs_agree(name):
    shape = {"poisson2d": (19, 23), "poisson3d": (9, 11, 7), "heat2d": (19, 23), "heat3d": (9, 11, 7), "wave3d": (17, 18, 19),
             "derivatives": (31, 37)}[name]
    runs = [problems.problem(name, shape=shape)[0] for _ in range(2)]
    a = run(runs[0], steps=20, backend="numpy")
    b = run(runs[1], steps=20, backend="numba")
    assert a.summary["steps"] == b.summary["steps"] == 20 and a.fields
    tol = TOLERANCES[runs[0].grid.dtype.name]
    for field in a.fields:
        np.testing.assert_allclose(b.fields[field], a.fields[field], rtol=tol["rtol"] * 50, atol=tol["atol"] * 50)


@pytest.mark.parametrize("name", ["numpy", "numba"])
def test_a_host_field_is_a_new_array(name, rng):
    """Callers rely on it: the time loop's walls carriers and the bench's fields are `field` of arrays they keep."""
    a = rng.random((6, 7, 9)).astype(np.float32)
    out = get_backend(name).field(a, 1)
    assert out.flags.c_contiguous and np.array_equal(out, a) and not np.shares_memory(out, a)
