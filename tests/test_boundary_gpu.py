"""Dirichlet walls of the form value(x) * f(t) on the GPU: one scatter kernel, the host's bits."""

from __future__ import annotations

import numpy as np
import pytest

from stencilforge.backends.cuda import CudaBackend
from stencilforge.boundary import Dirichlet, all_faces
from stencilforge.grid import Grid, row_pitch

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

from test_boundary import test_one_dirichlet_wall_on_every_axis_fills_in_one_call_with_the_bits_of_one_fill_per_axis as one_wall  # noqa: E402


def test_one_dirichlet_wall_on_every_axis_is_one_scatter_with_the_bits_of_one_per_axis():
    one_wall("cuda")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,ghost", [((37, 45), 1), ((11, 13, 9), 2), ((5, 300), 3)])
def test_scaled_walls_on_the_gpu_give_the_host_bits_and_touch_only_ghost_cells(shape, ghost, dtype):
    import cupy as cp

    grid = Grid(shape, tuple(0.1 for _ in shape), np.dtype(dtype), ghost, tuple(0.0 for _ in shape))
    wall = Dirichlet(lambda t, **xs: np.sin(3 * xs["y"]) + xs["x"] ** 2 + 0.5 + 0 * t, time_factor=lambda t: np.exp(-0.3 * t))
    backend = CudaBackend()
    rng = np.random.default_rng(4)
    host = rng.standard_normal(grid.padded_shape).astype(dtype)
    device = backend.field(host, ghost)  # pitched, as the time loop lays sweep fields out
    dense = cp.asarray(host)
    host_fill = wall.bind(grid, np, all_faces(grid.ndim))
    for t in (0.0, 0.7, 3.1):
        host_fill(host, t)
        wall.bind(grid, cp, all_faces(grid.ndim), row_pitch(device))(device, t)
        wall.bind(grid, cp, all_faces(grid.ndim))(dense, t)
        np.testing.assert_array_equal(cp.asnumpy(device), host)
        np.testing.assert_array_equal(cp.asnumpy(dense), host)
