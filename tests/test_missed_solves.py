"""A solve inside a step that misses its tolerance: counted, logged and shown, and the run goes on."""

import logging
import re
from pathlib import Path

import numpy as np

import stencilforge as sf
from stencilforge.convergence import load_problem_file

PROBLEM = Path(__file__).with_name("fixtures") / "missed_solve.py"
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
