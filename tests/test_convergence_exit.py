"""--tol runs that do not converge: a distinct exit status, one line, and a stall check that stops them early."""

import json

import h5py
from typer.testing import CliRunner

from stencilforge import problems
from stencilforge.cli import NOT_CONVERGED, app
from stencilforge.runner import run_with

POISSON = ["run", "poisson2d", "--shape", "16,16", "--backend", "numpy", "--method", "jacobi"]


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_hitting_the_iteration_cap_exits_3_with_one_line():
    res = invoke(*POISSON, "--tol", "1e-10", "--steps", "300", "--json")
    assert res.exit_code == NOT_CONVERGED == 3
    assert json.loads(res.stdout)["converged"] is False
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("not converged: residual") and "iteration limit of 300" in lines[0]


def test_a_stalled_residual_stops_the_run_early_and_says_so(tmp_path):
    ckpt = tmp_path / "p.h5"
    res = invoke(*POISSON, "--dtype", "float32", "--tol", "1e-12", "--check-every", "50", "--stall-checks", "10",
                 "--checkpoint-every", "1000000", "--checkpoint", ckpt, "--json")
    assert res.exit_code == 3
    summary = json.loads(res.stdout)
    assert summary["stop"] == "stalled" and summary["iterations"] < 20_000  # the cap is 200,000
    assert "residual stopped falling" in res.stderr
    with h5py.File(ckpt, "r") as f:
        assert f.attrs["step"] == summary["iterations"]  # the final state was kept


def test_converged_runs_exit_0():
    assert invoke(*POISSON, "--tol", "1e-4").exit_code == 0


def test_the_stall_check_can_be_turned_off():
    problem = problems.problem("poisson2d", shape=(16, 16), dtype="float32")[0]
    loop = dict(steps=6000, tol=1e-12, check_every=50, backend="numpy")
    assert run_with(problem, None, stall_checks=0, **loop).summary["iterations"] == 6000
    stalled = run_with(problem, None, stall_checks=10, **loop)
    assert stalled.summary["stop"] == "stalled" and stalled.summary["iterations"] < 6000


def test_unconverged_multigrid_exits_3_with_one_line():
    res = invoke("run", "poisson2d", "--shape", "33,33", "--backend", "numpy", "--tol", "1e-14", "--steps", "1", "--json")
    assert res.exit_code == NOT_CONVERGED
    assert json.loads(res.stdout)["converged"] is False
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("not converged: residual") and "1 cycle" in lines[0]
