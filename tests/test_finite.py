"""The loop's finite test on the device (`backends.cuda.finite`): the kernels compile without a GPU, and the layouts
they read are the views' own."""

from __future__ import annotations

import numpy as np
import pytest

from stencilforge.backends.cuda import finite
from stencilforge.backends.cuda.compile import compile_cubin
from stencilforge.backends.numpy_ref import NumpyBackend


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_finite_kernels_compile(nvrtc, arch):
    assert compile_cubin(finite._SOURCE, arch, "finite test", ("-std=c++17",))[:4] == b"\x7fELF"


def test_rows_of_interior_views():
    a = np.zeros((10, 12, 14), np.float32)
    assert finite._rows(a[1:-1, 2:-2, 3:-3]) == (8 * 8, 8, 12 * 14, 14, 8)
    assert finite._rows(a[2]) == (12, 12, 0, 14, 14)
    assert finite._rows(np.zeros(7)[1:-1]) == (1, 1, 0, 0, 5)
    assert finite._rows(a[:, :, ::2]) is None  # no contiguous rows: CuPy's test instead


def test_host_backends_find_nan_and_inf_in_any_view():
    backend = NumpyBackend()
    a = np.random.default_rng(1).random((9, 11))
    assert backend.all_finite([a[1:-1, 1:-1], a])
    a[0, 0] = np.nan  # a ghost cell: outside the interior view
    assert backend.all_finite([a[1:-1, 1:-1]]) and not backend.all_finite([a])
    a[4, 5] = -np.inf
    assert not backend.all_finite([a[1:-1, 1:-1]])

