"""Reading a snapshot series back, from HDF5, NetCDF or npz, with only complete snapshots and traces visible."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from ..errors import StencilforgeError
from ..optional import require
from ..points import Traces
from .hdf5 import complete_steps, strings
from .meta import SNAPSHOT_FORMAT as FORMAT, RunInfo
from .netcdf import SERIES, TRACE_TIME, complete_count, file_receivers
from .npz import META_KEY, read_traces


class Series:
    """Steps, times and per-field frames of a snapshot file (interior values, grid shape), and `traces`, what the run's
    receivers recorded (`sf.Traces`, the bits `Result.traces` held), or None where the file holds none."""

    def __init__(self, path: Path, info: RunInfo, names: tuple[str, ...], steps: np.ndarray, times: np.ndarray, read, close=lambda: None,
                 traces: Traces | None = None):
        self.path, self.info, self.names = path, info, names
        self.steps, self.times = steps, times
        self.traces = traces
        self._read, self._close = read, close

    def __len__(self) -> int:
        return len(self.steps)

    def __enter__(self) -> "Series":
        return self

    def __exit__(self, *exc) -> None:
        self._close()

    def field_name(self, name: str | None) -> str:
        if name is None:
            return self.names[0]
        if name not in self.names:
            raise StencilforgeError(f"{self.path} has no field {name!r}; it has {', '.join(self.names)}")
        return name

    def index_of(self, step: int | None) -> int:
        """Position of global step `step` (the last snapshot when None)."""
        if len(self) == 0:
            raise StencilforgeError(f"{self.path} holds no complete snapshot")
        if step is None:
            return len(self) - 1
        hits = np.flatnonzero(self.steps == step)
        if hits.size == 0:
            raise StencilforgeError(
                f"{self.path} has no snapshot at step {step}: it has {len(self)} from step {self.steps[0]} to {self.steps[-1]}"
                f" every {self.steps[1] - self.steps[0] if len(self) > 1 else '-'} steps"
            )
        return int(hits[0])

    def frame(self, name: str, index: int) -> np.ndarray:
        return self._read(name, index)


def open_series(path: str | Path) -> Series:
    """The snapshot file at `path` (.h5/.hdf5, .nc or .npz) as a Series, complete snapshots and traces only; a file that
    is not one, or is damaged, is a one-line error. Use it as a context manager: HDF5 frames are read as asked for."""
    path = Path(path)
    if not path.is_file():
        raise StencilforgeError(f"no such file: {path}")
    if path.suffix.lower() == ".npz":
        return _open_npz(path)
    if path.suffix.lower() == ".nc":
        return _open_nc(path)
    return _open_h5(path)


def _open_h5(path: Path) -> Series:
    h5py = require("h5py", f"reading {path}")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise StencilforgeError(f"{path} is not a readable HDF5 file: {str(exc).splitlines()[0]}") from None
    try:
        if f.attrs.get("format") != FORMAT:
            raise StencilforgeError(f"{path} is not a stencilforge snapshot file")
        info = RunInfo.from_attrs(f.attrs)
        steps = complete_steps(f["step"][:])
        count = len(steps)  # /step grows last: everything it indexes is complete
        times = f["time"][:count]
        names = tuple(f["fields"])
        for name in names:
            _check_complete(path, f["fields"][name], count, info.shape)
        traces = None
        if "traces" in f:
            group = f["traces"]
            traced = complete_steps(group["step"][:])  # extended last, as /step is
            traces = _traces(path, group["values"], traced, group["time"], group["at"][:], strings(group["field"][:]))
    except (KeyError, ValueError, OSError) as exc:
        f.close()
        raise StencilforgeError(f"{path} is not a valid stencilforge snapshot file: {exc}") from None
    except StencilforgeError:
        f.close()
        raise
    def read(name: str, i: int) -> np.ndarray:
        try:
            return f["fields"][name][i]
        except (OSError, ValueError) as exc:
            raise StencilforgeError(f"{path} is damaged: snapshot {i} of {name} cannot be read ({exc})") from None

    return Series(path, info, names, steps, times, read, f.close, traces)


def _open_nc(path: Path) -> Series:
    """Read through h5netcdf; an h5py handle on the same file checks, as for HDF5, that every counted snapshot has its data."""
    h5netcdf = require("h5netcdf", f"reading {path}")
    try:
        h5file = require("h5py", f"reading {path}").File(path, "r")
    except OSError as exc:
        raise StencilforgeError(f"{path} is not a readable NetCDF-4 file: {str(exc).splitlines()[0]}") from None
    try:
        f = h5netcdf.File(h5file, "r")
        if f.attrs.get("format") != FORMAT:
            raise StencilforgeError(f"{path} is not a stencilforge snapshot file")
        info = RunInfo.from_attrs(f.attrs)
        times = f["time"][:]
        count = complete_count(times)  # a time is written last: everything it indexes is complete
        steps, times = f["step"][:count], times[:count]
        names = tuple(name for name, var in f.variables.items() if name not in SERIES and var.dimensions[:1] == ("time",))
        for name in names:
            _check_complete(path, h5file[name], count, info.shape)
        traces, receivers = None, file_receivers(f, len(info.shape))
        if receivers is not None:
            stamps = f[TRACE_TIME][:]  # written last, as time is
            traced = f["trace_step"][: complete_count(stamps)]
            traces = _traces(path, f["traces"], traced, stamps, receivers[1], receivers[0])
    except (KeyError, ValueError, OSError) as exc:
        h5file.close()
        raise StencilforgeError(f"{path} is not a valid stencilforge snapshot file: {exc}") from None
    except StencilforgeError:
        h5file.close()
        raise

    def read(name: str, i: int) -> np.ndarray:
        try:
            return f[name][i]
        except (OSError, ValueError) as exc:
            raise StencilforgeError(f"{path} is damaged: snapshot {i} of {name} cannot be read ({exc})") from None

    def close() -> None:
        f.close()
        h5file.close()

    return Series(path, info, names, steps, times, read, close, traces)


def _traces(path: Path, values, steps: np.ndarray, times, at: np.ndarray, fields: tuple[str, ...]) -> Traces:
    """The complete rows, the `len(steps)` first, of a file's traces; refused where they are missing."""
    count = len(steps)
    if values.shape[0] < count or times.shape[0] < count or tuple(values.shape[1:]) != (len(fields),) or at.shape[0] != len(fields):
        raise StencilforgeError(f"{path} is damaged: its traces have shape {values.shape} for {count} steps of {len(fields)} receivers")
    return Traces(np.asarray(values[:count]), np.asarray(steps), np.asarray(times[:count]), at, fields)


