"""NetCDF snapshot series: the .h5 series' frames on the grid's coordinates, appended to on resume, complete after a crash."""

import shutil
from dataclasses import replace

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from stencilforge import problems
from stencilforge.cli import app
from stencilforge.errors import StencilforgeError
from stencilforge.io.meta import RunInfo
from stencilforge.io.netcdf import NcSink
from stencilforge.io.series import open_series

xr = pytest.importorskip("xarray")
h5netcdf = pytest.importorskip("h5netcdf")

RUN = ["run", "heat2d", "--shape", "16,12", "--backend", "numpy", "--snapshot-every", "5"]


def ok(*args):
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, res.stderr
    return res


def dataset(path):
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return ds.load()


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The same 20 steps of heat2d written as .nc and as .h5."""
    d = tmp_path_factory.mktemp("straight")
    for name in ("run.nc", "run.h5"):
        ok(*RUN, "--steps", "20", "--out", d / name)
    return d


def test_the_series_is_the_h5_series_on_the_grids_coordinates(straight):
    ds = dataset(straight / "run.nc")
    assert ds["u"].dims == ("time", "y", "x") and ds.sizes == {"time": 4, "y": 16, "x": 12}
    grid = problems.linear_step("heat2d", shape=(16, 12)).lattice
    for axis, name in enumerate(("y", "x")):
        assert ds[name].values.tobytes() == grid.coords(axis, ghosts=False).tobytes()
    assert ds["step"].dtype == np.int64 and list(ds["step"].values) == [5, 10, 15, 20]
    with h5py.File(straight / "run.h5", "r") as f:
        assert ds["u"].dtype == np.float32 and ds["u"].values.tobytes() == f["fields/u"][...].tobytes()
        assert ds["time"].values.tobytes() == f["time"][...].tobytes()
        for key in ("problem", "params", "dtype", "stencilforge_version"):
            assert ds.attrs[key] == f.attrs[key]
    assert ds.attrs["param_alpha"] == 1.0 and len(ds.attrs["run_id"]) == 32
    with open_series(straight / "run.nc") as series, open_series(straight / "run.h5") as h5:
        assert list(series.steps) == list(h5.steps) and list(series.times) == list(h5.times) and series.names == ("u",)
        assert series.frame("u", 3).tobytes() == h5.frame("u", 3).tobytes()
        assert replace(series.info, run_id="", command_line="") == replace(h5.info, run_id="", command_line="")


def test_resume_appends_drops_what_it_recomputes_and_skips_a_snapshot_cut_off_by_a_crash(straight, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ok(*RUN, "--steps", "10", "--checkpoint-every", "10", "--out", "run.nc")
    shutil.copy("run.ckpt.h5", "c10.h5")
    with h5netcdf.File("run.nc", "r+") as f:  # a third snapshot whose time, the last write, never landed
        f.resize_dimension("time", 3)
        f["step"][2] = 15
    assert np.isnan(dataset("run.nc")["time"].values[-1])
    with open_series(tmp_path / "run.nc") as series:
        assert list(series.steps) == [5, 10]
    ok("run", "--resume", "run.ckpt.h5", "--steps", "10", "--backend", "numpy", "--snapshot-every", "5", "--out", "run.nc")
    xr.testing.assert_equal(dataset("run.nc"), dataset(straight / "run.nc"))  # values and coordinates, not the attributes
    ok("run", "--resume", "c10.h5", "--steps", "5", "--backend", "numpy", "--snapshot-every", "5", "--out", "run.nc",
       "--checkpoint", "c10.h5")
    assert list(dataset("run.nc")["step"].values) == [5, 10, 15]


def test_a_field_named_like_a_coordinate_is_refused(tmp_path):
    info = RunInfo("p", (4, 3), "float64", (1.0, 1.0), (0.0, 0.0))
    with pytest.raises(StencilforgeError, match="cannot write field 'x' to .*NetCDF gives that name to a coordinate"):
        NcSink(tmp_path / "p.nc", info, {"u": ((4, 3), np.float64), "x": ((4, 3), np.float64)}, 1)
    assert list(tmp_path.iterdir()) == []
