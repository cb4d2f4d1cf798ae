"""The `stencilforge` logger: choices (strategy, kernel cache, steps per pass) and fallbacks at INFO; -v shows them."""

import logging
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

import stencilforge as sf
from stencilforge import problems
from stencilforge.backends.cuda.tune import choose
from stencilforge.backends.numba.schedules.loop import LOOP_STEPS
from stencilforge.cli import app, join_multi_values


def invoke(*args):
    return CliRunner().invoke(app, join_multi_values([str(a) for a in args]))


@pytest.fixture
def info(caplog):
    caplog.set_level(logging.INFO, logger="stencilforge")
    return caplog


def messages(caplog, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


def test_the_library_adds_no_handlers():
    code = ("import logging, numpy as np, stencilforge as sf\n"
            "sf.apply(sf.Stencil.five_point(), np.ones((8, 8)), backend='numpy')\n"
            "print(len(logging.getLogger('stencilforge').handlers), len(logging.getLogger().handlers))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["0", "0"]


@pytest.mark.parametrize("problem, radius, strategy, reason", [
    ("heat3d", None, "rows", "a 3D stencil of radius 1"),
    ("wave3d", 3, "streaming", "a 3D stencil of radius 3"),
    ("wave3d", 8, "streaming_vec", "a 3D stencil of radius 8, vectors of cells fit"),
])
def test_auto_logs_the_strategy_it_picks_and_why(info, problem, radius, strategy, reason):
    step = problems.linear_step(problem, shape=(24, 24, 24), dtype="float64", **({"radius": radius} if radius else {}))
    picked, tile = choose(step.sweep, step.lattice.shape, step.lattice.dtype)
    assert picked == strategy
    assert messages(info, "stencilforge.backends.cuda.tune") == [
        f"strategy auto: {strategy} {tile} for the 3D sweep of {step.sweep.out} ({reason}; no tuned winner)"]


def test_steps_per_pass_used_or_not_and_why(info):
    problem = problems.problem("heat2d", shape=(16, 16), dtype="float64")[0]
    fused = sf.run(problem, steps=LOOP_STEPS + 1, backend="numba")
    assert messages(info, "stencilforge.simulation") == [f"heat2d: {LOOP_STEPS} steps per pass"]
    info.clear()
    single = sf.run(problem, steps=LOOP_STEPS + 1, backend="numba", fuse_steps=False)
    assert messages(info, "stencilforge.simulation") == ["heat2d: one step per pass: single steps were asked for"]
    np.testing.assert_array_equal(fused.fields["u"], single.fields["u"])


def test_a_fused_run_falling_back_to_single_steps_is_logged(info):
    grid = sf.Grid((8, 8, 8), spacing=(0.1, 0.1, 0.1), origin=(0.1, 0.1, 0.1), dtype="float64")
    u = sf.Field("u", grid)
    x, y, z = grid.coordinates
    wide = sf.Problem([sf.Eq(u.next, u + 1e-4 * sf.laplacian(u, order=6))], initial={u: sf.sin(x + y + z)},
                      boundary={u: sf.Dirichlet(0.0)}, dt=1e-4, steps=4, name="heat3d-r3")
    result = sf.run(wide, steps=4, backend="numba")  # its sweep has 19 row views: beyond the one vectorised loop a numba pair runs
    assert list(result.summary["sweeps"]) == ["u_next"] and not result.summary.get("fused_steps")
    assert [line for line in messages(info, "stencilforge.backends.numba.backend")
            if line.startswith("u_next: single steps, no fused kernel: numba's loop reads at most 16 row views")
            and line.endswith("; numba's march reads at most 16 row views (one vectorised loop), not 19")]
    assert messages(info, "stencilforge.simulation") == ["heat3d-r3: one step per pass: the numba backend has no fused kernel for it"]


def test_kernel_compiled_then_taken_from_the_cache(info, tmp_path, monkeypatch):
    monkeypatch.setenv("STENCILFORGE_CACHE_DIR", str(tmp_path))
    from stencilforge.backends.numba.backend import load_kernel

    source = "import numba\n\n@numba.njit(cache=True)\ndef kernel(x):\n    return x + %r\n" % float(np.random.default_rng().random())
    load_kernel(source)
    assert "new, compiled on first call" in messages(info, "stencilforge.backends.numba.backend")[-1]
    for name in [n for n in sys.modules if n.startswith("stencilforge_generated_")]:
        monkeypatch.delitem(sys.modules, name)  # as a new process finds it
    load_kernel(source)
    assert messages(info, "stencilforge.backends.numba.backend")[-1].endswith(": from the kernel cache")


@pytest.fixture
def cli_logging():
    """The CLI configures the `stencilforge` logger for its process: put it back for the other tests."""
    logger = logging.getLogger("stencilforge")
    level, handlers = logger.level, list(logger.handlers)
    yield
    logger.setLevel(level)
    logger.handlers[:] = handlers


def test_cli_verbose_shows_the_choices_on_stderr_and_quiet_does_not(cli_logging):
    args = ("run", "heat2d", "--shape", "16", "16", "--steps", str(LOOP_STEPS + 1), "--backend", "numba")
    quiet = invoke(*args)
    assert quiet.exit_code == 0 and "steps per pass" not in quiet.stderr
    loud = invoke("-v", *args)
    assert loud.exit_code == 0 and f"heat2d: {LOOP_STEPS} steps per pass" in loud.stderr
    assert "steps per pass" not in loud.stdout
    single = invoke("--verbose", *args, "--single-steps")
    assert "heat2d: one step per pass: single steps were asked for" in single.stderr
