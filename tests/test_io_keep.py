"""Never lose a result: the final state is written, resumed series are appended to, no file is replaced silently."""

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from stencilforge.cli import app

RUN = ["run", "heat2d", "--shape", "16,12", "--backend", "numpy"]


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def ok(*args):
    res = invoke(*args)
    assert res.exit_code == 0, res.stderr
    return res


def refused(*args):
    res = invoke(*args)
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


def steps_in(path):
    with h5py.File(path, "r") as f:
        return list(f["step"][:])


def checkpoint_step(path):
    with h5py.File(path, "r") as f:
        return int(f.attrs["step"])


@pytest.fixture(autouse=True)
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_last_step_is_written_when_it_is_not_a_multiple_of_the_interval():
    ok(*RUN, "--steps", "105", "--checkpoint-every", "50", "--snapshot-every", "50", "--out", "run.h5")
    assert steps_in("run.h5") == [50, 100, 105]
    assert checkpoint_step("run.ckpt.h5") == 105


def test_a_converged_run_checkpoints_its_final_state():
    res = ok("run", "poisson2d", "--method", "jacobi", "--shape", "16,16", "--backend", "numpy", "--tol", "1e-4",
             "--checkpoint-every", "100000", "--checkpoint", "p.h5", "--json")
    assert checkpoint_step("p.h5") == __import__("json").loads(res.stdout)["iterations"] > 0


def test_resume_without_an_interval_still_checkpoints_the_steps_it_computes():
    ok(*RUN, "--steps", "20", "--checkpoint-every", "20", "--checkpoint", "c.h5")
    res = ok("run", "--resume", "c.h5", "--steps", "7", "--backend", "numpy", "--json")
    assert checkpoint_step("c.h5") == 27
    assert '"step": 27' in res.stdout


def test_resume_appends_to_the_series_and_matches_a_straight_run(workdir):
    ok(*RUN, "--steps", "100", "--snapshot-every", "20", "--checkpoint-every", "50", "--out", "run.h5")
    ok("run", "--resume", "run.ckpt.h5", "--steps", "100", "--backend", "numpy", "--snapshot-every", "20", "--out", "run.h5")
    ok(*RUN, "--steps", "200", "--snapshot-every", "20", "--out", "straight.h5")
    assert steps_in("run.h5") == steps_in("straight.h5") == list(range(20, 201, 20))
    with h5py.File("run.h5", "r") as a, h5py.File("straight.h5", "r") as b:
        assert a["fields/u"][...].tobytes() == b["fields/u"][...].tobytes()
        assert list(a["time"][:]) == list(b["time"][:])
    assert (workdir / "run.xmf").read_text().count("<Time ") == 10


def test_resume_from_an_older_checkpoint_drops_the_snapshots_it_recomputes(workdir):
    ok(*RUN, "--steps", "60", "--snapshot-every", "20", "--checkpoint-every", "60", "--out", "run.h5")
    (workdir / "c60.h5").write_bytes((workdir / "run.ckpt.h5").read_bytes())
    ok("run", "--resume", "run.ckpt.h5", "--steps", "40", "--backend", "numpy", "--snapshot-every", "20", "--out", "run.h5")
    assert steps_in("run.h5") == [20, 40, 60, 80, 100]
    ok("run", "--resume", "c60.h5", "--steps", "20", "--backend", "numpy", "--snapshot-every", "20", "--out", "run.h5",
       "--checkpoint", "c60.h5")
    assert steps_in("run.h5") == [20, 40, 60, 80]
    assert (workdir / "run.xmf").read_text().count("<Time ") == 4


@pytest.mark.parametrize("out", ["other.h5", "other.nc", "other.npz"])
def test_resume_refuses_a_series_from_another_run(workdir, out):
    ok(*RUN, "--steps", "20", "--checkpoint-every", "20", "--checkpoint", "c.h5")
    ok(*RUN, "--steps", "20", "--snapshot-every", "10", "--out", out)
    before = (workdir / out).read_bytes()
    line = refused("run", "--resume", "c.h5", "--steps", "10", "--backend", "numpy", "--snapshot-every", "10", "--out", out)
    assert "written by another run" in line
    assert (workdir / out).read_bytes() == before


def test_resume_appends_to_an_npz_series():
    ok(*RUN, "--steps", "20", "--snapshot-every", "10", "--checkpoint-every", "20", "--out", "run.npz")
    ok("run", "--resume", "run.ckpt.h5", "--steps", "20", "--backend", "numpy", "--snapshot-every", "10", "--out", "run.npz")
    with np.load("run.npz") as data:
        assert list(data["step"]) == [10, 20, 30, 40] and data["fields/u"].shape == (4, 16, 12)


def _user_hdf5(path):
    with h5py.File(path, "w") as f:
        f["precious"] = np.arange(10)


def _user_netcdf(path):
    import h5netcdf

    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"i": 10}
        f.create_variable("precious", ("i",), data=np.arange(10))


def _user_npz(path):
    np.savez(path, precious=np.arange(10))


@pytest.mark.parametrize("target,make,extra", [
    ("mine.h5", _user_hdf5, ["--snapshot-every", "5", "--out", "mine.h5"]),
    ("mine.npz", _user_npz, ["--snapshot-every", "5", "--out", "mine.npz"]),
    ("mine.nc", _user_netcdf, ["--snapshot-every", "5", "--out", "mine.nc"]),
    ("mine.h5", _user_hdf5, ["--checkpoint-every", "5", "--checkpoint", "mine.h5"]),
    ("run.xmf", lambda p: p.write_text("<mine/>"), ["--snapshot-every", "5", "--out", "run.h5"]),
    ("run.ckpt.h5", _user_hdf5, ["--snapshot-every", "5", "--out", "run.h5", "--checkpoint-every", "5"]),
    ("final.png", lambda p: p.write_bytes(b"mine"), ["--png", "final.png"]),
])
def test_existing_files_are_never_replaced_without_overwrite(workdir, target, make, extra):
    make(workdir / target)
    before = (workdir / target).read_bytes()
    line = refused(*RUN, "--steps", "10", *extra)
    assert str(target) in line and "--overwrite" in line
    assert (workdir / target).read_bytes() == before
    assert sorted(p.name for p in workdir.iterdir()) == [target]
    ok(*RUN, "--steps", "10", *extra, "--overwrite")
    assert (workdir / target).read_bytes() != before


def test_a_heat3d_run_does_not_replace_a_heat2d_series():
    ok(*RUN, "--steps", "10", "--snapshot-every", "5", "--out", "run.h5")
    line = refused("run", "heat3d", "--shape", "8,8,8", "--backend", "numpy", "--steps", "10", "--snapshot-every", "5", "--out", "run.h5")
    assert "already exists" in line
    assert steps_in("run.h5") == [5, 10]
