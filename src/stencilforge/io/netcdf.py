"""Snapshot series as a CF-style NetCDF-4 file, written through h5netcdf, for what reads NetCDF (xarray, netCDF-C and its tools).

Layout: dimensions `time` (unlimited, one entry per snapshot) and the grid's
axes in array order (z, y, x); coordinate variables holding the points'
coordinates and the snapshots' times; `step` along time; one variable per
field of shape (time, *axes), interior points only; global attributes from
RunInfo. As with H5Sink the file is open only while a snapshot is written,
and a snapshot is written in two sessions: the data and its step, closed,
then its time, which makes it count. Until then its time reads as NaN, so the
complete snapshots are the entries before the first NaN time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import StencilforgeError
from ..grid import AXIS_NAMES
from ..optional import require
from .hdf5 import chunk_shape, write_image
from .meta import SNAPSHOT_FORMAT as FORMAT, RunInfo
from .paths import atomic_path, reserve

COMPRESSIONS = ("none", "gzip")  # NetCDF-4 readers know only zlib (gzip) of HDF5's filters
SERIES = ("time", "step")


def coordinates(info: RunInfo) -> dict[str, np.ndarray]:
    """Each axis's point coordinates by name, as `Grid.coords` and `grid.values` compute them."""
    return {name: info.lower[axis] + np.arange(info.shape[axis], dtype=np.float64) * info.spacing[axis]
            for axis, name in enumerate(AXIS_NAMES[len(info.shape)])}


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
    series already in the file: it keeps the snapshots up to that step and appends.
    """

    def __init__(self, path: Path, info: RunInfo, fields: dict[str, tuple[tuple[int, ...], np.dtype]],
                 every: int | None, t0: float = 0.0, dt: float = 0.0, compression: str = "none",
                 resume_step: int | None = None):
        if compression not in COMPRESSIONS:
            raise StencilforgeError(f"a NetCDF snapshot file takes compression {' or '.join(COMPRESSIONS)}, got {compression!r}")
        self.path = Path(path)
        self.info = info
        self.axes = coordinates(info)
        taken = sorted(set(fields) & {*SERIES, *self.axes})
        if taken:
            raise StencilforgeError(f"cannot write field {taken[0]!r} to {self.path}: NetCDF gives that name to a coordinate")
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
                steps = f["step"][: complete_count(f["time"][:])]
                keep = int(np.count_nonzero(steps <= resume_step))
                f.resize_dimension("time", keep)
        except (OSError, KeyError) as exc:
            raise StencilforgeError(f"cannot append to {self.path}: {exc}") from None
        self.created, self.count = True, keep
        self.last_step = int(steps[keep - 1]) if keep else None

    def _create(self) -> None:
        """The empty layout, built in memory, written under a temporary name and renamed into place."""
        def build(h5file):
            with self.h5netcdf.File(h5file, "w") as f:
                f.attrs.update(self.attrs)
                f.dimensions = {"time": None, **{name: len(values) for name, values in self.axes.items()}}
                for name, values in self.axes.items():
                    f.create_variable(name, (name,), np.float64, data=values).attrs.update(axis=name.upper(), long_name=name)
                # NaN until a snapshot's commit writes it: the marker of a complete snapshot
                f.create_variable("time", ("time",), np.float64, chunks=(1024,), fillvalue=np.nan).attrs.update(axis="T", long_name="time")
                f.create_variable("step", ("time",), np.int64, chunks=(1024,)).attrs["long_name"] = "global step"
                options = {"compression": "gzip", "compression_opts": 4} if self.compression == "gzip" else {}
                for name, (shape, dtype) in self.layout.items():
                    f.create_variable(name, ("time", *self.axes), dtype, chunks=chunk_shape(shape, dtype.itemsize), **options)

        with atomic_path(self.path) as tmp:
            write_image(tmp, build)
        self.created = True

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

    def close(self) -> None:
        """Nothing stays open between snapshots."""
