"""Multigrid on the GPU (CuPy arrays through the same code) against the numpy path."""

from __future__ import annotations

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)


@pytest.mark.parametrize("shape", [(63, 80), (31, 24, 40)])
@pytest.mark.parametrize("boundary", ["dirichlet", "neumann", "periodic"])
@pytest.mark.parametrize("variable_k", [False, True])
def test_cuda_multigrid_matches_numpy(shape, boundary, variable_k):
    rng = np.random.default_rng(7)
    f = rng.standard_normal(shape)
    if boundary != "dirichlet":
        f -= f.mean()
    k = 1.0 + rng.random(shape) if variable_k else None
    ref = sf.poisson(f, boundary=boundary, k=k, tol=1e-10, dtype="float64", backend="numpy")
    got = sf.poisson(f, boundary=boundary, k=k, tol=1e-10, dtype="float64", backend="cuda")
    u_ref = np.asarray(ref.u)
    u_gpu = got.u.get() if hasattr(got.u, "get") else np.asarray(got.u)
    assert np.isfinite(u_gpu).all()
    assert got.summary["converged"], got.summary
    scale = float(np.abs(u_ref).max())
    assert float(np.abs(u_gpu - u_ref).max()) <= 1e-8 * scale


def test_cuda_mixed_precision_reaches_float64_accuracy():
    rng = np.random.default_rng(3)
    f = rng.standard_normal((127, 127))
    got = sf.poisson(f, tol=1e-11, dtype="float64", mixed=True, backend="cuda")
    assert got.summary["converged"] and got.summary["residual"] < 1e-11
