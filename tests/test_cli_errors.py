"""Inputs that used to give tracebacks or confusing errors: one line and a non-zero exit, or the expected behaviour."""

import os
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from stencilforge import api
from stencilforge.cli import app, join_multi_values
from stencilforge.errors import StencilforgeError

EXAMPLES = Path(__file__).parents[1] / "examples"


def invoke(*args):
    return CliRunner().invoke(app, join_multi_values([str(a) for a in args]))


def one_line(res):
    assert res.exit_code == 2, res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.stderr, res.stderr
    return lines[0]


@pytest.fixture(autouse=True)
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_unusable_home_does_not_stop_a_run(workdir, monkeypatch):
    home = workdir / "home-is-a-file"
    home.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("STENCILFORGE_CACHE_DIR", raising=False)
    res = invoke("run", "heat2d", "--shape", "16", "16", "--steps", "3", "--backend", "numba")
    assert res.exit_code == 0, res.stderr


def test_big_endian_arrays_run_on_numba(workdir):
    u = np.random.default_rng(1).random((20, 20)).astype(">f8")
    d1, _ = api.derivatives(u, 0.1, backend="numba")
    ref, _ = api.derivatives(u.astype("<f8"), 0.1, backend="numpy")
    np.testing.assert_allclose(d1, ref, rtol=1e-12)
    assert invoke("run", "heat2d", "--shape", "16", "16", "--steps", "10", "--backend", "numba",
                  "--checkpoint-every", "10", "--checkpoint", "c.h5").exit_code == 0
    with h5py.File("c.h5", "r+") as f:  # as a big-endian machine writes it
        for name in list(f["fields"]):
            data = f["fields"][name][...]
            del f["fields"][name]
            f["fields"].create_dataset(name, data=data.astype(data.dtype.newbyteorder(">")), fletcher32=True)
    res = invoke("run", "--resume", "c.h5", "--steps", "5", "--backend", "numba")
    assert res.exit_code == 0, res.stderr


@pytest.mark.parametrize("command", ["plot", "animate"])
def test_dpi_zero(workdir, command):
    assert invoke("run", "heat2d", "--shape", "16", "16", "--steps", "5", "--snapshot-every", "5", "--out", "r.h5",
                  "--backend", "numpy").exit_code == 0
    target = "x.png" if command == "plot" else "x.gif"
    assert "--dpi must be from 1" in one_line(invoke(command, "r.h5", "-o", target, "--dpi", "0"))
    assert not (workdir / target).exists()


def test_a_decimal_shape_is_named_as_such():
    assert "--shape needs integers" in one_line(invoke("run", "heat2d", "--shape", "10.5", "10"))


def test_an_array_as_velocity_in_the_api():
    with pytest.raises(StencilforgeError, match="numpy.save an array first"):
        api.solve("wave3d", shape=(18, 18, 18), velocity=np.ones((18, 18, 18)), steps=1, backend="numpy")


def test_an_empty_out_path():
    assert "path is empty" in one_line(invoke("run", "heat2d", "--shape", "16", "16", "--snapshot-every", "5", "--out", ""))


def test_a_complex_velocity_file_is_refused(workdir):
    np.save("v.npy", np.ones((18, 18, 18), dtype=complex))
    line = one_line(invoke("run", "wave3d", "--shape", "18", "18", "18", "--radius", "2", "--velocity", "v.npy",
                           "--backend", "numpy", "--steps", "2"))
    assert "complex" in line


def test_a_wave3d_checkpoint_resumes_without_its_velocity_file(workdir, monkeypatch):
    speeds = 1 + np.random.default_rng(2).random((18, 18, 18))
    (workdir / "model").mkdir()
    np.save(workdir / "model" / "v.npy", speeds)
    common = ["--backend", "numpy", "--checkpoint-every", "1000"]
    wave = ["run", "wave3d", "--shape", "18", "18", "18", "--radius", "2", "--velocity", "model/v.npy", "--dtype", "float64"]
    assert invoke(*wave, "--steps", "20", *common, "--checkpoint", "straight.h5").exit_code == 0
    assert invoke(*wave, "--steps", "10", *common, "--checkpoint", "half.h5").exit_code == 0
    os.remove(workdir / "model" / "v.npy")
    (workdir / "elsewhere").mkdir()
    monkeypatch.chdir(workdir / "elsewhere")
    res = invoke("run", "--resume", "../half.h5", "--steps", "10", *common, "--checkpoint", "../half.h5")
    assert res.exit_code == 0, res.stderr
    with h5py.File(workdir / "half.h5", "r") as a, h5py.File(workdir / "straight.h5", "r") as b:
        assert a.attrs["step"] == b.attrs["step"] == 20
        assert a.attrs["params"] == b.attrs["params"]  # still names the original file
        for name in b["fields"]:
            assert a["fields"][name][...].tobytes() == b["fields"][name][...].tobytes(), name


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="no /proc here")
def test_an_unwritable_special_directory_is_refused_up_front(workdir):
    line = one_line(invoke("run", "heat2d", "--shape", "16", "16", "--snapshot-every", "5", "--out", "/proc/x.h5",
                           "--backend", "numpy"))
    assert "not writable" in line


