"""Crashes and signals: kill -9 at random moments, SIGTERM/SIGINT, full disks, a second run writing the same files;
what is on disk must stay readable."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from stencilforge.io import checkpoint

SRC = str(Path(__file__).resolve().parents[1] / "src")
LONG_RUN = ["run", "heat2d", "--shape", "48,40", "--backend", "numpy", "--steps", "100000000",
            "--snapshot-every", "2", "--out", "run.h5", "--checkpoint-every", "3"]


def start(cwd, *args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "stencilforge.cli", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_progress(path: Path, proc, beyond: int, timeout=30.0):
    """Wait until the running process has written a snapshot after step `beyond`."""
    end = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"no snapshot after step {beyond} in {path}"
        try:
            with h5py.File(path, "r") as f:
                if len(f["step"]) and f["step"][-1] > beyond:
                    return
        except (OSError, KeyError):  # not created yet
            pass
        time.sleep(0.01)


def plain_steps(path: Path) -> list[int]:
    """Open with plain h5py (no SWMR) and read every complete snapshot (entries before a -1 fill value)."""
    with h5py.File(path, "r") as f:
        steps = list(f["step"][:])
        if -1 in steps:
            steps = steps[: steps.index(-1)]
        assert f["fields/u"].shape[0] >= len(steps)
        for i in range(len(steps)):
            assert np.isfinite(f["fields/u"][i]).all()
    return steps


def steps_while_running(path: Path, attempts=5) -> list[int]:
    """A reader racing a write can meet a half-written state (documented); the next open must succeed."""
    for _ in range(attempts - 1):
        try:
            return plain_steps(path)
        except OSError:
            time.sleep(0.02)
    return plain_steps(path)


def temps(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if ".tmp" in p.name)


def test_kill_9_at_random_moments_leaves_readable_files_and_resume_continues(tmp_path):
    rng = random.Random(21)
    proc = start(tmp_path, *LONG_RUN)
    ckpt = tmp_path / "run.ckpt.h5"
    seen = []
    last = 0
    for _ in range(3):
        wait_for_progress(tmp_path / "run.h5", proc, last)
        end = time.monotonic() + 30.0
        while not ckpt.exists():  # the first kill lands after the first checkpoint (step 3), not between it and snapshot 2
            assert proc.poll() is None and time.monotonic() < end, "no checkpoint written"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
        assert steps_while_running(tmp_path / "run.h5")  # readable while the run goes on
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        steps = plain_steps(tmp_path / "run.h5")
        assert steps == list(range(2, 2 * len(steps) + 1, 2)), steps
        state = checkpoint.read(ckpt)  # complete, checksums intact
        assert state.step % 3 == 0 and state.step > (seen[-1] if seen else 0) - 3
        seen.append(state.step)
        last = steps[-1]
        proc = start(tmp_path, "run", "--resume", ckpt, "--backend", "numpy", "--steps", "100000000",
                     "--snapshot-every", "2", "--out", "run.h5", "--checkpoint-every", "3")
    wait_for_progress(tmp_path / "run.h5", proc, last)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert temps(tmp_path) == []  # the stale temporary files of the killed runs are gone
    assert not list(tmp_path.glob(".*.lock"))  # the killed runs' lock files were taken over and removed
    steps = plain_steps(tmp_path / "run.h5")
    final = checkpoint.read(ckpt).step
    assert f"stopped by SIGTERM at step {final}" in err
    assert steps[-1] == final and steps == sorted(set(steps))


HEAT_FILE = """
import stencilforge as sf


def build(shape=None, dtype="float64"):
    grid = sf.Grid(shape or (48, 40), extent=1.0, dtype=dtype)
    u, dt = sf.Field("u", grid), 0.2 * min(grid.spacing) ** 2
    return sf.Problem([sf.Eq(u.next, u + dt * (sf.laplacian(u) + u * u))], initial={u: sf.sin(3 * grid.x) * grid.y},
                      boundary={u: sf.Dirichlet(0.0)}, dt=dt, name="heat_file")
