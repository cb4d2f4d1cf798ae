"""CUDA graphs of several steps (`Simulation.build_graph`): a run replaying them gives single steps' bits, looks at
the state between them (checks, snapshots) as often as asked, and is refused where a step's launches change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.convergence import load_problem_file
from stencilforge.simulation import Simulation

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _host(arr):
    return arr.get() if hasattr(arr, "get") else np.asarray(arr)


def _example(name, shape, dtype="float64"):
    return load_problem_file(EXAMPLES / f"{name}.py").build(shape=shape, dtype=dtype)


def _walls_per_side3d():
    u = sf.Field("u", sf.Grid((20, 18, 33), extent=1.0, dtype="float64"))
    v = sf.Field("v", u.grid)
    rng = np.random.default_rng(3)
    return sf.Problem([sf.Eq(u.next, u + 1e-5 * sf.laplacian(u) * v), sf.Eq(v.next, v + 1e-5 * sf.laplacian(v) * u)],
                      initial={u: 1 + rng.random(u.grid.shape), v: 1 + rng.random(u.grid.shape)},
                      boundary={u: sf.Periodic(), v: ((sf.Dirichlet(0.5), sf.Neumann()), sf.Neumann(), sf.Periodic())},
                      dt=1.0, name="walls_per_side3d")


def _heat(shape, dtype="float32"):
    """A linear pass (the hand-scheduled sweeps; in 2D their five-step kernels) with walls at rest."""
    u = sf.Field("u", sf.Grid(shape, extent=1.0, dtype=dtype))
    return sf.Problem([sf.Eq(u.next, u + 0.2 * min(u.grid.spacing) ** 2 * sf.laplacian(u))],
                      initial={u: sf.sin(3.0 * u.grid.x) + 1}, boundary={u: sf.Dirichlet(0.25)}, dt=1.0, name="heat")


def _wave(shape):
    """Three time levels (leapfrog), a radius-2 star, Neumann walls."""
    u = sf.Field("u", sf.Grid(shape, extent=1.0, dtype="float32"), levels=3)
    c = 0.1 * min(u.grid.spacing) ** 2
    return sf.Problem([sf.Eq(u.next, 2 * u - u.prev + c * sf.laplacian(u, order=4))],
                      initial={u: sf.cos(4.0 * u.grid.x)}, boundary={u: sf.Neumann()}, dt=1.0, name="wave")


CASES = {
    "gray_scott 2D float32 (two-step kernels)": lambda: _example("gray_scott", (64, 80), "float32"),
    "heat 2D (five-step sweeps, Dirichlet walls)": lambda: _heat((96, 130)),
    "heat 3D float64 (sweeps)": lambda: _heat((20, 22, 40), "float64"),
    "wave 3D (three time levels)": lambda: _wave((24, 26, 40)),
    "cavity_jacobi (sf.Iterate: 52 passes a step)": lambda: _example("cavity_jacobi", (39, 39)),
    "walls per side, 3D": _walls_per_side3d,
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("check_every", [100, 7])
def test_a_run_replaying_graphs_gives_single_steps_bits(case, check_every):
    problem = CASES[case]()
    steps = 130
    result = sf.run(problem, backend="cuda", steps=steps, check_every=check_every)
    s = result.summary
    assert s["steps"] == steps and s["step"] == steps
    assert s["graph_steps"] and s["fused_steps"] >= s["graph_steps"]
    reference = Simulation(problem, "cuda")
    reference.step(steps)
    for name, arr in result.fields.items():
        assert np.array_equal(_host(arr), reference.field(name)), name


def test_snapshots_between_graphs_hold_single_steps_states(tmp_path):
    problem = _example("gray_scott", (48, 40), "float32")
    out = tmp_path / "gs.npz"
    result = sf.run(problem, backend="cuda", steps=60, out=str(out), snapshot_every=20, check_every=10)
    assert result.summary["graph_steps"]
    sim = Simulation(problem, "cuda")
    with np.load(out) as saved:
        steps, frames = list(saved["step"]), saved["fields/u"]
    assert steps[-3:] == [20, 40, 60]
    for frame, step in zip(frames[-3:], steps[-3:]):
        sim.step(step - sim.step_count)
        assert np.array_equal(frame, sim.field("u")), step
    assert np.array_equal(_host(result.fields["u"]), sim.field("u"))


@pytest.mark.parametrize("build, why", [
    (lambda: load_problem_file(EXAMPLES / "gray_scott.py").build_manufactured((32, 32)), "read t"),
    (lambda: _example("wave2d_sponge", (64, 64)), "point sources"),
    (lambda: _example("cavity", (31, 31)), "solves for"),
])
def test_no_graph_where_a_steps_launches_change(build, why):
    problem = build()
    sim = Simulation(problem, "cuda")
    assert why in (sim.graph_plan() or "")
    result = sf.run(problem, backend="cuda", steps=12, check_every=100)
    assert result.summary["graph_steps"] is None
