"""Checkpoints and resume for problems that run as generated passes: N steps in one run equal
N/2, a checkpoint, and N/2 resumed from it, bit for bit, on numpy and numba."""

from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

import stencilforge as sf
from stencilforge.cli import app, join_multi_values
from stencilforge.convergence import load_problem_file
from stencilforge.errors import StencilforgeError

EXAMPLES = Path(__file__).parents[1] / "examples"
CASES = {
    "gray_scott": (24, 20),  # two fields of two time levels, periodic
    "wave2d_sponge": (21, 23),  # three time levels, a one-level damping field, a point source
}
STEPS = 24


def build(name: str):
    return load_problem_file(EXAMPLES / f"{name}.py").build(shape=CASES[name])


def run(name: str, backend: str, steps: int, **files) -> sf.Result:
    return sf.run(build(name), steps=steps, backend=backend, generated=True, check_every=5, **files)


def levels(path: Path) -> dict[str, bytes]:
    with h5py.File(path, "r") as f:
        return {name: ds[...].tobytes() for name, ds in f["fields"].items()}


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("name", list(CASES))
def test_resumed_run_equals_the_straight_run_bitwise(tmp_path, name, backend):
    straight = run(name, backend, STEPS, checkpoint=str(tmp_path / "straight.h5"), checkpoint_every=STEPS // 2)
    half = run(name, backend, STEPS // 2, checkpoint=str(tmp_path / "half.h5"), checkpoint_every=STEPS // 2)
    assert half.summary["outputs"]["checkpoint"]["step"] == STEPS // 2
    resumed = run(name, backend, STEPS // 2, resume=str(tmp_path / "half.h5"))
    assert resumed.summary["step"] == STEPS and resumed.summary["steps"] == STEPS // 2
    assert resumed.summary["t"] == straight.summary["t"]
    assert set(resumed.fields) == set(straight.fields)
    for field, arr in straight.fields.items():
        assert np.array_equal(resumed.fields[field], arr), f"{name} {backend}: field {field} differs after resume"
    # the resumed run checkpoints its final state, in place: every time level, ghosts too, as the straight run's
    assert levels(tmp_path / "half.h5") == levels(tmp_path / "straight.h5")


def test_a_checkpoint_holds_every_time_level_and_the_interrupted_step(tmp_path):
    run("wave2d_sponge", "numpy", 7, checkpoint=str(tmp_path / "c.h5"), checkpoint_every=5)
    with h5py.File(tmp_path / "c.h5", "r") as f:
        assert int(f.attrs["step"]) == 7  # the final state, though 7 is not a multiple of 5
        assert set(f["fields"]) == {"u_prev", "u", "u_next", "sigma"}


@pytest.mark.parametrize("files,message", [
    ({"out": "run.h5"}, "out= needs snapshot_every= K"),
    ({"snapshot_every": 2}, "snapshot_every= needs out= FILE"),
    ({"checkpoint": "c.h5"}, "checkpoint= needs checkpoint_every= K"),
    ({"out": "run.h5", "snapshot_every": 0}, "snapshot_every= must be at least 1"),
    ({"out": "same.h5", "snapshot_every": 2, "checkpoint": "same.h5", "checkpoint_every": 2}, "checkpoint= and out= are the same file"),
])
def test_sf_run_names_its_own_keywords_in_errors(tmp_path, monkeypatch, files, message):
    """sf.run's errors about its outputs speak of its keywords, not the command line's options."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StencilforgeError, match=message) as refused:
        run("gray_scott", "numpy", 2, **files)
    assert "--" not in str(refused.value)


def test_sf_run_refuses_to_replace_a_file_naming_overwrite(tmp_path):
    (tmp_path / "run.h5").write_bytes(b"kept")
    with pytest.raises(StencilforgeError, match="pass overwrite=True to replace it") as refused:
        run("gray_scott", "numpy", 2, out=str(tmp_path / "run.h5"), snapshot_every=2)
    assert "--" not in str(refused.value) and (tmp_path / "run.h5").read_bytes() == b"kept"


def test_resume_refuses_another_problem_or_changed_parameters(tmp_path):
    run("gray_scott", "numpy", 4, checkpoint=str(tmp_path / "gs.h5"), checkpoint_every=4)
    with pytest.raises(StencilforgeError, match="it is a gray_scott checkpoint"):
        run("wave2d_sponge", "numpy", 4, resume=str(tmp_path / "gs.h5"))
    with pytest.raises(StencilforgeError, match="cannot resume with F=0.05"):
        sf.run(build("gray_scott"), steps=4, backend="numpy", params={"F": 0.05}, resume=str(tmp_path / "gs.h5"))
    smaller = load_problem_file(EXAMPLES / "gray_scott.py").build(shape=(20, 20))
    with pytest.raises(StencilforgeError, match="shape"):
        sf.run(smaller, steps=4, backend="numpy", resume=str(tmp_path / "gs.h5"))


def test_cli_resumes_a_problem_file_and_appends_its_snapshots(tmp_path):
    cli = CliRunner()
    file = str(EXAMPLES / "gray_scott.py")
    common = ["run", file, "--shape", "24", "20", "--backend", "numpy", "--json"]

    def invoke(*args):
        result = cli.invoke(app, join_multi_values([*common, *args]))
        assert result.exit_code == 0, result.output
        return result

    invoke("--steps", "12", "--checkpoint-every", "6", "--checkpoint", str(tmp_path / "straight.ckpt.h5"))
    invoke("--steps", "6", "--snapshot-every", "3", "--out", str(tmp_path / "run.h5"), "--checkpoint-every", "6")
    invoke("--steps", "6", "--snapshot-every", "3", "--out", str(tmp_path / "run.h5"), "--resume", str(tmp_path / "run.ckpt.h5"))
    assert levels(tmp_path / "run.ckpt.h5") == levels(tmp_path / "straight.ckpt.h5")
    with h5py.File(tmp_path / "run.h5", "r") as f:
        assert list(f["step"][...]) == [3, 6, 9, 12]  # the resumed run appended to the series
    refused = cli.invoke(app, ["run", "--resume", str(tmp_path / "run.ckpt.h5")])
    assert refused.exit_code == 2 and "give the file" in refused.output