"""


@pytest.mark.parametrize("problem", ["heat2d", "heat_file.py"])
@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signals_finish_the_step_and_write_the_final_state(tmp_path, sig, status, problem):
    """A named problem and a problem file of the user's own (not the one-linear-equation kind): the last step is the
    final snapshot and checkpoint, and one line says where they are."""
    (tmp_path / "heat_file.py").write_text(HEAT_FILE)
    proc = start(tmp_path, "run", problem, "--shape", "48,40", "--backend", "numpy", "--steps", "100000000",
                 "--snapshot-every", "50", "--out", "run.h5", "--checkpoint-every", "1000000")
    wait_for_progress(tmp_path / "run.h5", proc, 0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"stopped by {sig.name} at step "), err
    step = int(lines[0].split("at step ")[1].split(";")[0])
    assert f"checkpoint at step {step} in run.ckpt.h5" in lines[0]
    steps = plain_steps(tmp_path / "run.h5")
    assert step > 0 and steps[-1] == step and steps[:-1] == list(range(50, step, 50))
    assert checkpoint.read(tmp_path / "run.ckpt.h5").step == step


@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)])
def test_signals_stop_sf_run_in_a_script_after_writing_the_final_state(tmp_path, sig, status):
    """`sf.run` from a script: the final state is written and logged, then the signal acts as it would have
    (SIGTERM ends the process, SIGINT raises KeyboardInterrupt, which Python ends with SIGINT)."""
    (tmp_path / "heat_file.py").write_text(HEAT_FILE)
    script = ("import sys; sys.path.insert(0, '.'); import heat_file, stencilforge as sf\n"
              "sf.run(heat_file.build(), backend='numpy', steps=100000000, out='run.h5', snapshot_every=50,"
              " checkpoint='run.ckpt.h5', checkpoint_every=1000000)\n")
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for_progress(tmp_path / "run.h5", proc, 0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    assert ("KeyboardInterrupt" in err) == (sig == signal.SIGINT), err
    (line,) = [x for x in err.splitlines() if x.startswith("stopped by")]
    step = int(line.split("at step ")[1].split(";")[0])
    assert plain_steps(tmp_path / "run.h5")[-1] == step
    assert checkpoint.read(tmp_path / "run.ckpt.h5").step == step


def test_a_step_entry_cut_off_by_a_crash_is_not_counted(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from stencilforge.cli import app
    from stencilforge.io.series import open_series

    monkeypatch.chdir(tmp_path)
    run = ["run", "heat2d", "--shape", "16,12", "--backend", "numpy", "--snapshot-every", "5", "--out", "run.h5"]
    assert CliRunner().invoke(app, [*run, "--steps", "10", "--checkpoint-every", "10"]).exit_code == 0
    with h5py.File("run.h5", "r+") as f:  # the grown /step of a third snapshot whose value never landed
        f["step"].resize(3, axis=0)
        assert list(f["step"][:]) == [5, 10, -1]
    with open_series(tmp_path / "run.h5") as series:
        assert list(series.steps) == [5, 10]
    assert CliRunner().invoke(app, ["run", "--resume", "run.ckpt.h5", "--steps", "5", "--backend", "numpy",
                                    "--snapshot-every", "5", "--out", "run.h5"]).exit_code == 0
    assert plain_steps(tmp_path / "run.h5") == [5, 10, 15]
    with h5py.File("run.h5", "r") as f:
        assert list(f["step"][:]) == [5, 10, 15]


def test_a_second_run_writing_the_same_files_is_refused_while_the_first_runs(tmp_path):
    """Two runs writing one file crashed HDF5 (a segfault) or reported snapshots the other had replaced;
    the second is refused in one line, `--overwrite` or not, and the first reports what its file holds."""
    first = start(tmp_path, *LONG_RUN, "--json")
    others = []
    try:
        wait_for_progress(tmp_path / "run.h5", first, 0)
        short = ["run", "heat2d", "--shape", "48,40", "--backend", "numpy", "--steps", "40", "--snapshot-every", "2",
                 "--checkpoint-every", "3", "--overwrite"]
        others = [(start(tmp_path, *short, "--out", "run.h5", "--checkpoint", "other.ckpt.h5"), "snapshot file run.h5"),
                  (start(tmp_path, *short, "--out", "other.h5", "--checkpoint", "run.ckpt.h5"), "checkpoint run.ckpt.h5")]
        for proc, what in others:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 2, err
            assert err.splitlines() == [f"error: {what} is being written by another run; wait for it to end or choose another file"]
            assert out == ""
        assert first.poll() is None  # refused because the first holds the files, not after it ended
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=30)
        assert first.returncode == 143, err
    finally:
        for proc in (first, *(proc for proc, _ in others)):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    reported = json.loads(out)["outputs"]
    steps = plain_steps(tmp_path / "run.h5")
    # every second step, then the step SIGTERM stopped it at (odd or even), as the final state
    assert reported["snapshots"]["count"] == len(steps) > 1 and steps[:-1] == list(range(2, 2 * len(steps) - 1, 2))
    assert steps[-1] == json.loads(out)["step"] and steps[-2] < steps[-1] <= steps[-2] + 2
    assert checkpoint.read(tmp_path / "run.ckpt.h5").step == reported["checkpoint"]["step"] == steps[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.ckpt.h5", "run.h5", "run.xmf"]  # nothing of the refused runs, no lock
