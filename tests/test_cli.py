"""The CLI: one JSON object with --json, one-line errors and non-zero exits for bad input."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from stencilforge.backends.cuda import CudaBackend
from stencilforge.cli import app, join_multi_values

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, join_multi_values(list(args)))


def test_join_multi_values():
    assert join_multi_values(["run", "heat3d", "--shape", "8", "9", "10", "--steps", "3"]) == [
        "run", "heat3d", "--shape", "8,9,10", "--steps", "3",
    ]


@pytest.mark.parametrize(
    "args,keys",
    [
        (["poisson2d", "--shape", "16", "16", "--tol", "1e-6"], {"residual", "converged", "iterations"}),
        (["heat2d", "--shape", "20", "24", "--steps", "5"], {"error"}),
        (["heat3d", "--shape", "8", "9", "10", "--steps", "5", "--dtype", "float64"], {"error"}),
        (["wave3d", "--shape", "18", "18", "18", "--steps", "3", "--radius", "4"], {"error"}),
        (["derivatives", "--shape", "30", "40", "--accuracy", "4", "--axis", "0"], {"error"}),
    ],
)
def test_run_json(args, keys):
    result = invoke("run", *args, "--json", "--backend", "numba")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    for key in ("problem", "backend", "shape", "dtype", "steps", "wall_s", "gcells_per_s", "teff_gbps", *keys):
        assert key in summary
    assert summary["backend"] == "numba"
    if "error" in keys:
        assert set(summary["error"]) >= {"max_abs", "rel_l2"}


def test_run_human_summary():
    result = invoke("run", "heat2d", "--shape", "16", "16", "--steps", "4", "--backend", "numpy")
    assert result.exit_code == 0
    assert "T_eff" in result.stdout and "error vs exact" in result.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "heat9d"], "unknown problem"),
        (["run", "heat2d", "--backend", "fortran"], "unknown backend"),
        pytest.param(
            ["run", "heat2d", "--backend", "cuda"],
            "not available",
            marks=pytest.mark.skipif(CudaBackend.available(), reason="this machine has a usable GPU"),
        ),
        (["run", "heat2d", "--shape", "0", "5"], "must be positive"),
        (["run", "heat2d", "--shape", "2", "5"], "too small"),
        (["run", "wave3d", "--shape", "8", "8", "8"], "too small"),
        (["run", "heat2d", "--shape", "16", "16", "--dt", "1"], "largest stable dt"),
        (["run", "heat2d", "--steps", "-2"], "non-negative"),
        (["run", "poisson2d", "--tol", "0"], "positive"),
        (["run", "poisson2d", "--tol", "-1e-3"], "positive"),
        (["run", "heat2d", "--tol", "1e-3"], "poisson2d only"),
        (["run", "heat2d", "--radius", "2"], "does not take"),
        (["run", "heat2d", "--dtype", "float16"], "unsupported dtype"),
        (["run", "wave3d", "--velocity", "missing.npy"], "cannot read velocity file"),
        (["run", "heat2d", "--strategy", "tiled", "--backend", "numpy"], "cuda backend"),
    ],
)
def test_bad_input_is_one_line(args, message):
    result = invoke(*args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr


def test_bad_velocity_file(tmp_path):
    bad = np.ones((18, 18, 18))
    bad[0, 0, 0] = np.inf
    path = tmp_path / "v.npy"
    np.save(path, bad)
    result = invoke("run", "wave3d", "--shape", "18", "18", "18", "--velocity", str(path))
    assert result.exit_code == 2 and "NaN, Inf" in result.stderr


def test_verify_quick_passes():
    result = invoke("verify", "--backend", "numpy", "--quick")
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.stdout


def test_info_lists_backends():
    result = invoke("info")
    assert result.exit_code == 0 and "numba" in result.stdout


def test_console_entry_point_runs_a_job():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", "from stencilforge.cli import main; main()",
         "run", "heat2d", "--shape", "12", "12", "--steps", "2", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["shape"] == [12, 12]


def test_version_and_short_help():
    from stencilforge import __version__

    res = invoke("--version")
    assert res.exit_code == 0 and res.stdout.strip() == f"stencilforge {__version__}"
    assert invoke("-h").exit_code == 0 and "Usage" in invoke("-h").stdout
    assert "--snapshot-every" in invoke("run", "-h").stdout


def test_compile_time_is_reported_apart_from_stepping():
    from stencilforge import problems
    from stencilforge.cli import LazyProgress
    from stencilforge.runner import run_with

    events = []
    problem = problems.problem("heat2d", shape=(16, 16))[0]
    summary = run_with(problem, None, steps=3, backend="numba", status=lambda text: events.append(("status", text)),
                       progress=lambda done, total, residual: events.append(("progress", done))).summary
    assert events[:3] == [("status", "compiling kernels (first run only)"), ("status", None), ("progress", 0)]
    assert summary["compile_s"] > 0 and "wall_s" in summary
    bar = LazyProgress("heat2d")
    created = bar.start
    bar(0, 10, None)  # stepping starts: the rate's clock restarts
    assert bar.start > created


def test_show_kernel_prints_a_problem_files_generated_code(tmp_path):
    """A user's own equation: each generated pass as a run compiles it (its schedule, and on CUDA the two-step kernel
    where the run fuses steps), for cuda and numba; a 1D linear equation shows the generated pass cuda runs it as."""
    from pathlib import Path

    from stencilforge.backends.cuda.compile import compile_cubin
    from stencilforge.printers.cuda import OPTIONS

    gray_scott = str(Path(__file__).resolve().parents[1] / "examples" / "gray_scott.py")
    cuda = runner.invoke(app, ["show-kernel", gray_scott, "--shape", "48,40"])
    assert cuda.exit_code == 0, cuda.output
    assert "// pass 1: u_next, v_next" in cuda.stdout and "void sf_pass(" in cuda.stdout and " sf_pair(" in cuda.stdout
    numba = runner.invoke(app, ["show-kernel", gray_scott, "--backend", "numba", "--shape", "48,40"])
    assert numba.exit_code == 0 and "# pass 1: u_next, v_next" in numba.stdout and "def kernel(" in numba.stdout
    (tmp_path / "line.py").write_text(
        "import stencilforge as sf\n\n\ndef build(shape=None, dtype='float64'):\n"
        "    grid = sf.Grid(shape or (81,), extent=2.0, dtype=dtype)\n    u = sf.Field('u', grid)\n"
        "    return sf.Problem([sf.Eq(u.next, u - 0.2 * sf.upwind(u, 'x', 1.0) + 0.01 * sf.laplacian(u))],\n"
        "                      initial={u: sf.sin(grid.x)}, boundary={u: sf.Periodic()}, dt=0.01)\n")
    line = runner.invoke(app, ["show-kernel", str(tmp_path / "line.py")])
    assert line.exit_code == 0 and line.stdout.count("void sf_pass(") == 1, line.output
    try:
        compiled = compile_cubin(line.stdout.split("\n", 1)[1], "sm_90", "a 1D pass", OPTIONS)
    except Exception as exc:  # NVRTC is a test extra; without it the source is still shown
        pytest.skip(f"NVRTC: {exc}")
    assert compiled[:4] == b"\x7fELF"
    heat9 = str(Path(__file__).resolve().parents[1] / "examples" / "heat9.py")
    swept = runner.invoke(app, ["show-kernel", heat9, "--shape", "48,48", "--strategy", "rows"])
    assert swept.exit_code == 0 and "pass 1: u_next, a sweep, strategy rows" in swept.stdout and "sf_rows_u_next(" in swept.stdout
    refused = runner.invoke(app, ["show-kernel", gray_scott, "--strategy", "tiled"])
    assert refused.exit_code == 2 and "has neither: its passes run as generated kernels" in refused.output


def test_a_problem_file_and_a_named_problem_print_one_summary_format():
    """The same rows for both (no boxed table for one of them), and a small run's throughput reads as more than 0.000."""
    from pathlib import Path

    heat9 = str(Path(__file__).resolve().parents[1] / "examples" / "heat9.py")
    named = invoke("run", "heat2d", "--shape", "16", "16", "--steps", "4", "--backend", "numpy")
    own = invoke("run", heat9, "--shape", "16,16", "--steps", "4", "--backend", "numpy")
    for result in (named, own):
        assert result.exit_code == 0, result.output
        rows = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
        assert rows[:5] == ["problem", "backend", "parameters", "steps", "time"], rows
        assert "0.000 GCell/s" not in result.stdout and "┃" not in result.stdout and "│" not in result.stdout
    assert "heat9 (" in own.stdout and "error vs exact" in own.stdout


