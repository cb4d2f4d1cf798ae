"""Start-up: the bench's cold-start rows for problem files, what `import stencilforge` loads, and generated
passes reused from the disk cache by a later process (no recompilation, whatever the constants)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stencilforge.bench.coldstart import ProblemFile, cold_start
from stencilforge.bench.options import bench_options
from stencilforge.errors import StencilforgeError

HEAT9 = str(Path(__file__).resolve().parents[1] / "examples" / "heat9.py")


def test_cold_start_of_a_problem_file_times_each_phase_in_fresh_processes():
    row = cold_start(ProblemFile(HEAT9, (12, 12)), "numpy")
    assert (row["problem"], row["file"], row["shape"], row["dtype"]) == ("heat9", HEAT9, [12, 12], "float64")
    for run in (row["cold"], row["warm"]):
        assert run["status"] == "ok", run
        parts = ("import_s", "setup_s", "compile_s", "first_step_s")
        assert run["to_first_step_s"] == pytest.approx(sum(run[k] for k in parts))
        assert run["first_steps"] in (1, 2) and run["shape"] == [12, 12]


def test_a_problem_file_without_a_shape_reports_the_shape_its_build_chose(tmp_path):
    path = tmp_path / "tiny.py"
    path.write_text(f"import runpy\nbuild = runpy.run_path({str(HEAT9)!r})['build']\n_b = build\n"
                    "def build(shape=None, dtype='float64'):\n    return _b(shape or (10, 10), dtype)\n")
    row = cold_start(ProblemFile(str(path)), "numpy")
    assert row["cold"]["status"] == "ok", row["cold"]
    assert row["shape"] == [10, 10] and row["label"] == "tiny default float64"


def test_bench_takes_problem_files_as_cold_start_rows_only():
    opts = bench_options(f"{HEAT9},heat2d", ["heat9=8x8", "2d=16x16"], None, "numpy", None, "none", True)
    assert [w.name for w in opts.workloads] == ["heat2d"] and [w.name for w in opts.loops] == ["heat2d"]
    assert opts.cold_start == (ProblemFile(HEAT9, (8, 8), "float64"),)  # --quick: no seed-problem cold starts
    only = bench_options(HEAT9, None, "float32", "numpy", None, "none", False, time_loop=False)
    assert only.workloads == () and only.loops == () and only.cold_start == (ProblemFile(HEAT9, None, "float32"),)


@pytest.mark.parametrize("problems, cold, message", [
    ("nothing.py", None, "does not exist"),
    (HEAT9, False, "drop --no-cold-start"),
])
def test_bench_refuses_problem_files_it_cannot_time(problems, cold, message):
    with pytest.raises(StencilforgeError, match=message):
        bench_options(problems, None, None, "numpy", None, "none", True, cold_start=cold)


def test_cold_start_rows_survive_the_json_report():
    row = cold_start(ProblemFile(HEAT9, (8, 8)), "numpy")
    assert json.loads(json.dumps(row)) == row
