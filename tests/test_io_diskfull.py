"""Full disks, I/O errors and permission errors at any point of any write: one line that counts right,
no temporary file left, every file closed (plain h5py opens it)."""

import errno
import os
import re
import subprocess

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from stencilforge.cli import app
from stencilforge.io import checkpoint, hdf5, netcdf, paths
from stencilforge.io.series import open_series

RUN = ["run", "heat2d", "--backend", "numpy"]


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def snapshot_steps(path):
    if path.suffix == ".nc":
        with open_series(path) as series:
            return list(series.steps)
    if path.suffix == ".npz":
        with np.load(path) as data:
            return list(data["step"])
    with h5py.File(path, "r") as f:  # plain h5py: the writer must have closed it
        return list(f["step"][:])


def assert_stopped_cleanly(res, d):
    """The one line names the last complete snapshot and checkpoint, and the files agree with it."""
    assert res.exit_code == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.stderr, res.stderr
    line = lines[0]
    snap = re.search(r"last complete snapshot: step (\d+) \((\d+) in (\S+)\)", line)
    if snap:
        steps = snapshot_steps(d / snap[3])
        assert len(steps) == int(snap[2]) and steps[-1] == int(snap[1]), (line, steps)
    else:
        assert "no complete snapshot" in line
        for name in ("run.h5", "run.nc", "run.npz"):
            assert not (d / name).exists() or snapshot_steps(d / name) == []
    ckpt = re.search(r"last complete checkpoint: step (\d+) \((\S+)\)", line)
    if ckpt:
        assert checkpoint.read(d / ckpt[2]).step == int(ckpt[1])
    else:
        assert "no checkpoint" in line and not (d / "run.ckpt.h5").exists()
    assert [p.name for p in d.iterdir() if ".tmp" in p.name] == []
    return line


OUTPUTS = {
    "hdf5": ["--snapshot-every", "5", "--out", "run.h5", "--checkpoint-every", "10"],
    "npz": ["--snapshot-every", "5", "--out", "run.npz", "--checkpoint-every", "10"],
    "netcdf": ["--snapshot-every", "5", "--out", "run.nc", "--checkpoint-every", "10"],
    "checkpoint": ["--checkpoint-every", "5", "--checkpoint", "run.ckpt.h5"],
}


@pytest.fixture
def small_fs(tmp_path, monkeypatch):
    """A 384 KiB tmpfs (root only; skipped where it cannot be mounted)."""
    d = tmp_path / "fs"
    d.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=384k", "tmpfs", str(d)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    monkeypatch.chdir(d)
    yield d
    monkeypatch.chdir(tmp_path)
    subprocess.run(["umount", str(d)], check=True)


@pytest.mark.parametrize("output,shape", [("hdf5", "64,64"), ("netcdf", "64,64"), ("npz", "64,64"), ("checkpoint", "150,150")])
def test_a_real_full_disk(small_fs, output, shape):
    res = invoke(*RUN, "--shape", shape, "--steps", "400", *OUTPUTS[output])
    assert "No space left on device" in assert_stopped_cleanly(res, small_fs)


def test_a_real_full_disk_while_drawing_the_png(small_fs):
    (small_fs / "filler").write_bytes(b"\0" * (370 << 10))
    res = invoke(*RUN, "--shape", "300,300", "--steps", "4", "--png", "final.png")
    assert "final.png" in assert_stopped_cleanly(res, small_fs)


def _fail_on_call(monkeypatch, targets, k, exc):
    """Make the function at every (module, name) of `targets` raise `exc` on their k-th call together (from 1)."""
    calls = []
    for module, name in targets:
        real = getattr(module, name)

        def failing(*args, real=real, **kwargs):
            calls.append(1)
            if len(calls) == k:
                raise exc
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, failing)


ENOSPC = OSError(errno.ENOSPC, "No space left on device")
EIO = OSError(errno.EIO, "Input/output error")
EACCES = PermissionError(errno.EACCES, "Permission denied")


@pytest.mark.parametrize("output", list(OUTPUTS))
@pytest.mark.parametrize("k", [1, 2, 5])
@pytest.mark.parametrize("where,exc", [
    ([(os, "posix_fallocate")], ENOSPC),  # reserving space for an HDF5 write
    ([(os, "replace")], EACCES),  # renaming a checkpoint, .npz, .xmf or temporary file into place
    ([(h5py.Dataset, "__setitem__")], EIO),  # inside HDF5, with the file open
    ([(hdf5, "write_image"), (checkpoint, "write_image"), (netcdf, "write_image")], ENOSPC),  # creating an HDF5 file
])
def test_injected_failures_at_any_point(tmp_path, monkeypatch, output, k, where, exc):
    monkeypatch.chdir(tmp_path)
    _fail_on_call(monkeypatch, where, k, exc)
    res = invoke(*RUN, "--shape", "16,12", "--steps", "40", *OUTPUTS[output])
    if res.exit_code == 0:  # this output never makes that call k times
        assert output == "npz" and where[0][0] is not os or k > 1
        return
    assert exc.strerror in assert_stopped_cleanly(res, tmp_path)


def test_stale_temporary_files_are_removed_by_the_next_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = [tmp_path / f".run.{dead.pid}-0123abcd.tmp.h5", tmp_path / f".run.{dead.pid}-0123abcd.tmp.xmf",
             tmp_path / f".run.ckpt.{dead.pid}-0123abcd.tmp.h5"]
    alive = tmp_path / f".run.{os.getpid()}-0123abcd.tmp.h5"  # a live writer's: kept
    for p in (*stale, alive):
        p.write_bytes(b"partial")
    assert invoke(*RUN, "--shape", "16,12", "--steps", "10", *OUTPUTS["hdf5"]).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["run.h5", "run.xmf", "run.ckpt.h5", alive.name])


def test_reserve_refuses_cleanly_before_hdf5_writes(tmp_path, monkeypatch):
    target = tmp_path / "x.h5"
    target.write_bytes(b"")
    _fail_on_call(monkeypatch, [(os, "posix_fallocate")], 1, ENOSPC)
    with pytest.raises(OSError, match="No space"):
        paths.reserve(target, 1 << 20)
    assert target.stat().st_size == 0


def test_a_failed_sidecar_counts_the_snapshot_it_follows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _fail_on_call(monkeypatch, [(hdf5, "write_xdmf")], 3, EACCES)
    line = assert_stopped_cleanly(invoke(*RUN, "--shape", "16,12", "--steps", "40", *OUTPUTS["hdf5"]), tmp_path)
    assert "(writing run.xmf)" in line and "last complete snapshot: step 15 (3 in run.h5)" in line
