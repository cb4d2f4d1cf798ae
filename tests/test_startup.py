"""Start-up: the bench's cold-start rows for problem files, what `import stencilforge` loads, and generated
passes reused from the disk cache by a later process (no recompilation, whatever the constants)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stencilforge.bench.coldstart import ProblemFile, _median_run, cold_start
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


def test_repeated_cold_starts_report_the_median_run_and_every_sample():
    row = cold_start(ProblemFile(HEAT9, (8, 8)), "numpy", repeats=3)
    for kind in ("cold", "warm"):
        times = row["samples"][kind]
        assert len(times) == 3 and row[kind]["to_first_step_s"] == sorted(times)[1]


@pytest.mark.parametrize("runs, chosen", [
    ([{"status": "ok", "to_first_step_s": t} for t in (3.0, 1.0, 2.0, 4.0)], 2.0),
    ([{"status": "ok", "to_first_step_s": 1.0}, {"status": "failed", "note": "x"}], None),
])
def test_the_median_run_is_the_lower_middle_one_and_a_failure_is_never_hidden(runs, chosen):
    assert _median_run(runs).get("to_first_step_s") == chosen


def test_cold_start_processes_can_be_denied_packages_as_on_an_install_without_them():
    row = cold_start(ProblemFile(HEAT9, (8, 8)), "numpy", hide=("numpy",))
    assert row["hidden"] == ["numpy"] and row["cold"]["status"] == row["warm"]["status"] == "failed"
    assert "numpy" in row["cold"]["note"]
    assert bench_options(HEAT9, None, None, "numpy", None, "none", True, without="scipy,h5py").cold_start_without == ("scipy", "h5py")


def test_cold_start_rows_survive_the_json_report():
    row = cold_start(ProblemFile(HEAT9, (8, 8)), "numpy")
    assert json.loads(json.dumps(row)) == row


def _python(code: str, *args: str, env: dict | None = None) -> str:
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                         env={**os.environ, **(env or {})})
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_import_stencilforge_loads_no_compiler_no_optional_package_and_no_seed_problem():
    loaded = set(json.loads(_python("import json, sys, stencilforge\nprint(json.dumps(sorted(sys.modules)))")))
    unused = {"numba", "llvmlite", "scipy", "matplotlib", "h5py", "mpi4py", "cupy", "typer", "rich",
              "stencilforge.backends.cuda", "stencilforge.solvers", "stencilforge.problems.heat", "stencilforge.problems.wave3d"}
    assert loaded & unused == set()


PASS_RUN = """
import json, sys
import stencilforge as sf

n, feed, dt = json.loads(sys.argv[1])
grid = sf.Grid((n, n), extent=1.0, dtype="float64")
u, v = sf.Field("u", grid), sf.Field("v", grid)
F, Du = sf.Constant("F", feed), sf.Constant("Du", 0.01)
uvv = u * v ** 2
problem = sf.Problem(
    [sf.Eq(u.next, u + dt * (Du * sf.laplacian(u) - uvv + F * (1 - u))), sf.Eq(v.next, v + dt * (uvv - (F + 0.06) * v))],
    initial={u: 1.0 - 0.5 * grid.x, v: 0.25 * grid.y}, boundary={u: sf.Periodic(), v: sf.Periodic()}, dt=dt, steps=2,
)
result = sf.run(problem, backend="numba")
import threading
for thread in threading.enumerate():  # a cold run's kernels compile in threads while NumPy steps: their counts too
    if thread.name == "stencilforge-compile":
        thread.join()
from stencilforge.backends.numba.backend import GATHER_CELLS, GATHER_CELLS_SERIAL, _kernel_path
gathers = {"stencilforge_generated_" + _kernel_path(g).stem[3:] for g in (GATHER_CELLS, GATHER_CELLS_SERIAL)}  # the walls'
kernels = [m.kernel for name, m in sys.modules.items() if name.startswith("stencilforge_generated_") and name not in gathers]
print(json.dumps({"kernels": len(kernels), "sum": float(result.fields["u"].sum()),
                  "hits": sum(sum(k.stats.cache_hits.values()) for k in kernels),
                  "misses": sum(sum(k.stats.cache_misses.values()) for k in kernels)}))
"""


def test_a_later_process_loads_the_compiled_pass_whatever_the_constants_shape_and_step(tmp_path):
    pytest.importorskip("numba")
    env = {"STENCILFORGE_CACHE_DIR": str(tmp_path / "sf"), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    first = json.loads(_python(PASS_RUN, json.dumps([12, 0.04, 0.1]), env=env))
    later = json.loads(_python(PASS_RUN, json.dumps([16, 0.05, 0.05]), env=env))
    assert first["kernels"] == later["kernels"] == 1
    assert (first["hits"], first["misses"]) == (0, 1)  # compiled once, on empty caches
    assert (later["hits"], later["misses"]) == (1, 0)  # loaded, not compiled
    assert first["sum"] != later["sum"]  # the new values were used
