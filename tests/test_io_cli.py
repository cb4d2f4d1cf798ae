"""The CLI side of outputs: refusals before the run, failed writes, plot and animate, restart."""

import os
import shutil

import h5py
import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from stencilforge.cli import app
from stencilforge.io import hdf5

RUN = ["run", "heat2d", "--shape", "16,12", "--backend", "numpy"]


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def assert_refused(result):
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return lines[0]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    """A heat2d and a wave3d snapshot file, plus a checkpoint, made once for the module."""
    d = tmp_path_factory.mktemp("snaps")
    res = invoke(*RUN, "--steps", "20", "--snapshot-every", "5", "--out", d / "heat.h5", "--checkpoint-every", "10")
    assert res.exit_code == 0, res.stderr
    res = invoke("run", "wave3d", "--shape", "10,9,8", "--radius", "2", "--backend", "numpy", "--steps", "8",
                 "--snapshot-every", "4", "--out", d / "wave.npz")
    assert res.exit_code == 0, res.stderr
    return d


def test_checkpoint_defaults_next_to_out(snapshots):
    assert (snapshots / "heat.ckpt.h5").is_file() and (snapshots / "heat.xmf").is_file()


@pytest.mark.parametrize("extra,message", [
    (["--snapshot-every", "5", "--out", "missing/run.h5"], "does not exist"),
    (["--snapshot-every", "5", "--out", "run.txt"], "must end in"),
    (["--out", "run.h5"], "--out needs --snapshot-every"),
    (["--snapshot-every", "0", "--out", "run.h5"], "at least 1"),
    (["--checkpoint-every", "5", "--checkpoint", "missing/c.h5"], "does not exist"),
    (["--png", "missing/final.png"], "does not exist"),
    (["--snapshot-every", "5", "--out", "run.h5", "--compression", "zstd"], "compression"),
    (["--snapshot-every", "5", "--out", "run.nc", "--compression", "lzf"], "NetCDF snapshot file takes compression none or gzip"),
])
def test_bad_output_paths_are_refused_before_the_run(workdir, extra, message):
    line = assert_refused(invoke(*RUN, "--steps", "10", *extra))
    assert message in line
    assert list(workdir.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into any directory")
def test_unwritable_directory_is_refused(workdir):
    locked = workdir / "locked"
    locked.mkdir(mode=0o500)
    line = assert_refused(invoke(*RUN, "--snapshot-every", "5", "--out", locked / "run.h5"))
    assert "not writable" in line
    assert list(locked.iterdir()) == []


def _corrupt(path, snapshots):
    shutil.copy(snapshots / "heat.ckpt.h5", path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2:] = b"\0" * (len(data) - len(data) // 2)
    path.write_bytes(bytes(data))


def _flip_one_value(path, snapshots):
    """Change stored field bytes behind HDF5's back: the Fletcher-32 checksum must catch it."""
    shutil.copy(snapshots / "heat.ckpt.h5", path)
    with h5py.File(path, "r") as f:
        ds = f["fields/u"]
        offset = ds.id.get_offset() if ds.chunks is None else ds.id.get_chunk_info(0).byte_offset
    with open(path, "r+b") as fh:
        fh.seek(offset + 40)
        byte = fh.read(1)
        fh.seek(offset + 40)
        fh.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("args,message", [
    (["wave3d"], "it is a heat2d checkpoint"),
    (["heat2d", "--shape", "16,13"], "shape"),
    (["heat2d", "--dtype", "float64"], "float32"),
    (["--alpha", "2"], "alpha"),
])
def test_resume_mismatch_is_refused(workdir, snapshots, args, message):
    line = assert_refused(invoke("run", *args, "--resume", snapshots / "heat.ckpt.h5", "--steps", "5", "--backend", "numpy"))
    assert message in line
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize("make,message", [
    (lambda p, s: p.write_bytes(os.urandom(4096)), "corrupted or not a checkpoint"),
    (_corrupt, "corrupted or not a checkpoint"),
    (_flip_one_value, "corrupted or not a checkpoint"),
    (lambda p, s: shutil.copy(s / "heat.h5", p), "snapshot file, not a checkpoint"),
    (lambda p, s: None, "no such checkpoint"),
])
def test_bad_checkpoint_is_refused(workdir, snapshots, make, message):
    bad = workdir / "bad.h5"
    make(bad, snapshots)
    before = sorted(workdir.iterdir())
    line = assert_refused(invoke("run", "--resume", bad, "--steps", "5", "--backend", "numpy", "--checkpoint-every", "5",
                                 "--snapshot-every", "5", "--out", "after.h5"))
    assert message in line
    assert sorted(workdir.iterdir()) == before


def test_failed_write_stops_the_run_and_names_what_is_safe(workdir, monkeypatch):
    append = hdf5.H5Sink.append

    def disk_full_on_third(self, step, t, arrays):
        if self.count == 2:
            raise OSError(28, "No space left on device")
        append(self, step, t, arrays)

    monkeypatch.setattr(hdf5.H5Sink, "append", disk_full_on_third)
    line = assert_refused(invoke(*RUN, "--steps", "100", "--snapshot-every", "5", "--out", "run.h5", "--checkpoint-every", "10"))
    assert "No space left on device" in line
    assert "last complete snapshot: step 10 (2 in run.h5)" in line
    assert "last complete checkpoint: step 10" in line or "last complete checkpoint: step 20" in line
    with h5py.File(workdir / "run.h5", "r") as f:
        assert list(f["step"][:]) == [5, 10]
    assert sorted(p.name for p in workdir.iterdir()) == ["run.ckpt.h5", "run.h5", "run.xmf"]


def test_cli_resume_matches_a_straight_run(workdir):
    assert invoke(*RUN, "--steps", "40", "--checkpoint-every", "40", "--checkpoint", "a.h5").exit_code == 0
    assert invoke(*RUN, "--steps", "20", "--checkpoint-every", "20", "--checkpoint", "b.h5").exit_code == 0
    res = invoke("run", "--resume", "b.h5", "--steps", "20", "--backend", "numpy", "--checkpoint-every", "20", "--json")
    assert res.exit_code == 0, res.stderr
    with h5py.File("a.h5", "r") as a, h5py.File("b.h5", "r") as b:
        assert b.attrs["step"] == a.attrs["step"] == 40
        for name in a["fields"]:
            assert a["fields"][name][...].tobytes() == b["fields"][name][...].tobytes()


def test_plot_2d_and_3d(workdir, snapshots):
    res = invoke("plot", snapshots / "heat.h5", "--step", "10", "-o", "heat.png")
    assert res.exit_code == 0, res.stderr
    with Image.open("heat.png") as im:
        assert im.size == (640, 480)
        assert np.asarray(im.convert("L")).std() > 10  # not a blank canvas
    assert invoke("plot", snapshots / "wave.npz", "-o", "wave.png", "--dpi", "50").exit_code == 0
    with Image.open("wave.png") as im:
        assert im.size == (640, 200)


def test_run_png_draws_the_final_state(workdir):
    assert invoke(*RUN, "--steps", "5", "--png", "final.png").exit_code == 0
    with Image.open("final.png") as im:
        assert im.size == (640, 480)


def test_animate_gif(workdir, snapshots):
    res = invoke("animate", snapshots / "heat.h5", "-o", "heat.gif", "--dpi", "40")
    assert res.exit_code == 0, res.stderr
    with Image.open("heat.gif") as im:
        assert im.size == (256, 192) and im.n_frames == 4
    assert [p.name for p in workdir.iterdir()] == ["heat.gif"]


@pytest.mark.skipif(shutil.which("ffmpeg") is not None, reason="ffmpeg is installed here")
def test_mp4_without_ffmpeg_is_refused(workdir, snapshots):
    assert "ffmpeg" in assert_refused(invoke("animate", snapshots / "heat.h5", "-o", "heat.mp4"))
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize("command,name,what", [("plot", "u.png", "image"), ("animate", "u.gif", "animation")])
def test_plot_and_animate_keep_an_existing_file_unless_overwrite(workdir, snapshots, command, name, what):
    """As run does: following the docs twice must not silently replace a picture of one's own."""
    (workdir / name).write_bytes(b"a picture of one's own")
    res = invoke(command, snapshots / "heat.h5", "-o", name, "--dpi", "40")
    assert assert_refused(res) == f"error: {what} {name} already exists; pass --overwrite to replace it"
    assert res.exit_code == 2
    assert (workdir / name).read_bytes() == b"a picture of one's own"
    res = invoke(command, snapshots / "heat.h5", "-o", name, "--dpi", "40", "--overwrite")
    assert res.exit_code == 0, res.stderr
    with Image.open(name) as im:
        assert im.size == (256, 192)
    assert [p.name for p in workdir.iterdir()] == [name]


@pytest.mark.parametrize("args,message", [
    (["--step", "7"], "no snapshot at step 7"),
    (["--field", "v"], "no field 'v'"),
])
def test_plot_refusals(workdir, snapshots, args, message):
    assert message in assert_refused(invoke("plot", snapshots / "heat.h5", "-o", "x.png", *args))
    assert list(workdir.iterdir()) == []


def test_a_run_refused_by_the_time_loop_leaves_no_file(workdir):
    line = assert_refused(invoke(*RUN, "--tol", "1e-3", "--snapshot-every", "5", "--out", "run.h5", "--checkpoint-every", "5"))
    assert "--tol" in line
    assert list(workdir.iterdir()) == []
