"""Snapshot series as a CF-style NetCDF-4 file, written through h5netcdf, for what reads NetCDF (xarray, netCDF-C and its tools).

Layout: dimensions `time` (unlimited, one entry per snapshot) and the grid's
axes in array order (z, y, x); coordinate variables holding the points'
coordinates and the snapshots' times; `step` along time; one variable per
field of shape (time, *axes), interior points only; global attributes from
RunInfo. Where the run has receivers, their traces have dimensions of their
own, `trace_time` (unlimited, one entry per recorded step) and `receiver`:
`traces` (trace_time, receiver), the coordinate variable `trace_time`,
`trace_step`, and each receiver's field and coordinates (`receiver_field`,
`receiver_x`, ...), which the `coordinates` attribute of `traces` names, as
`Result.to_xarray` gives them. As with H5Sink the file is open only while a
snapshot is written, and a snapshot is written in two sessions: the data and
its step, closed, then its time, which makes it count. Until then its time
reads as NaN, so the complete snapshots are the entries before the first NaN
time; traces are written the same way, their `trace_time` last.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import StencilforgeError
from ..grid import AXIS_NAMES
from ..optional import require
from ..points import Traces
from .hdf5 import chunk_shape, strings, write_image
from .meta import SNAPSHOT_FORMAT as FORMAT, TRACE_ROWS, Receivers, RunInfo, receivers_match
from .paths import atomic_path, reserve

COMPRESSIONS = ("none", "gzip")  # NetCDF-4 readers know only zlib (gzip) of HDF5's filters
SERIES = ("time", "step")
TRACE_TIME, RECEIVER = "trace_time", "receiver"  # the traces' dimensions
TRACES = ("traces", TRACE_TIME, "trace_step")  # their variables along trace_time


def coordinates(info: RunInfo) -> dict[str, np.ndarray]:
    """Each axis's point coordinates by name, as `Grid.coords` and `grid.values` compute them."""
    return {name: info.lower[axis] + np.arange(info.shape[axis], dtype=np.float64) * info.spacing[axis]
            for axis, name in enumerate(AXIS_NAMES[len(info.shape)])}


def receiver_coords(fields: tuple[str, ...], at: np.ndarray) -> dict[str, tuple[str, np.ndarray]]:
    """Each receiver's field and coordinates as variables along `receiver` (receiver_field, then receiver_z, receiver_y,
    receiver_x in array order), as the NetCDF file and `Result.to_xarray` name them."""
    names = AXIS_NAMES[at.shape[1]]
    return {"receiver_field": (RECEIVER, np.array(fields)),
            **{f"receiver_{name}": (RECEIVER, at[:, axis]) for axis, name in enumerate(names)}}


def complete_count(times: np.ndarray) -> int:
    """How many snapshots are complete: the entries before the first NaN time (one whose commit did not land)."""
    bad = np.flatnonzero(np.isnan(times))
    return int(bad[0]) if bad.size else len(times)


def global_attrs(info: RunInfo, every: int | None, t0: float, dt: float) -> dict:
    """RunInfo's attributes as the other formats write them, and each scalar parameter as `param_<name>` as
    `Result.to_xarray` does (a boolean as 0 or 1: NetCDF has none)."""
    params = {f"param_{k}": int(v) if isinstance(v, bool) else v for k, v in info.params.items() if isinstance(v, (int, float, str))}
    return {"Conventions": "CF-1.8", **info.attrs(), **params, "format": FORMAT, "format_version": 1,
            "snapshot_every": int(every or 0), "t0": float(t0), "dt": float(dt)}


