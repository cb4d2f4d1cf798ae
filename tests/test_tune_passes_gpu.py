"""Tuning a generated pass on a GPU: every schedule gives the default's bits, the winner is cached, and `auto`
takes it in a later run (same bits)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import stencilforge as sf
from stencilforge.backends import get_backend
from stencilforge.backends.cuda import CudaBackend
from stencilforge.bench.measure import MeasureOptions
from stencilforge.bench.tune import tune_passes
from stencilforge.cli import app
from stencilforge.convergence import load_problem_file
from stencilforge.simulation import Simulation

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _coupled3d(dtype):
    u = sf.Field("u", sf.Grid((20, 18, 33), extent=1.0, dtype=dtype))
    v = sf.Field("v", u.grid)
    rng = np.random.default_rng(3)
    return sf.Problem([sf.Eq(u.next, u + 1e-5 * sf.laplacian(u) * v), sf.Eq(v.next, v + 1e-5 * sf.laplacian(v) * u)],
                      initial={u: 1 + rng.random(u.grid.shape), v: 1 + rng.random(u.grid.shape)},
                      boundary={u: sf.Periodic(), v: (sf.Dirichlet(0.5), sf.Neumann(), sf.Periodic())}, dt=1.0, name="coupled3d")


def _nonlinear1d():
    u = sf.Field("u", sf.Grid((301,), extent=1.0, dtype="float64"))
    return sf.Problem([sf.Eq(u.next, u + 1e-6 * sf.laplacian(u) * u)], initial={u: 1 + sf.sin(6.0 * u.grid.x)},
                      boundary={u: (sf.Dirichlet(1.0), sf.Neumann())}, dt=1.0, name="nonlinear1d")


CASES = {
    "gray_scott 2D float32": lambda: load_problem_file(EXAMPLES / "gray_scott.py").build(shape=(96, 70), dtype="float32"),
    "nonlinear 1D float64": _nonlinear1d,
    "coupled 3D float64": lambda: _coupled3d("float64"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_schedule_gives_the_defaults_bits_and_auto_takes_the_winner(case, tmp_path, monkeypatch, caplog):
    problem = CASES[case]()
    monkeypatch.setenv("STENCILFORGE_CACHE_DIR", str(tmp_path / "none"))
    default = Simulation(problem, get_backend("cuda"))
    default.step(7)
    monkeypatch.setenv("STENCILFORGE_CACHE_DIR", str(tmp_path / "tuned"))
    results = tune_passes(problem, budget_s=6.0, measure=MeasureOptions(repeats=3, target_s=0.002))
    assert results
    for result in results:
        statuses = [r["status"] for r in result.rows]
        assert "wrong" not in statuses and statuses.count("ok") >= 2
        assert result.winner is result.rows[0] and sum(r["default"] for r in result.rows) == 1
    with caplog.at_level(logging.INFO, logger="stencilforge.backends.cuda.backend"):
        tuned = Simulation(problem, get_backend("cuda"))
    assert caplog.text.count("the schedule `stencilforge tune` stored") == len(results)
    tuned.step(7)
    for name in default.fields:
        assert np.array_equal(tuned.field(name), default.field(name)), name


def test_tune_of_a_file_with_generated_passes_only(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCILFORGE_CACHE_DIR", str(tmp_path))
    done = CliRunner().invoke(app, ["tune", str(EXAMPLES / "gray_scott.py"), "--shape", "128,128", "--budget", "2"])
    assert done.exit_code == 0, done.output
    assert "winner:" in done.output and "(default)" in done.output and "cached as" in done.output
