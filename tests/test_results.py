"""Results with coordinates: the grid's numeric coordinates, and a run's fields as an xarray Dataset."""

import numpy as np
import pytest

import stencilforge as sf

xr = pytest.importorskip("xarray")


def test_grid_values_are_the_points_coordinates():
    grid = sf.Grid((4, 5), extent=(2.0, 1.0))
    np.testing.assert_array_equal(grid.values("x"), 0.1 + 0.2 * np.arange(5))
    np.testing.assert_array_equal(grid.values("y"), 0.25 + 0.5 * np.arange(4))
    with pytest.raises(sf.StencilforgeError, match="has no coordinate 'z'"):
        grid.values("z")


def test_a_runs_fields_on_their_coordinates_round_trip_through_netcdf(tmp_path):
    """x is the last dimension, the coordinates are the grid's, the attributes say what ran; the Dataset writes to a
    NetCDF file (SciPy's writer) and reads back equal."""
    grid = sf.Grid((6, 9), extent=(0.6, 1.8))
    u = sf.Field("u", grid)
    k = sf.Constant("k", 0.1)
    p = sf.Problem([sf.Eq(u.next, u + k * grid.spacing[0] ** 2 * sf.laplacian(u))], initial={u: sf.sin(grid.x) + grid.y},
                   boundary={u: sf.Neumann()}, dt=0.01, name="smooth")
    result = sf.run(p, steps=3, backend="numpy", params={"k": 0.2})
    ds = result.to_xarray()
    assert ds["u"].dims == ("y", "x") and ds.attrs["problem"] == "smooth" and ds.attrs["param_k"] == 0.2
    assert ds.attrs["step"] == 3 and ds.attrs["t"] == pytest.approx(0.03)
    np.testing.assert_array_equal(ds["x"].values, grid.values("x"))
    np.testing.assert_array_equal(ds["u"].values, result.fields["u"])
    ds.to_netcdf(tmp_path / "r.nc", engine="scipy")
    with xr.open_dataset(tmp_path / "r.nc", engine="scipy") as back:
        xr.testing.assert_identical(back.load(), ds)


def test_a_named_problems_result_has_its_coordinates():
    result = sf.solve("heat2d", shape=(10, 12), steps=2, backend="numpy")
    ds = result.to_xarray()
    assert ds["u"].dims == ("y", "x") and ds.sizes == {"y": 10, "x": 12}
    np.testing.assert_allclose(ds["x"].values, (1 + np.arange(12)) / 13)


def test_a_user_problems_snapshot_series_is_a_netcdf_dataset_on_its_coordinates(tmp_path):
    """sf.run(out=...nc): every snapshot of the fields its equations write, on the grid's coordinates, with the run's attributes."""
    pytest.importorskip("h5netcdf")
    grid = sf.Grid((6, 9), extent=(0.6, 1.8))
    u = sf.Field("u", grid)
    p = sf.Problem([sf.Eq(u.next, u + 0.1 * grid.spacing[0] ** 2 * sf.laplacian(u))], initial={u: sf.sin(grid.x) + grid.y},
                   boundary={u: sf.Neumann()}, dt=0.01, name="smooth")
    result = sf.run(p, steps=5, backend="numpy", out=str(tmp_path / "s.nc"), snapshot_every=2)
    with xr.open_dataset(tmp_path / "s.nc", engine="h5netcdf") as ds:
        assert ds["u"].dims == ("time", "y", "x") and list(ds["step"].values) == [2, 4, 5]
        np.testing.assert_array_equal(ds["time"].values, [0.02, 0.04, 0.05])
        assert ds["x"].values.tobytes() == grid.values("x").tobytes() and ds["y"].values.tobytes() == grid.values("y").tobytes()
        assert ds["u"][-1].values.tobytes() == result.fields["u"].tobytes()
        assert ds.attrs["problem"] == "smooth" and ds.attrs["equations_sha256"] and ds.attrs["command_line"] == "stencilforge.run(smooth)"
    with pytest.raises(sf.StencilforgeError, match="s.nc already exists; pass overwrite=True"):
        sf.run(p, steps=5, backend="numpy", out=str(tmp_path / "s.nc"), snapshot_every=2)


def test_a_runs_traces_are_a_data_array_on_trace_time_and_receiver_with_the_receivers_coordinates(tmp_path):
    """Receivers between nodes on two fields: `traces` holds Result.traces's values, on the recorded steps' times, with
    each receiver's field and coordinates; a run without receivers has none, and the Dataset writes to NetCDF as it is."""
    def smooth(points=True) -> sf.Problem:
        grid = sf.Grid((6, 9), extent=(0.6, 1.8))
        u, v = sf.Field("u", grid), sf.Field("v", grid)
        receivers = [sf.Receiver(u, (0.27, 1.13)), sf.Receiver(v, (0.5, 0.3)), sf.Receiver(u, (0.05, 1.7), "nearest")]
        return sf.Problem([sf.Eq(u.next, u + 0.1 * grid.spacing[0] ** 2 * sf.laplacian(u)), sf.Eq(v.next, v - 0.01 * u)],
                          initial={u: sf.sin(grid.x) + grid.y, v: grid.x}, boundary={u: sf.Neumann(), v: sf.Neumann()}, dt=0.01,
                          receivers=receivers if points else (), record_every=2, name="smooth")

    result = sf.run(smooth(), steps=7, backend="numpy")
    ds = result.to_xarray()
    traces = ds["traces"]
    assert traces.dims == ("trace_time", "receiver") and traces.values.tobytes() == result.traces.values.tobytes()
    assert traces["trace_time"].values.tobytes() == result.traces.times.tobytes() and list(traces["trace_step"].values) == [2, 4, 6]
    assert list(traces["receiver_field"].values) == ["u", "v", "u"]
    assert list(traces["receiver_y"].values) == [0.27, 0.5, 0.05] and list(traces["receiver_x"].values) == [1.13, 0.3, 1.7]
    assert ds["u"].dims == ("y", "x") and ds["u"].values.tobytes() == result.fields["u"].tobytes()
    ds.to_netcdf(tmp_path / "r.nc", engine="scipy")
    with xr.open_dataset(tmp_path / "r.nc", engine="scipy") as back:
        xr.testing.assert_identical(back.load(), ds)
    assert "traces" not in sf.run(smooth(points=False), steps=2, backend="numpy").to_xarray()
