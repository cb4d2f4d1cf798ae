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
    oracle = sf.run(problem, backend=NumpyBackend(), steps=STEPS, generated=True)
    sim = sf.Simulation(problem, CudaBackend())
    for levels in sim.levels.values():
        if len(levels) > 1:
            levels[-1][sim.lattice.interior] = cp.nan
    sim.step(STEPS)
    run = sf.run(problem, backend=CudaBackend(), steps=STEPS)
    solves = {"numpy": oracle.summary.get("solves"), "cuda": run.summary.get("solves")}  # cycles and residuals, if it fails
    for field, want in oracle.fields.items():
        for how, got in (("step", cp.asnumpy(sim.fields[field])), ("run", cp.asnumpy(run.fields[field]))):
            assert np.isfinite(got).all(), f"{name}.{field}: unwritten or non-finite cells"
            gap, most = float(np.abs(got - want).max()), bound(want, dtype, bool(problem.analysis.solves))
            assert gap <= most, f"{name}.{field} by {how}: {gap:.3g} from numpy, above {most:.3g}; solves {solves}"


@pytest.mark.parametrize("name, re, n, t_end", [("cavity", 100.0, 127, 12.0), ("cavity_staggered", 100.0, 128, 12.0),
                                                ("cavity_staggered", 1000.0, 256, 60.0)])
def test_cavity_on_cuda_matches_ghia(name, re, n, t_end):
    """The lid-driven cavity at steady state against Ghia, Ghia & Shin (1982), Tables I and II, at every tabulated
    point, within 0.02: collocated at Re = 100 on 129 x 129 nodes, staggered at Re = 100 on 128 x 128 cells and at
    Re = 1000 on 256 x 256 (the pressure solved to SOLVE_TOL every step). Measured on numba
    (`python benchmarks/cavity_ghia.py --example cavity_staggered`): Re = 1000 on 256², u 0.0036 and v 0.0149
    at most (the collocated scheme on 257² nodes: u 0.0243)."""
    cavity = example(name)
    result = sf.run(cavity.build((n, n), re=re, t_end=t_end), backend="cuda")
    gap_u, gap_v = cavity.ghia_gaps(cp.asnumpy(result.fields["u"]), cp.asnumpy(result.fields["v"]), re)
    assert gap_u.max() < 0.02 and gap_v.max() < 0.02, (gap_u, gap_v)
    assert result.summary["solves"]["p"]["missed"] == 0
