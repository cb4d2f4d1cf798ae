"""The device finite test against NumPy's on random fields with NaN and infinities at awkward places, in every
storage dtype and the layouts the loop hands it (C-contiguous and pitched interiors, 1D to 3D)."""

from __future__ import annotations

import numpy as np
import pytest

from stencilforge.backends.cuda import CudaBackend

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

SHAPES = [(1,), (3,), (1029,), (5, 1), (1, 7), (17, 2050), (70000, 3), (3, 5, 7), (9, 1, 1030), (2, 300, 257)]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("pitched", [False, True])
def test_device_finite_test_agrees_with_numpy(dtype, shape, pitched):
    import cupy as cp

    backend = CudaBackend()
    rng = np.random.default_rng(len(shape) * 1000 + shape[-1])
    host = rng.standard_normal(tuple(n + 2 for n in shape)).astype(dtype)
    interior = tuple(slice(1, -1) for _ in shape)
    arr = backend.field(host, 1) if pitched else cp.asarray(host)
    assert backend.all_finite([arr[interior]])
    size = int(np.prod(shape))
    for bad in (np.nan, np.inf, -np.inf):
        for flat in {0, size - 1, int(rng.integers(size))}:
            where = tuple(int(i) + 1 for i in np.unravel_index(flat, shape))
            saved = arr[where].item()
            arr[where] = bad
            assert not backend.all_finite([arr[interior]]), (bad, where)
            assert not backend.all_finite([arr[interior], cp.zeros(3, dtype=dtype)]), "a finite view after it hides nothing"
            arr[where] = saved
    ghost = (0,) * len(shape)
    arr[ghost] = np.nan  # outside the interior
    assert backend.all_finite([arr[interior]])
    assert not backend.all_finite([arr])


def test_device_finite_test_takes_strided_views_and_empty_ones():
    import cupy as cp

    backend = CudaBackend()
    a = cp.ones((6, 8), dtype=cp.float32)
    a[2, 3] = cp.nan
    assert backend.all_finite([a[:, ::2], a[:0]])  # the NaN is in an odd column
    assert not backend.all_finite([a[:, 1::2]])
