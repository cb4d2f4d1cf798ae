"""CUDA arrays through DLPack, on a GPU (skipped where there is none): CuPy in, CuPy out, computed on cuda by `auto`."""

import logging

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.interop import native

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

import cupy as cp  # noqa: E402  (only importable where the skip above did not fire)

LAP = sf.Stencil.laplacian(2, radius=2, spacing=0.1)


def test_cupy_arrays_come_back_as_cupy_computed_on_cuda(rng, caplog):
    u = rng.random((65, 130))
    d = cp.asarray(u)
    assert native(d) is d
    with caplog.at_level(logging.INFO, logger="stencilforge"):
        out = sf.apply(LAP, d)
    assert "backend auto: cuda, for input in CUDA memory" in caplog.text
    assert isinstance(out, cp.ndarray)
    np.testing.assert_allclose(out.get(), sf.apply(LAP, u, backend="numpy"), rtol=1e-12, atol=1e-9)
    d1, d2 = sf.derivatives(d, h=0.1, axis=1, accuracy=4)
    r1, r2 = sf.derivatives(u, h=0.1, axis=1, accuracy=4, backend="numpy")
    assert isinstance(d1, cp.ndarray) and isinstance(d2, cp.ndarray)
    np.testing.assert_allclose(d1.get(), r1, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(d2.get(), r2, rtol=1e-12, atol=1e-7)


def test_results_stay_on_the_callers_device_whichever_backend_computes(rng):
    u = rng.random((40, 50))
    on_host = sf.apply(LAP, u, backend="cuda")
    assert type(on_host) is np.ndarray
    on_device = sf.apply(LAP, cp.asarray(u), backend="numba")
    assert isinstance(on_device, cp.ndarray)
    np.testing.assert_allclose(on_host, on_device.get(), rtol=1e-12, atol=1e-9)


def test_a_cupy_initial_value_runs_on_cuda(rng):
    grid = sf.Grid((48, 40), extent=1.0)
    u = sf.Field("u", grid)
    start = rng.random((48, 40))

    def problem(initial):
        return sf.Problem([sf.Eq(u.next, u + 0.0004 * sf.laplacian(u))], initial={u: initial},
                          boundary={u: sf.Dirichlet(0.0)}, steps=5)

    result = sf.run(problem(cp.asarray(start)))
    assert result.summary["backend"] == "cuda"
    ref = sf.run(problem(start), backend="numpy").fields["u"]
    np.testing.assert_allclose(cp.asnumpy(result.fields["u"]), ref, rtol=1e-12, atol=1e-12)


def test_torch_cuda_tensors_come_back_as_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    u = rng.random((33, 70))
    t = torch.from_numpy(u).cuda()
    out = sf.apply(LAP, t)
    assert isinstance(out, torch.Tensor) and out.is_cuda
    np.testing.assert_allclose(out.cpu().numpy(), sf.apply(LAP, u, backend="numpy"), rtol=1e-12, atol=1e-9)
