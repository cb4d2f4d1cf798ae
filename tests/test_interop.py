"""Arrays of other libraries through DLPack: read without a copy, results back in the caller's kind, `auto` by location.

The library-neutral cases use `Foreign`, an array type that offers only DLPack and an
array-API namespace (as JAX's does); PyTorch CPU tensors are tested where torch imports.
"""

import logging

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.errors import StencilforgeError
from stencilforge.interop import backend_for, device_of, native


class Foreign:
    """An array of a library that is neither NumPy nor CuPy: `__dlpack__`, `__dlpack_device__` and a namespace."""

    def __init__(self, data, device=None):
        self.data = data
        self.device = device

    def __dlpack__(self, **kwargs):
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.device or self.data.__dlpack_device__()

    def __array_namespace__(self, api_version=None):
        return ForeignNamespace


class ForeignNamespace:
    @staticmethod
    def from_dlpack(x):
        return Foreign(np.from_dlpack(x))


LAP = sf.Stencil.laplacian(2, radius=2, spacing=0.1)


def test_a_foreign_array_is_read_without_a_copy_and_answered_in_its_kind(rng):
    u = rng.random((30, 40))
    out = sf.apply(LAP, Foreign(u), backend="numpy")
    assert isinstance(out, Foreign)
    np.testing.assert_array_equal(out.data, sf.apply(LAP, u, backend="numpy"))
    assert np.shares_memory(native(Foreign(u)), u)
    d1, d2 = sf.derivatives(Foreign(u), h=0.1, axis=1, accuracy=4, backend="numpy")
    r1, r2 = sf.derivatives(u, h=0.1, axis=1, accuracy=4, backend="numpy")
    assert isinstance(d1, Foreign) and isinstance(d2, Foreign)
    np.testing.assert_array_equal(d1.data, r1)
    np.testing.assert_array_equal(d2.data, r2)


def test_auto_computes_where_the_input_lives(rng, caplog):
    u = rng.random((20, 20)).astype(np.float32)
    assert device_of(u) == "cpu" and device_of([1.0]) is None
    with caplog.at_level(logging.INFO, logger="stencilforge"):
        assert backend_for("auto", [u]) == "numba"
    assert "backend auto: numba, for input in host memory" in caplog.text
    assert backend_for("numpy", [u]) == "numpy"
    assert backend_for("auto", []) == "auto"
    assert backend_for("auto", [u], host="auto") == "auto"  # a run's host data does not keep it off a GPU
    np.testing.assert_allclose(sf.apply(LAP, Foreign(u)).data, sf.apply(LAP, u, backend="numpy"), rtol=2e-6, atol=1e-3)


def test_lists_and_numbers_stay_numpy():
    out = sf.apply(sf.Stencil.five_point(), [[0.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 0.0]], backend="numpy")
    assert type(out) is np.ndarray and out.dtype == np.float64
    np.testing.assert_array_equal(out, [[-4.0]])


def test_memory_stencilforge_cannot_reach_is_refused_in_one_line(rng):
    odd = Foreign(rng.random((8, 8)), device=(14, 0))  # a DLPack device type that is neither host nor CUDA
    with pytest.raises(StencilforgeError, match="DLPack device type 14 cannot be read"):
        sf.apply(LAP, odd)


def _decay_problem(initial):
    grid = sf.Grid((24, 20), extent=1.0)
    u = sf.Field("u", grid)
    return sf.Problem([sf.Eq(u.next, u + 0.0004 * sf.laplacian(u))], initial={u: initial},
                      boundary={u: sf.Dirichlet(0.0)}, steps=5)


def test_initial_values_of_any_kind(rng):
    start = rng.random((24, 20))
    ref = sf.run(_decay_problem(start), backend="numpy").fields["u"]
    got = sf.run(_decay_problem(Foreign(start)), backend="numpy").fields["u"]
    np.testing.assert_array_equal(got, ref)
    with pytest.raises(StencilforgeError, match=r"has shape \(20, 24\)"):
        _decay_problem(Foreign(start.T.copy()))


# PyTorch, where it is installed (CPU tensors)

def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_tensors_in_torch_tensors_out(rng, dtype):
    torch = _torch()
    u = rng.random((33, 41)).astype(dtype)
    t = torch.from_numpy(u.copy())
    assert np.shares_memory(native(t), t.numpy())
    for backend in ("numpy", "numba", "auto"):
        out = sf.apply(LAP, t, backend=backend)
        assert isinstance(out, torch.Tensor) and out.dtype == t.dtype and out.device == t.device
        np.testing.assert_allclose(out.numpy(), sf.apply(LAP, u, backend="numpy"), rtol=1e-5, atol=1e-3)
        d1, d2 = sf.derivatives(t, h=0.1, axis=0, accuracy=4, backend=backend)
        r1, r2 = sf.derivatives(u, h=0.1, axis=0, accuracy=4, backend="numpy")
        assert isinstance(d1, torch.Tensor) and isinstance(d2, torch.Tensor)
        np.testing.assert_allclose(d1.numpy(), r1, rtol=1e-5, atol=1e-2)
        np.testing.assert_allclose(d2.numpy(), r2, rtol=1e-5, atol=1e-1)


def test_torch_strided_views_and_initial_values(rng):
    torch = _torch()
    u = rng.random((41, 33))
    t = torch.from_numpy(u.copy()).T  # a transposed view: DLPack carries its strides
    np.testing.assert_array_equal(sf.apply(LAP, t, backend="numpy").numpy(), sf.apply(LAP, u.T.copy(), backend="numpy"))
    start = rng.random((24, 20))
    ref = sf.run(_decay_problem(start), backend="numpy").fields["u"]
    np.testing.assert_array_equal(sf.run(_decay_problem(torch.from_numpy(start)), backend="numpy").fields["u"], ref)


def test_a_tensor_that_requires_grad_is_refused_in_one_line():
    torch = _torch()
    t = torch.ones((8, 8), dtype=torch.float64, requires_grad=True)
    with pytest.raises(StencilforgeError, match=r"^cannot read the Tensor through DLPack: ") as exc:
        sf.apply(LAP, t)
    assert "\n" not in str(exc.value)
