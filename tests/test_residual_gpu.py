"""The residual on the GPU has the numpy run's bits: its generated pass on fields laid out for sweeps (rows a pitch
apart, read where they lie) and on C-contiguous fields, its squares summed exactly on the device."""

from __future__ import annotations

import math

import numpy as np
import pytest

import stencilforge as sf
from stencilforge import problems
from stencilforge.backends.cuda import CudaBackend

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

from test_residual import timed_problem  # noqa: E402


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, shape", [("poisson2d", (37, 45)), ("poisson2d", (300, 257)), ("poisson3d", (19, 23, 30))])
def test_the_residual_on_cuda_has_the_numpy_runs_bits(name, shape, dtype):
    rng = np.random.default_rng(7)
    problem = problems.problem(name, shape, dtype)[0]
    values = rng.standard_normal(shape).astype(dtype)
    got = {}
    for backend in ("numpy", "cuda"):
        sim = sf.Simulation(problem, backend)
        sim.step(2)
        sim.set_field("u", values)
        got[backend] = sim.residual()
    assert got["cuda"] > 0 and math.isfinite(got["cuda"])
    assert got["cuda"] == got["numpy"]
    values, u = sim._residual[1], sim._slot(("u", 0))
    assert values.strides == u.strides  # the fields' layout (rows a pitch apart in 2D here), read without a copy


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_residual_of_the_time_and_the_coordinates_on_cuda_is_its_values_summed_exactly(dtype):
    """sin and exp differ from NumPy's by ulps on the device, so the values are the numpy run's to rounding; the
    norm of the values the device computed is exact."""
    import cupy as cp

    problem = timed_problem(dtype)
    got = {}
    for backend in ("numpy", "cuda"):
        sim = sf.Simulation(problem, backend)
        sim.step(5)
        got[backend] = sim.residual()
    values = cp.asnumpy(sim._residual[1][sim.lattice.interior]).astype(np.float64)
    assert got["cuda"] == math.sqrt(math.fsum((values * values).ravel())) / math.sqrt(math.prod(problem.grid.shape))
    assert got["cuda"] == pytest.approx(got["numpy"], rel=50 * np.finfo(dtype).eps)