def _written_run(workdir):
    assert invoke("run", "heat2d", "--shape", "16", "16", "--steps", "15", "--snapshot-every", "5", "--out", "r.h5",
                  "--backend", "numpy").exit_code == 0
    return workdir / "r.h5"


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])


def _unwritten_snapshot(path):
    """A writer that grew every dataset, counted the snapshot in /step, but never wrote its data."""
    with h5py.File(path, "r+") as f:
        for ds in (f["fields/u"], f["step"], f["time"]):
            ds.resize(4, axis=0)
        f["step"][3] = 20


def _short_field(path):
    with h5py.File(path, "r+") as f:
        f["fields/u"].resize(2, axis=0)


@pytest.mark.parametrize("damage,message", [
    (_truncate, "not a readable HDF5 file"),
    (_unwritten_snapshot, "damaged: snapshot 3"),
    (_short_field, "damaged"),
])
@pytest.mark.parametrize("command,target", [("plot", "x.png"), ("animate", "x.gif")])
def test_plot_and_animate_refuse_damaged_files(workdir, damage, message, command, target):
    damage(_written_run(workdir))
    assert message in one_line(invoke(command, "r.h5", "-o", target))
    assert not (workdir / target).exists()


def test_a_problem_file_that_ignores_shape_is_refused(workdir):
    text = (EXAMPLES / "gray_scott.py").read_text()
    assert "shape = shape or (256, 256)" in text
    (workdir / "fixed.py").write_text(text.replace("shape = shape or (256, 256)", "shape = (16, 16)"))
    line = one_line(invoke("run", "fixed.py", "--shape", "24", "20", "--steps", "2", "--backend", "numpy"))
    assert "fixed.py: build() made a grid of shape 16 16 for --shape 24 20" in line
    assert invoke("run", EXAMPLES / "gray_scott.py", "--shape", "24", "20", "--steps", "2", "--backend", "numpy",
                  "--checkpoint-every", "2", "--checkpoint", "c.h5").exit_code == 0
    line = one_line(invoke("run", "fixed.py", "--steps", "2", "--backend", "numpy", "--resume", "c.h5"))
    assert "fixed.py: build() made a grid of shape 16 16 for the checkpoint's shape 24 20" in line


BROKEN = {
    "raises": ("import stencilforge as sf\n\n\ndef build(shape=None, dtype='float64'):\n    h = 1 / 0\n    return h\n",
               "broken.py:5: in build(): ZeroDivisionError: division by zero"),
    "syntax": ("import stencilforge as sf\n\ndef build(shape=None, dtype='float64'):\n    return sf.Problem(\n",
               "broken.py:4: SyntaxError: "),
    "imports": ("import stencilforge as sf\nimport no_such_module_here\n\n\ndef build(shape=None, dtype='float64'):\n    pass\n",
                "broken.py:2: ModuleNotFoundError: No module named 'no_such_module_here'"),
    "returns": ("import stencilforge as sf\n\n\ndef build(shape=None, dtype='float64'):\n    return {'u': 1}\n",
                "broken.py:4: build() returned dict, not an sf.Problem"),
    "refused": ("import stencilforge as sf\n\n\ndef build(shape=None, dtype='float64'):\n    grid = sf.Grid((8, 8), extent=1.0)\n"
                "    u = sf.Field('u', grid)\n    return sf.Problem([sf.Eq(u.next, sf.laplacian(u))])\n",
                "broken.py:7: in build(): field u is read at neighbouring cells: give it a boundary condition"),
}


@pytest.mark.parametrize("case", list(BROKEN))
@pytest.mark.parametrize("command", ["run", "verify"])
def test_a_broken_problem_file_is_one_line_naming_its_line(workdir, case, command):
    """An exception in a problem file's code, a syntax error, a failed import or a build() that returns no sf.Problem:
    exit 2 and one line naming the file and the line in it, not a traceback from inside the CLI."""
    text, message = BROKEN[case]
    (workdir / "broken.py").write_text(text + "\nORDER, SHAPES, T_END = 2, [(8, 8), (16, 16)], 0.1\n")
    args = ["--shape", "8", "8", "--steps", "1", "--backend", "numpy"] if command == "run" else ["--backend", "numpy"]
    res = invoke(command, "broken.py", *args)
    assert one_line(res).startswith(f"error: {message}"), res.stderr
