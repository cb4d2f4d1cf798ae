"""Sources and receivers on the cuda backend: the injection and recording are array operations on CuPy
(`points.py`), the ones numpy runs, so the traces agree with numpy's to the rounding of the steps between them
(2D and 3D heat, points between nodes and on them, linear and nearest, float32 and float64)."""

from __future__ import annotations

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.distributed.decomposition import BlockGrid
from stencilforge.grid import Grid as Lattice
from stencilforge.points import Recording

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


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_the_receivers_kernel_gives_the_host_gathers_bits(dtype):
    """One launch on the GPU (`points._gather_kernel`) records what numpy's gathers and left-to-right sums record,
    bit for bit: linear, nearest and sinc receivers, on the whole grid and on a block (a cell's term each), over
    random values in the field's storage dtype (float16 as half storage keeps it), from a dense field and from one
    with gaps between its rows (as the cuda backend pitches them)."""
    import cupy

    grid = sf.Grid((19, 23, 17), extent=1.0)
    u = sf.Field("u", grid)
    rng = np.random.default_rng(7)
    kinds = ["linear", "nearest", "sinc"]
    receivers = [sf.Receiver(u, tuple(rng.uniform(0.3, 0.7, 3)), kinds[r % 3]) for r in range(30)]
    receivers.append(sf.Receiver(u, tuple(grid.origin[a] + 5 * grid.spacing[a] for a in range(3))))  # on a node
    p = sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u))], boundary={u: sf.Dirichlet(0.0)}, receivers=receivers)
    whole = Lattice(grid.shape, grid.spacing, grid.dtype, 1, grid.origin)
    block = BlockGrid((8, 23, 17), grid.spacing, np.dtype(np.float64), 1, grid.origin, start=(9, 0, 0))
    for lattice, is_whole in ((whole, True), (block, False)):
        field = rng.standard_normal(lattice.padded_shape).astype(dtype)
        host = Recording(p, lattice, np, np.asarray, whole=is_whole)
        device = Recording(p, lattice, cupy, cupy.asnumpy, whole=is_whole)
        pitched = cupy.zeros(field.shape[:-1] + (field.shape[-1] + 5,), dtype=dtype)[..., 2:-3]  # rows with gaps
        pitched[...] = cupy.asarray(field)
        dense = cupy.asarray(field)
        host.record(1, lambda name, a=field: a)
        device.record(1, lambda name, a=dense: a)
        device.record(2, lambda name, a=pitched: a)
        assert device.columns == host.columns and len(host.columns) > 0
        a, b = host.rows.host(), device.rows.host()
        assert np.isfinite(a).all() and b.shape == (2, a.shape[1])
        np.testing.assert_array_equal(b.view(np.uint64), np.concatenate([a, a]).view(np.uint64))