def _check_complete(path: Path, ds, count: int, shape: tuple[int, ...]) -> None:
    """Refuse a file whose step or time counts snapshots that a field does not hold: they would read as zeros."""
    if ds.shape[0] < count or tuple(ds.shape[1:]) != tuple(shape):
        raise StencilforgeError(f"{path} is damaged: {ds.name} has shape {ds.shape} for {count} snapshots of {shape}")
    if ds.chunks is None or count == 0:
        return
    per_snapshot = int(np.prod([-(-n // c) for n, c in zip(ds.shape[1:], ds.chunks[1:])]))
    stored = {info.chunk_offset[0] for info in map(ds.id.get_chunk_info, range(ds.id.get_num_chunks()))
              if info.chunk_offset[0] < count}
    if len(stored) < count or ds.id.get_num_chunks() < count * per_snapshot:
        missing = min(set(range(count)) - stored, default=None)
        where = f"snapshot {missing}" if missing is not None else "some snapshots"
        raise StencilforgeError(f"{path} is damaged: {where} of {ds.name} has no data")


def _open_npz(path: Path) -> Series:
    try:
        data = np.load(path, allow_pickle=False)
        meta = json.loads(str(data[META_KEY]))
        info = RunInfo.from_attrs(meta)
        names = tuple(meta["fields"])
        steps, times = data["step"], data["time"]
        frames = {name: data[f"fields/{name}"] for name in names} if len(steps) else {}
        traces = read_traces(data)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise StencilforgeError(f"{path} is not a valid stencilforge snapshot file: {exc}") from None
    return Series(path, info, names, steps, times, lambda name, i: frames[name][i], traces=traces)
