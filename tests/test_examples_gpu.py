"""Every example on the GPU against the numpy oracle: generated passes with NaN-poisoned new levels,
and sf.run's own path (a pass of one linear equation as the backend's sweep)."""

from __future__ import annotations

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.simulation import SOLVE_TOL

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

import cupy as cp  # noqa: E402

from test_examples import NAMES, example  # noqa: E402

STEPS = 12
SHAPES = {2: (41, 41), 3: (13, 17, 19)}  # heat9 needs equal spacings


def small(name, dtype):
    module = example(name)
    ndim = module.build().grid.ndim
    return module.build(shape=SHAPES[ndim], dtype=dtype)


def bound(ref, dtype, solves: bool):
    """Rounding of STEPS steps; with a solve, its tolerance (each side stops anywhere below it)."""
    unit = {"float32": 2.0**-24, "float64": 2.0**-53}[dtype]
    return (SOLVE_TOL[dtype] if solves else 64 * STEPS * unit) * max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_example_on_cuda_matches_numpy(name, dtype):
    problem = small(name, dtype)
    ref = sf.run(problem, backend=NumpyBackend(), steps=STEPS, generated=True).fields
    sim = sf.Simulation(problem, CudaBackend())
    for levels in sim.levels.values():
        if len(levels) > 1:
            levels[-1][sim.lattice.interior] = cp.nan
    sim.step(STEPS)
    via_run = sf.run(problem, backend=CudaBackend(), steps=STEPS).fields
    for field, want in ref.items():
        for got in (cp.asnumpy(sim.fields[field]), cp.asnumpy(via_run[field])):
            assert np.isfinite(got).all(), f"{name}.{field}: unwritten or non-finite cells"
            assert float(np.abs(got - want).max()) <= bound(want, dtype, bool(problem.analysis.solves)), (name, field)
