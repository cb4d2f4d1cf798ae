"""Initial values and exact solutions evaluated by the device's generated kernel: bitwise the values the
array operations gave before it (CuPy, float64, one launch per operation), close to NumPy's, every cell
written, and no float64 temporaries of the grid's size."""

from __future__ import annotations

import numpy as np
import pytest

from stencilforge.backends.cuda import CudaBackend
from stencilforge.printers.numpy import evaluate, float64_coordinates
from stencilforge.simulation import tabulated
from tabulate_cases import expressions, lattices, problem_grid

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

import cupy as cp  # noqa: E402


def _array_operations(expr, lattice, storage, params, t, ghosts):
    """The device path before the kernel: CuPy operations in float64, assigned into the grid's dtype."""
    value = evaluate(expr, dtype=np.float64, xp=cp, coordinate=float64_coordinates(lattice, cp, ghosts=ghosts), params=params, t=t)
    out = cp.zeros(lattice.padded_shape if ghosts else lattice.shape, dtype=lattice.dtype)
    out[...] = value
    return out.astype(storage)


def _poison_pool(nbytes: int) -> None:
    """Leave NaN in the memory pool's next blocks, so a cell the kernel does not write shows."""
    block = cp.full(nbytes // 8 + 1024, np.nan)
    del block


@pytest.mark.parametrize("dtype,storage", [("float64", "float64"), ("float32", "float32"), ("float32", "float16"),
                                           ("float64", "float64-exact")])
@pytest.mark.parametrize("ghosts", [False, True])
def test_kernel_equals_the_array_operations_bitwise(dtype, storage, ghosts):
    storage = "float64" if storage == "float64-exact" else storage
    for lattice in lattices(dtype):
        for label, expr in expressions(problem_grid(lattice)):
            want = _array_operations(expr, lattice, storage, {"k": 2.5}, 0.125, ghosts)
            _poison_pool(want.nbytes)
            got = tabulated(expr, lattice, storage, {"k": 2.5}, 0.125, cp, ghosts=ghosts)
            assert got.dtype == np.dtype(storage) and got.shape == want.shape, label
            np.testing.assert_array_equal(cp.asnumpy(got), cp.asnumpy(want), err_msg=f"{label} on {lattice.shape}")


def test_kernel_is_close_to_numpy():
    for lattice in lattices("float64"):
        for label, expr in expressions(problem_grid(lattice)):
            host = tabulated(expr, lattice, "float64", {"k": 2.5}, 0.5, ghosts=True)
            device = cp.asnumpy(tabulated(expr, lattice, "float64", {"k": 2.5}, 0.5, cp, ghosts=True))
            # CUDA's sin, exp, log and tanh are within 2 ulp of the C library's, and products carry that on
            np.testing.assert_allclose(device, host, rtol=1e-14, atol=1e-15, err_msg=label)


def _allocated(fn):
    """What `fn` returns and the bytes of device memory it asked for, counted in this thread only (work another
    thread of the process does meanwhile, a background copy or compile, does not count)."""
    pool = cp.get_default_memory_pool()
    sizes = []

    def malloc(nbytes):
        sizes.append(nbytes)
        return pool.malloc(nbytes)

    with cp.cuda.using_allocator(malloc):
        value = fn()
    return value, sum(sizes)


def test_a_large_initial_value_makes_no_float64_temporaries():
    """A 256³ float32 product of sines: the kernel allocates its float32 output and nothing more; the array
    operations held float64 arrays of the whole grid."""
    from stencilforge.grid import Grid

    lattice = Grid((256, 256, 256), (1 / 257,) * 3, np.dtype("float32"), 1, (1 / 257,) * 3)
    label, expr = expressions(problem_grid(lattice))[0]
    out, kernel_bytes = _allocated(lambda: tabulated(expr, lattice, "float32", {}, 0.0, cp, ghosts=True))
    assert out.nbytes <= kernel_bytes < 1.5 * out.nbytes, label
    _, array_bytes = _allocated(lambda: _array_operations(expr, lattice, "float32", {}, 0.0, True))
    assert array_bytes >= 2 * np.prod(lattice.padded_shape) * 8  # what the kernel saves
