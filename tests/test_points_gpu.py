"""Sources and receivers on the cuda backend: the injection and recording are array operations on CuPy
(`points.py`), the ones numpy runs, so the traces agree with numpy's to the rounding of the steps between them
(2D and 3D heat, points between nodes and on them, linear and nearest, float32 and float64)."""

from __future__ import annotations

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)


def _problem(shape, dtype) -> sf.Problem:
    grid = sf.Grid(shape, extent=1.0, dtype=dtype)
    u = sf.Field("u", grid)
    h = min(grid.spacing)
    inside = tuple(0.37 + 0.05 * a for a in range(len(shape)))
    between = tuple(0.61 - 0.03 * a for a in range(len(shape)))
    return sf.Problem([sf.Eq(u.next, u + 0.1 * h * h * sf.laplacian(u))], boundary={u: sf.Dirichlet(0.0)},
                      sources=[sf.Source(u, inside, lambda t: np.sin(40.0 * t)), sf.Source(u, between, lambda t: 1.0, "nearest")],
                      receivers=[sf.Receiver(u, inside), sf.Receiver(u, between), sf.Receiver(u, tuple(0.5 for _ in shape), "nearest")],
                      dt=1e-3, steps=30, name="points")


@pytest.mark.parametrize("shape", [(37, 101), (13, 21, 34)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_traces_agree_with_numpy(shape, dtype):
    p = _problem(shape, dtype)
    gpu, cpu = sf.run(p, backend="cuda"), sf.run(p, backend="numpy")
    assert gpu.traces.values.shape == cpu.traces.values.shape == (30, 3)
    assert np.isfinite(gpu.traces.values).all() and np.abs(cpu.traces.values).max() > 0
    scale = np.abs(cpu.traces.values).max()
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(gpu.traces.values, cpu.traces.values, rtol=0, atol=64 * eps * scale)
    np.testing.assert_array_equal(gpu.traces.steps, cpu.traces.steps)
