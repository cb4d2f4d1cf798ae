"""Checkpoints and resume for problems that run as generated passes: N steps in one run equal
N/2, a checkpoint, and N/2 resumed from it, bit for bit, on numpy and numba."""

import hashlib
import json
import logging
import shlex
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

import stencilforge as sf
from stencilforge.cli import app, join_multi_values
from stencilforge.convergence import load_problem_file
from stencilforge.errors import StencilforgeError
from stencilforge.fingerprint import canonical, difference

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


def gray_scott_copy(tmp_path: Path, old: str = "", new: str = "") -> Path:
    """examples/gray_scott.py copied into tmp_path, with `old` replaced by `new` (once)."""
    text = (EXAMPLES / "gray_scott.py").read_text()
    assert text.count(old) >= 1
    path = tmp_path / "gray_scott.py"
    path.write_text(text.replace(old, new, 1))
    return path


def invoke_run(file: Path, *args) -> object:
    argv = ["run", str(file), "--shape", "24", "20", "--backend", "numpy", "--json", *args]
    return CliRunner().invoke(app, join_multi_values(argv))


SIGN = ("- uvv + feed * (1 - u)", "+ uvv + feed * (1 - u)")  # the sign of one term of u's equation


def test_resume_refuses_a_problem_file_whose_equations_changed(tmp_path):
    file = gray_scott_copy(tmp_path)
    ckpt = tmp_path / "gs.ckpt.h5"
    assert invoke_run(file, "--steps", "6", "--checkpoint-every", "6", "--checkpoint", str(ckpt)).exit_code == 0
    before = levels(ckpt)
    gray_scott_copy(tmp_path, *SIGN)
    refused = invoke_run(file, "--steps", "6", "--resume", str(ckpt))
    lines = refused.stderr.strip().splitlines()
    assert refused.exit_code == 2 and len(lines) == 1 and "Traceback" not in refused.output, refused.output
    assert "its equations differ: equation u.next was '" in lines[0], lines[0]
    was, now = lines[0].split(" was ")[1].split(", here it is ")
    assert "- (u * (v * v))" in was and "+ (u * (v * v))" in now  # both forms, around the changed sign
    assert levels(ckpt) == before  # nothing was run or written
    edited = load_problem_file(file).build(shape=CASES["gray_scott"])
    with pytest.raises(StencilforgeError, match=r"its equations differ: equation u\.next was "):
        sf.run(edited, steps=6, backend="numpy", resume=str(ckpt))


def test_resume_accepts_a_problem_file_edited_elsewhere_than_its_equations_bit_for_bit(tmp_path):
    file = gray_scott_copy(tmp_path)
    common = ("--checkpoint-every", "6", "--snapshot-every", "3")
    assert invoke_run(file, "--steps", "12", *common, "--out", str(tmp_path / "straight.h5")).exit_code == 0
    assert invoke_run(file, "--steps", "6", *common, "--out", str(tmp_path / "run.h5")).exit_code == 0
    gray_scott_copy(tmp_path, "ORDER = 2\n", "ORDER = 2  # an edit that changes no equation\n")
    resumed = invoke_run(file, "--steps", "6", "--snapshot-every", "3", "--out", str(tmp_path / "run.h5"),
                         "--resume", str(tmp_path / "run.ckpt.h5"))
    assert resumed.exit_code == 0, resumed.output
    assert levels(tmp_path / "run.ckpt.h5") == levels(tmp_path / "straight.ckpt.h5")
    with h5py.File(tmp_path / "run.ckpt.h5", "r") as f:
        assert "an edit that changes no equation" in f.attrs["problem_file"]  # the resumed run's text
    with h5py.File(tmp_path / "run.h5", "r") as f:
        assert list(f["step"][...]) == [3, 6, 9, 12]
        assert "an edit" not in f.attrs["problem_file"]  # the series keeps the attributes of the run that began it


def test_outputs_record_the_equations_the_problem_file_and_the_command_line(tmp_path, monkeypatch):
    file = gray_scott_copy(tmp_path)
    args = ["run", str(file), "--shape", "24", "20", "--steps", "4", "--backend", "numpy", "--snapshot-every", "2",
            "--out", str(tmp_path / "run.h5"), "--checkpoint-every", "4"]
    monkeypatch.setattr(sys, "argv", ["/usr/bin/stencilforge", *args])
    assert CliRunner().invoke(app, join_multi_values(args)).exit_code == 0
    equations = canonical(load_problem_file(file).build(shape=CASES["gray_scott"]))
    for path in (tmp_path / "run.h5", tmp_path / "run.ckpt.h5"):
        with h5py.File(path, "r") as f:
            assert f.attrs["command_line"] == shlex.join(["stencilforge", *args])
            assert f.attrs["problem_file"] == file.read_text()
            assert f.attrs["equations"] == equations and "equation v.next: " in equations
            assert f.attrs["equations_sha256"] == hashlib.sha256(equations.encode()).hexdigest()
    run("gray_scott", "numpy", 2, checkpoint=str(tmp_path / "api.h5"), checkpoint_every=2)
    with h5py.File(tmp_path / "api.h5", "r") as f:
        assert f.attrs["command_line"] == "stencilforge.run(gray_scott)" and f.attrs["problem_file"] == ""
        assert f.attrs["equations"] == equations


