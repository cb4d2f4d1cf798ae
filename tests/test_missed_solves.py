"""A solve inside a step that misses its tolerance: counted and logged by default, the run goes on; with strict
solves the run stops after that step with its last state on disk (sf.run raises SolveMissed, the CLI exits 4)."""

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.convergence import load_problem_file
from stencilforge.errors import SolveMissed
from stencilforge.io import checkpoint
from stencilforge.io.series import open_series

PROBLEM = Path(__file__).with_name("fixtures") / "missed_solve.py"
SRC = str(Path(__file__).resolve().parents[1] / "src")
MISSED_AT = 6  # the fixture's one miss


def build(**options) -> sf.Problem:
    return load_problem_file(PROBLEM).build(**options)


def test_a_missed_solve_is_counted_logged_once_and_the_run_goes_on(caplog):
    with caplog.at_level(logging.WARNING, logger="stencilforge"):
        result = sf.run(build(), backend="numpy")
    s = result.summary
    solves = s["solves"]["p"]
    assert s["stop"] == "steps" and s["step"] == 20 and np.isfinite(result.fields["p"]).all()
    assert solves["solves"] == 20 and solves["missed"] == 1 and solves["first_miss"] == MISSED_AT
    assert solves["largest_residual"] > solves["tol"] == 1e-6
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"missed_solve: 1 of 20 solves for p missed tol 1e-06 (the first at step {MISSED_AT}; worst relative "
                        f"residual {solves['largest_residual']:.3e}); the run went on from their last iterates"]


def test_strict_solves_stop_after_the_missing_step_with_its_state():
    """The exception holds the state of the step that missed, the non-strict run's at that step, bit for bit."""
    with pytest.raises(SolveMissed) as info:
        sf.run(build(), backend="numpy", strict_solves=True)
    exc, went_on = info.value, sf.run(build(), steps=MISSED_AT, backend="numpy")
    assert exc.step == MISSED_AT and exc.what == "missed_solve: solve for p" and "\n" not in str(exc)
    assert exc.residual == went_on.summary["solves"]["p"]["largest_residual"] > 1e-6
    assert f"at step {MISSED_AT} did not reach tol 1e-06 (max_cycles 5)" in str(exc)
    assert exc.result.summary["stop"] == "solve" and exc.result.summary["step"] == MISSED_AT
    for name, arr in went_on.fields.items():
        assert np.array_equal(exc.result.fields[name], arr), name


def test_the_problems_own_strictness_applies_unless_the_run_says_otherwise():
    with pytest.raises(SolveMissed):
        sf.run(build(strict_solves=True), backend="numpy")
    assert sf.run(build(strict_solves=True), backend="numpy", strict_solves=False).summary["step"] == 20
    with pytest.raises(sf.StencilforgeError, match="strict_solves must be True or False, got 'no'"):
        sf.run(build(), backend="numpy", strict_solves="no")


def test_the_cli_exits_4_with_the_last_state_on_disk_and_a_resume_repeats_the_whole_run(tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "stencilforge.cli", "run", str(PROBLEM), "--backend", "numpy", "--strict-solves",
                           "--snapshot-every", "4", "--out", "run.h5", "--checkpoint-every", "4"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: missed_solve: solve for p: the relative residual ") and f"at step {MISSED_AT} " in line
    assert line.endswith(f"the run stopped after it (strict solves); 2 snapshot(s) in run.h5; checkpoint at step {MISSED_AT} "
                         "in run.ckpt.h5")
    went_on = sf.run(build(), steps=MISSED_AT, backend="numpy")
    saved = checkpoint.read(tmp_path / "run.ckpt.h5")
    assert saved.step == MISSED_AT
    with open_series(tmp_path / "run.h5") as series:
        assert list(series.steps) == [4, MISSED_AT]
        assert np.array_equal(series.frame("p", 1), went_on.fields["p"])
    whole = sf.run(build(), backend="numpy")
    resumed = sf.run(build(), steps=20 - MISSED_AT, backend="numpy", resume=str(tmp_path / "run.ckpt.h5"))
    for name, arr in whole.fields.items():
        assert np.array_equal(resumed.fields[name], arr), name


def test_the_progress_line_shows_the_solves_cycles_per_step_and_their_misses(monkeypatch, capsys):
    """sf.run's own display gets the loop's note; a function of the caller's is still called with three arguments."""
    from stencilforge import progress

    monkeypatch.setattr(progress.ProgressLines, "EVERY_S", 0.0)
    sf.run(build(), backend="numpy", progress=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("missed_solve: step ")]
    assert lines and re.fullmatch(r"missed_solve: step 20/20 \(100%\), .*, p [34](\.\d)? cycles/step, 1 missed", lines[-1]), lines
    calls = []
    sf.run(build(), steps=2, backend="numpy", progress=lambda done, total, residual: calls.append((done, total, residual)))
    assert calls[0] == (0, 2, None) and calls[-1] == (2, 2, None)
