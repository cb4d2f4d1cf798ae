"""User equations on the GPU against the numpy oracle: NaN-poisoned outputs, odd shapes, 1D to 3D."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.backends.numpy_ref import NumpyBackend

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

import cupy as cp  # noqa: E402

from test_equations import _random_problem, gray_scott, heat, terms, walls  # noqa: E402

UNIT = {"float32": 2.0**-24, "float64": 2.0**-53}
CUDA = CudaBackend()


def poisoned_run(problem, steps):
    """Steps on cuda with every not-yet-computed level NaN inside, so an unwritten cell shows."""
    sim = sf.Simulation(problem, CUDA)
    for levels in sim.levels.values():
        if len(levels) > 1:
            levels[-1][sim.lattice.interior] = cp.nan
    sim.step(steps)
    return {k: cp.asnumpy(v) for k, v in sim.fields.items()}


def close(gpu, ref, dtype, steps, scale=64):
    """Within a per-cell rounding bound: a few ulps of the largest value per step (exp/sin/tanh differ
    from numpy's by ulps, and no FMA contraction is allowed)."""
    for name, want in ref.items():
        got = gpu[name]
        assert np.isfinite(got).all(), f"{name}: unwritten or non-finite cells"
        bound = scale * steps * UNIT[dtype] * max(1.0, float(np.abs(want).max()))
        assert float(np.abs(got - want).max()) <= bound, (name, float(np.abs(got - want).max()), bound)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(64, 48), (37, 101)])
def test_gray_scott_cuda_matches_numpy(dtype, shape):
    p = gray_scott(shape=shape, dtype=dtype)
    ref = sf.run(p, backend=NumpyBackend(), steps=20).fields
    close(poisoned_run(p, 20), ref, dtype, 20)


@pytest.mark.parametrize("ndim,shape", [(1, (101,)), (2, (33, 70)), (3, (13, 17, 35))])
def test_heat_cuda_matches_numpy(ndim, shape):
    p, _ = heat(shape, dtype="float64", order=4)
    ref = sf.run(p, backend=NumpyBackend(), steps=10).fields
    close(poisoned_run(p, 10), ref, "float64", 10)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms, terms, walls, st.sampled_from(["none", "tanh", "min", "where", "abs"]),
       st.sampled_from(["float32", "float64"]), st.tuples(st.integers(5, 40), st.integers(5, 70)))
def test_generated_equations_cuda_match_numpy(u_terms, v_terms, wall, fn, dtype, shape):
    p = _random_problem(u_terms, v_terms, wall, fn, dtype, shape)
    ref = sf.run(p, backend=NumpyBackend(), steps=3).fields
    close(poisoned_run(p, 3), ref, dtype, 3)
