"""sf.Solve on the GPU against the numpy run: the Poisson form on the multigrid's CUDA kernels, the screened
form on CuPy's array kernels, the fields staying on the device."""

from __future__ import annotations

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

import cupy as cp  # noqa: E402

from test_solve import poisson_problem  # noqa: E402


@pytest.mark.parametrize("a, b, kernels", [(0.0, -1.0, "CudaKernels"), (1.0, 0.01, "ArrayKernels")])
@pytest.mark.parametrize("walls", [("dirichlet", "dirichlet"), ("neumann", "neumann"), ("periodic", "dirichlet")])
def test_solve_on_cuda_matches_numpy(walls, a, b, kernels):
    problem, _ = poisson_problem(walls, a=a, b=b, steps=2)
    want = sf.run(problem, backend="numpy").fields["p"]
    sim = sf.Simulation(problem, CudaBackend())
    sim.step(2)
    got = sim.fields["p"]
    assert isinstance(got, cp.ndarray) and type(sim.solvers["p"].kernels).__name__ == kernels
    assert float(np.abs(cp.asnumpy(got) - want).max()) <= 1e-9 * float(np.abs(want).max())
