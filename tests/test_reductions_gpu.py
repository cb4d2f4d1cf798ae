"""Exact sums on the device (`reductions.device_bins`) are the host's exact sums: signed values over the whole
exponent range, subnormals, runs of one exponent longer than a thread adds in a register, rows longer than a block's
chunk (a 1D array), field interiors (strided rows), float16/32/64; NaN and Inf give the plain sum."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stencilforge.backends.cuda import CudaBackend
from stencilforge.reductions import exact_integer_sum, local_part, squares_part

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

import cupy  # noqa: E402


def cases() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    n = 100_003
    return [
        np.concatenate([rng.standard_normal(n) * 10.0 ** rng.integers(-300, 300, n), [5e-324, -1e300, 0.0, -3e-310]]),
        rng.standard_normal(3_000_001),  # one row, spread over the blocks
        np.ones(1 << 20),  # one exponent throughout: runs reach their register limit
        -np.full((513, 1025), 0.75),
        rng.standard_normal((300, 257)),
        rng.standard_normal((40, 50, 33)).astype(np.float32) * 1e20,
        rng.standard_normal(1001).astype(np.float16),
        np.array([1e-300, 3e-310, 1e150]),
        np.zeros(7),
    ]


@pytest.mark.parametrize("index", range(len(cases())))
def test_device_sums_are_the_host_exact_sums(index):
    host = cases()[index]
    strided = cupy.asarray(np.pad(host, 2))[(slice(2, -2),) * host.ndim]  # a field's interior
    for device in (cupy.asarray(host), strided, cupy.asarray(host)[::-1]):
        v = host.astype(np.float64)
        assert local_part(device) == exact_integer_sum(v)
        with np.errstate(over="ignore"):
            assert squares_part(device) == local_part(v * v)


def test_values_that_are_not_finite_give_the_plain_sum():
    assert math.isnan(local_part(cupy.asarray([1.0, np.nan, 2.0])))
    assert local_part(cupy.asarray([1.0, np.inf])) == math.inf
    assert squares_part(cupy.asarray(np.array([1e200, 1.0]))) == math.inf
    assert math.isnan(squares_part(cupy.asarray(np.array([np.nan, 1.0], dtype=np.float32))))