def test_a_checkpoint_without_equations_still_resumes(tmp_path, caplog):
    """Checkpoints written before the equations were recorded resume as they did, said at info level."""
    run("gray_scott", "numpy", 12, checkpoint=str(tmp_path / "straight.h5"), checkpoint_every=12)
    run("gray_scott", "numpy", 6, checkpoint=str(tmp_path / "old.h5"), checkpoint_every=6)
    with h5py.File(tmp_path / "old.h5", "r+") as f:
        for name in ("equations", "equations_sha256", "problem_file"):
            del f.attrs[name]
    with caplog.at_level(logging.INFO, logger="stencilforge"):
        run("gray_scott", "numpy", 6, resume=str(tmp_path / "old.h5"))
    assert "records no equations" in caplog.text
    assert levels(tmp_path / "old.h5") == levels(tmp_path / "straight.h5")


def test_the_difference_names_the_first_line_that_changed():
    stored = "field u: levels=2, storage=float64\nequation u.next: (u + 1.0)\nwalls of u: Periodic, Periodic\ndt: 0.5"
    assert difference(stored, stored.replace("Periodic, Periodic", "Neumann, Periodic")) == (
        "walls of u was 'Periodic, Periodic', here it is 'Neumann, Periodic'")
    assert difference(stored, stored + "\nsource 1: on u at (0.5,), t") == "source 1 'on u at (0.5,), t' is new here"
    assert difference(stored, stored.replace("\ndt: 0.5", "")) == "dt '0.5' is gone here"
    swapped = "\n".join(reversed(stored.splitlines()))
    assert difference(stored, swapped) == "the same lines are in another order"
    long = "(" * 50 + "u" + ")" * 50
    was, now = difference(f"equation u.next: {long}", f"equation u.next: {long.replace('u', 'v')}").split(" was ")[1].split(", here it is ")
    assert was == "'...((((((((((((((((u))))))))))))))))...'" and now == was.replace("u", "v")


def test_cli_resumes_a_problem_file_at_the_checkpoints_shape_and_dtype(tmp_path):
    """Neither --shape nor --dtype needs repeating: gray_scott's build would otherwise make its default 256x256 float64."""
    file = str(EXAMPLES / "gray_scott.py")
    common = ["--backend", "numpy", "--json", "--checkpoint-every", "6"]
    first = ["run", file, "--shape", "24", "20", "--dtype", "float32", *common]
    cli = CliRunner()
    assert cli.invoke(app, join_multi_values([*first, "--steps", "12", "--checkpoint", str(tmp_path / "straight.h5")])).exit_code == 0
    assert cli.invoke(app, join_multi_values([*first, "--steps", "6", "--checkpoint", str(tmp_path / "c.h5")])).exit_code == 0
    resumed = cli.invoke(app, ["run", file, *common, "--steps", "6", "--resume", str(tmp_path / "c.h5")])
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads(resumed.stdout)
    assert summary["shape"] == [24, 20] and summary["dtype"] == "float32" and summary["step"] == 12
    assert levels(tmp_path / "c.h5") == levels(tmp_path / "straight.h5")


def test_the_canonical_text_is_of_the_values_not_their_spelling():
    """A source placed at (1, 2) or at (1.0, np.float64(2.0)) is the same problem; a Python signal is known by its name.
    A source between nodes says how it spreads; one at a node alone keeps the text sources had before."""
    def problem(at, signal, interpolation="linear", sinc_radius=4):
        grid = sf.Grid((8, 8), extent=4.0)
        u = sf.Field("u", grid)
        return sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u))], boundary={u: sf.Dirichlet(0)},
                          sources=[sf.Source(u, at=at, signal=signal, interpolation=interpolation, sinc_radius=sinc_radius)],
                          dt=0.5)

    def ricker(t):
        return t

    assert canonical(problem((1, 2), ricker)) == canonical(problem((1.0, np.float64(2.0)), ricker))
    line = "source 1: on u at (1.0, 2.0), <function test_the_canonical_text_is_of_the_values_not_their_spelling.<locals>.ricker>"
    assert canonical(problem((1, 2), ricker)).splitlines()[-2:] == [line + ", linear", "dt: 0.5"]
    assert canonical(problem((1, 2), ricker, "nearest")).splitlines()[-2] == line
    assert canonical(problem((1, 2), ricker, "sinc", 2)).splitlines()[-2] == line + ", sinc of radius 2"
    assert canonical(problem((1.25, 2.25), ricker, "sinc", 3)) == canonical(problem((1.25, 2.25), ricker, "nearest"))
    assert canonical(problem((1.25, 2.25), ricker)).splitlines()[-2] == line.replace("(1.0, 2.0)", "(1.25, 2.25)")