class NcSink:
    """Appends snapshots to a NetCDF-4 file; same interface and guarantees as H5Sink, without a sidecar.

    The file is created with the first snapshot, so a run refused or stopped
    before it leaves no file behind. With `resume_step` the sink continues the
    series already in the file: it keeps the snapshots and traces up to that step and appends.
    `receivers`: the run's, whose traces `write_traces` adds after each snapshot and when the run ends.
    """

    def __init__(self, path: Path, info: RunInfo, fields: dict[str, tuple[tuple[int, ...], np.dtype]],
                 every: int | None, t0: float = 0.0, dt: float = 0.0, compression: str = "none",
                 resume_step: int | None = None, receivers: Receivers | None = None):
        if compression not in COMPRESSIONS:
            raise StencilforgeError(f"a NetCDF snapshot file takes compression {' or '.join(COMPRESSIONS)}, got {compression!r}")
        self.path = Path(path)
        self.info = info
        self.axes = coordinates(info)
        self.receivers = receivers
        self.receiver_coords = receiver_coords(receivers.fields, receivers.at) if receivers is not None else {}
        self.traced = 0  # complete entries of trace_time
        taken = sorted(set(fields) & {*SERIES, *self.axes, *TRACES, *self.receiver_coords})
        if taken:
            raise StencilforgeError(f"cannot write field {taken[0]!r} to {self.path}: NetCDF gives that name to a coordinate"
                                    f"{' or the traces' if taken[0] in (*TRACES, *self.receiver_coords) else ''}")
        self.attrs = global_attrs(info, every, t0, dt)
        self.compression = compression
        self.created = False
        self.count = 0
        self.last_step: int | None = None
        self.layout = {name: (tuple(shape), np.dtype(dtype)) for name, (shape, dtype) in fields.items()}
        self.h5netcdf = require("h5netcdf", f"snapshot file {self.path}")
        if resume_step is not None:
            self._adopt(resume_step)

    def _open(self):
        # locking=False: a reader that keeps the file open must not block the next snapshot.
        return self.h5netcdf.File(self.path, "r+", locking=False)

    def _adopt(self, resume_step: int) -> None:
        """Continue the series in the file: same run and layout, snapshots after `resume_step` dropped."""
        try:
            with self._open() as f:
                if f.attrs.get("run_id") != self.info.run_id or not self.info.run_id:
                    raise StencilforgeError(f"cannot append to {self.path}: it was written by another run")
                found = {name: (var.shape[1:], var.dtype) for name, var in f.variables.items()
                         if name not in SERIES and var.dimensions[:1] == ("time",)}
                if found != self.layout:
                    raise StencilforgeError(f"cannot append to {self.path}: its fields {sorted(found)} do not match this run's")
                if not receivers_match(self.receivers, file_receivers(f, len(self.info.shape))):
                    raise StencilforgeError(f"cannot append to {self.path}: its receivers do not match this run's")
                steps = f["step"][: complete_count(f["time"][:])]
                keep = int(np.count_nonzero(steps <= resume_step))
                f.resize_dimension("time", keep)
                if self.receivers is not None:
                    traced = f["trace_step"][: complete_count(f[TRACE_TIME][:])]
                    self.traced = int(np.count_nonzero(traced <= resume_step))
                    f.resize_dimension(TRACE_TIME, self.traced)
        except (OSError, KeyError) as exc:
            raise StencilforgeError(f"cannot append to {self.path}: {exc}") from None
        self.created, self.count = True, keep
        self.last_step = int(steps[keep - 1]) if keep else None

    def _create(self) -> None:
        """The empty layout, built in memory, written under a temporary name and renamed into place."""
        def build(h5file):
            with self.h5netcdf.File(h5file, "w") as f:
                f.attrs.update(self.attrs)
                traced = {TRACE_TIME: None, RECEIVER: len(self.receivers.fields)} if self.receivers is not None else {}
                f.dimensions = {"time": None, **{name: len(values) for name, values in self.axes.items()}, **traced}
                for name, values in self.axes.items():
                    f.create_variable(name, (name,), np.float64, data=values).attrs.update(axis=name.upper(), long_name=name)
                # NaN until a snapshot's commit writes it: the marker of a complete snapshot
                f.create_variable("time", ("time",), np.float64, chunks=(1024,), fillvalue=np.nan).attrs.update(axis="T", long_name="time")
                f.create_variable("step", ("time",), np.int64, chunks=(1024,)).attrs["long_name"] = "global step"
                options = {"compression": "gzip", "compression_opts": 4} if self.compression == "gzip" else {}
                for name, (shape, dtype) in self.layout.items():
                    f.create_variable(name, ("time", *self.axes), dtype, chunks=chunk_shape(shape, dtype.itemsize), **options)
                if self.receivers is not None:
                    self._create_traces(f)

        with atomic_path(self.path) as tmp:
            write_image(tmp, build)
        self.created = True

    def _create_traces(self, f) -> None:
        """The traces' variables, empty along trace_time; its values NaN until a write commits them."""
        assert self.receivers is not None, "only a run with receivers has traces"
        string = require("h5py", f"snapshot file {self.path}").string_dtype()
        for name, (dim, values) in self.receiver_coords.items():
            text = name == "receiver_field"
            var = f.create_variable(name, (dim,), string if text else np.float64, data=values.astype(object) if text else values)
            var.attrs["long_name"] = "receiver's field" if text else f"receiver's {name.removeprefix('receiver_')}"
        time = f.create_variable(TRACE_TIME, (TRACE_TIME,), np.float64, chunks=(TRACE_ROWS,), fillvalue=np.nan)
        time.attrs["long_name"] = "time of the recorded step"
        f.create_variable("trace_step", (TRACE_TIME,), np.int64, chunks=(TRACE_ROWS,)).attrs["long_name"] = "global step recorded"
        traces = f.create_variable("traces", (TRACE_TIME, RECEIVER), np.float64, chunks=self.receivers.chunks())
        traces.attrs.update(long_name="receivers' interpolated values", coordinates=" ".join(["trace_step", *self.receiver_coords]))

    def append(self, step: int, t: float, arrays: dict[str, np.ndarray]) -> None:
        """Write one snapshot in two sessions: the time axis grown (every variable along it), the data and step
        written and the file closed; then the time that makes it count. A crash before the second leaves
        that time NaN, which readers skip."""
        if not self.created:
            self._create()
        n = self.count
        reserve(self.path, sum(a.nbytes for a in arrays.values()))
        with self._open() as f:
            f.resize_dimension("time", n + 1)
            for name, arr in arrays.items():
                f[name][n] = arr
            f["step"][n] = step
        reserve(self.path, 0)
        with self._open() as f:
            f["time"][n] = t
        self.count, self.last_step = n + 1, int(step)

    def write_traces(self, traces: Traces) -> None:
        """Append rows of the run's traces after those the file holds (after a snapshot, or at the end), in two sessions
        as a snapshot is: trace_time grown and the values and steps written, closed, then the times that make them count."""
        rows = len(traces.steps)
        if not self.created:  # a blow-up before the first snapshot: the file holds its traces alone
            self._create()
        n = self.traced
        reserve(self.path, traces.values.nbytes + traces.steps.nbytes)
        with self._open() as f:
            f.resize_dimension(TRACE_TIME, n + rows)
            f["traces"][n:] = traces.values
            f["trace_step"][n:] = traces.steps
        reserve(self.path, traces.times.nbytes)
        with self._open() as f:
            f[TRACE_TIME][n:] = traces.times
        self.traced = n + rows

    def close(self) -> None:
        """Nothing stays open between snapshots."""


def file_receivers(f, ndim: int) -> tuple[tuple[str, ...], np.ndarray] | None:
    """The receivers (fields, coordinates: receivers x axes) an open NetCDF snapshot file of an `ndim`-D grid holds,
    None where it holds no traces."""
    if "traces" not in f.variables:
        return None
    return strings(f["receiver_field"][:]), np.stack([f[f"receiver_{name}"][:] for name in AXIS_NAMES[ndim]], axis=1)