def test_progress_without_a_terminal_is_a_line_every_few_seconds(monkeypatch, capsys):
    """A batch job's log (stderr not a terminal) gets lines with the step, the share done, the rate and the time
    left; sf.run(progress=True) chooses them there, and a bar where someone watches."""
    import stencilforge as sf
    from stencilforge import progress
    from stencilforge.problems.heat import problem

    monkeypatch.setattr(progress.ProgressLines, "EVERY_S", 0.0)
    sf.run(problem(2, (24, 24)), steps=30, backend="numpy", progress=True, generated=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("heat2d: step ")]
    assert lines and "/30 (" in lines[-1] and "steps/s" in lines[-1] and "s left" in lines[-1], lines
    monkeypatch.setattr(progress, "watching", lambda: True)
    assert isinstance(progress.reporter("x"), progress.LazyProgress)


def test_a_problem_files_run_takes_the_loop_options_a_named_problem_takes(monkeypatch):
    """--stall-checks and --halo reach the run of a problem file (they were ignored there); --overlap, which only
    the old runner of the named problems had, is no option of run."""
    from pathlib import Path

    import stencilforge.runner

    seen = {}

    def run_with(problem, outputs, **kw):
        seen.update(kw)
        raise SystemExit(0)

    monkeypatch.setattr(stencilforge.runner, "run_with", run_with)
    heat9 = str(Path(__file__).resolve().parents[1] / "examples" / "heat9.py")
    invoke("run", heat9, "--shape", "16,16", "--steps", "4", "--backend", "numpy", "--stall-checks", "3", "--halo", "host")
    assert seen["stall_checks"] == 3 and seen["halo"] == "host"
    refused = invoke("run", heat9, "--shape", "16,16", "--overlap")
    assert refused.exit_code == 2 and "No such option" in refused.output and "--overlap" in refused.output
