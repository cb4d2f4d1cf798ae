"""Snapshot series in HDF5 (one time-indexed, chunked dataset per field) with an XDMF sidecar.

Layout: root attributes from RunInfo; /step and /time (one entry per complete
snapshot); /fields/<name> of shape (T, *grid shape); where the run has receivers,
/traces: values (recorded steps x receivers), step and time (one entry per
recorded step, /traces/step extended last as /step is), at (receivers x axes,
x last) and field (each receiver's field's name). The file is open only
while a snapshot is being written: each snapshot opens it, appends, and closes
it, so between snapshots (and after kill -9 or a failed write) it is a plain,
closed HDF5 file that h5py and ParaView open without SWMR. /step is extended
last, so len(/step) counts the complete snapshots. The empty layout is created
under a temporary name and renamed into place, so the file never exists half made.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from ..errors import StencilforgeError
from ..grid import AXIS_NAMES
from ..optional import require
from ..points import Traces
from .meta import SNAPSHOT_FORMAT as FORMAT, TRACE_ROWS, Receivers, RunInfo, receivers_match
from .paths import atomic_path, reserve

CHUNK_BYTES = 4 << 20
COMPRESSIONS = ("none", "gzip", "lzf")


def chunk_shape(shape: tuple[int, ...], itemsize: int, target: int = CHUNK_BYTES) -> tuple[int, ...]:
    """One snapshot per chunk, trailing axes kept whole while the chunk stays near `target` bytes."""
    chunk = [1] * len(shape)
    size = itemsize
    for axis in reversed(range(len(shape))):
        room = max(1, target // size)
        chunk[axis] = min(shape[axis], room)
        size *= chunk[axis]
        if chunk[axis] < shape[axis]:
            break
    return (1, *chunk)


def complete_steps(steps: np.ndarray) -> np.ndarray:
    """The entries of /step up to the first -1 (the fill value of an entry whose write was interrupted)."""
    bad = np.flatnonzero(steps < 0)
    return steps[: bad[0]] if bad.size else steps


def write_image(path: Path, build) -> None:
    """Create the HDF5 file `path` as build(file) makes it: built in memory, written with plain file I/O,
    so a full disk fails as an ordinary OSError before HDF5 writes anything to it."""
    f = require("h5py", f"writing {path}").File(f"{path}.image", "w", driver="core", backing_store=False)
    try:
        build(f)
        f.flush()
        image = f.id.get_file_image()
    finally:
        f.close()
    with open(path, "wb") as fh:
        fh.write(image)


def series_run_id(path: Path) -> str | None:
    """The run id recorded in a snapshot file (HDF5, NetCDF-4, whose global attributes are the HDF5 root's, or npz),
    or None when it is not one of ours."""
    path = Path(path)
    if path.suffix.lower() == ".npz":
        from .npz import read_meta

        meta = read_meta(path)
        return None if meta is None or meta.get("format") != FORMAT else str(meta.get("run_id", ""))
    try:
        with require("h5py", f"reading {path}").File(path, "r", locking=False) as f:
            if f.attrs.get("format") != FORMAT:
                return None
            value = f.attrs.get("run_id", "")
            return value.decode() if isinstance(value, bytes) else str(value)
    except OSError:
        return None


class H5Sink:
    """Appends snapshots to an HDF5 file and keeps its XDMF sidecar in step.

    The file is created with the first snapshot, so a run refused or stopped
    before it leaves no file behind. With `resume_step` the sink continues the
    series already in the file instead: it keeps the snapshots and traces up to
    that step (later ones are recomputed by the resumed run, bit for bit) and appends.
    `receivers`: the run's, whose traces `write_traces` adds after each snapshot and when the run ends.
    """

    def __init__(self, path: Path, info: RunInfo, fields: dict[str, tuple[tuple[int, ...], np.dtype]],
                 every: int | None, t0: float = 0.0, dt: float = 0.0, compression: str = "none",
                 resume_step: int | None = None, receivers: Receivers | None = None):
        if compression not in COMPRESSIONS:
            raise StencilforgeError(f"compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}")
        self.path = Path(path)
        self.xdmf_path = self.path.with_suffix(".xmf")
        self.info = info
        self.attrs = {**info.attrs(), "format": FORMAT, "format_version": 1, "snapshot_every": int(every or 0),
                      "t0": float(t0), "dt": float(dt)}
        self.compression = compression
        self.created = False
        self.count = 0
        self.last_step: int | None = None
        self.times: list[float] = []
        self.layout = {name: (tuple(shape), np.dtype(dtype)) for name, (shape, dtype) in fields.items()}
        self.receivers = receivers
        self.traced = 0  # complete rows of /traces
        require("h5py", f"snapshot file {self.path}")
        if resume_step is not None:
            self._adopt(resume_step)

    def _open(self):
        # locking=False: a reader that keeps the file open (ParaView) must not block the next snapshot.
        return require("h5py", f"snapshot file {self.path}").File(self.path, "r+", locking=False)

    def _adopt(self, resume_step: int) -> None:
        """Continue the series in the file: same run and layout, snapshots after `resume_step` dropped."""
        try:
            with self._open() as f:
                if f.attrs.get("run_id") != self.info.run_id or not self.info.run_id:
                    raise StencilforgeError(f"cannot append to {self.path}: it was written by another run")
                found = {name: (ds.shape[1:], ds.dtype) for name, ds in f["fields"].items()}
                if found != self.layout:
                    raise StencilforgeError(f"cannot append to {self.path}: its fields {sorted(found)} do not match this run's")
                if not receivers_match(self.receivers, (strings(f["traces/field"][:]), f["traces/at"][:]) if "traces" in f else None):
                    raise StencilforgeError(f"cannot append to {self.path}: its receivers do not match this run's")
                steps = complete_steps(f["step"][:])
                keep = int(np.count_nonzero(steps <= resume_step))
                for ds in (*f["fields"].values(), f["time"], f["step"]):
                    ds.resize(keep, axis=0)
                self.times = [float(t) for t in f["time"][:keep]]
                if "traces" in f:
                    traced = complete_steps(f["traces/step"][:])
                    self.traced = int(np.count_nonzero(traced <= resume_step))
                    for name in ("values", "time", "step"):
                        f["traces"][name].resize(self.traced, axis=0)
        except (OSError, KeyError) as exc:
            raise StencilforgeError(f"cannot append to {self.path}: {exc}") from None
        self.created, self.count = True, keep
        self.last_step = int(steps[keep - 1]) if keep else None
        write_xdmf(self.xdmf_path, self.path, self.info, self.layout, self.times)

    def _create(self) -> None:
        """The empty layout, made under a temporary name and renamed into place."""
        h5py = require("h5py", f"snapshot file {self.path}")

        def build(f):
            f.attrs.update(self.attrs)
            f.create_dataset("step", shape=(0,), maxshape=(None,), dtype=np.int64, chunks=(1024,), fillvalue=-1)
            f.create_dataset("time", shape=(0,), maxshape=(None,), dtype=np.float64, chunks=(1024,))
            group = f.create_group("fields")
            options = {} if self.compression == "none" else {"compression": self.compression}
            if self.compression == "gzip":
                options["compression_opts"] = 4
            for name, (shape, dtype) in self.layout.items():
                group.create_dataset(name, shape=(0, *shape), maxshape=(None, *shape), dtype=dtype,
                                     chunks=chunk_shape(shape, dtype.itemsize), **options)
            if self.receivers is not None:
                traces = f.create_group("traces")
                width = len(self.receivers.fields)
                traces.create_dataset("values", shape=(0, width), maxshape=(None, width), dtype=np.float64,
                                      chunks=self.receivers.chunks())
                traces.create_dataset("time", shape=(0,), maxshape=(None,), dtype=np.float64, chunks=(TRACE_ROWS,))
                traces.create_dataset("step", shape=(0,), maxshape=(None,), dtype=np.int64, chunks=(TRACE_ROWS,),
                                      fillvalue=-1)
                traces.create_dataset("at", data=self.receivers.at).attrs["axes"] = " ".join(AXIS_NAMES[self.receivers.at.shape[1]])
                traces.create_dataset("field", data=list(self.receivers.fields), dtype=h5py.string_dtype())

        with atomic_path(self.path) as tmp:
            write_image(tmp, build)
        self.created = True

    def append(self, step: int, t: float, arrays: dict[str, np.ndarray]) -> None:
        """Write one snapshot in two sessions: the data and its time, closed (so on disk, with the file's
        end address), then the /step entry that makes it count. A crash during the first leaves /step
        as it was; during the second it changes only blocks that already exist, and an entry whose value
        did not land reads as the fill value -1, which readers skip."""
        if not self.created:
            self._create()
        n = self.count
        reserve(self.path, sum(a.nbytes for a in arrays.values()))
        with self._open() as f:
            for name, arr in arrays.items():
                ds = f["fields"][name]
                ds.resize(n + 1, axis=0)
                ds[n] = arr
            f["time"].resize(n + 1, axis=0)
            f["time"][n] = t
        reserve(self.path, 0)
        with self._open() as f:
            f["step"].resize(n + 1, axis=0)
            f["step"][n] = step
        self.count, self.last_step = n + 1, int(step)
        self.times.append(float(t))
        try:
            write_xdmf(self.xdmf_path, self.path, self.info, self.layout, self.times)
        except OSError as exc:  # the snapshot itself is complete: say it is the sidecar that failed
            raise OSError(exc.errno, f"{exc.strerror} (writing {self.xdmf_path.name})") from None

    def write_traces(self, traces: Traces) -> None:
        """Append rows of the run's traces after those the file holds (after a snapshot, or at the end), in two sessions
        as a snapshot is: the values and times, closed, then the /traces/step entries that make them count."""
        rows = len(traces.steps)
        if not self.created:  # a blow-up before the first snapshot: the file holds its traces alone
            self._create()
        n = self.traced
        reserve(self.path, traces.values.nbytes + traces.times.nbytes)
        with self._open() as f:
            for name, data in (("values", traces.values), ("time", traces.times)):
                f["traces"][name].resize(n + rows, axis=0)
                f["traces"][name][n:] = data
        reserve(self.path, traces.steps.nbytes)
        with self._open() as f:
            f["traces/step"].resize(n + rows, axis=0)
            f["traces/step"][n:] = traces.steps
        self.traced = n + rows

    def close(self) -> None:
        """Nothing stays open between snapshots."""


def strings(values) -> tuple[str, ...]:
    """Strings as h5py reads them (bytes), as str."""
    return tuple(v.decode() if isinstance(v, bytes) else str(v) for v in values)


def _number_type(dtype: np.dtype) -> tuple[str, str]:
    return ("Float" if dtype.kind == "f" else "Int"), str(dtype.itemsize)


def xdmf_tree(h5_name: str, info: RunInfo, layout: dict, times: list[float]) -> ET.ElementTree:
    """A temporal collection of uniform CoRect grids, one per complete snapshot, reading hyperslabs of the HDF5 datasets."""
    ndim = len(info.shape)
    if ndim not in (2, 3):
        raise StencilforgeError(f"XDMF needs a 2D or 3D grid, got {ndim}D")
    root = ET.Element("Xdmf", Version="2.0")
    domain = ET.SubElement(root, "Domain")
    series = ET.SubElement(domain, "Grid", Name=info.problem, GridType="Collection", CollectionType="Temporal")
    # XDMF CoRect meshes take dimensions, origin and spacing slowest axis first (z y x): our C order as is.
    dims = " ".join(str(n) for n in info.shape)
    total = len(times)
    for i, t in enumerate(times):
        grid = ET.SubElement(series, "Grid", Name=f"{info.problem}_{i}", GridType="Uniform")
        ET.SubElement(grid, "Time", Value=repr(float(t)))
        ET.SubElement(grid, "Topology", TopologyType=f"{ndim}DCoRectMesh", Dimensions=dims)
        geometry = ET.SubElement(grid, "Geometry", GeometryType="ORIGIN_DXDYDZ" if ndim == 3 else "ORIGIN_DXDY")
        for values in (info.lower, info.spacing):
            item = ET.SubElement(geometry, "DataItem", Format="XML", NumberType="Float", Precision="8", Dimensions=str(ndim))
            item.text = " ".join(repr(float(v)) for v in values)
        for name, (shape, dtype) in layout.items():
            attribute = ET.SubElement(grid, "Attribute", Name=name, AttributeType="Scalar", Center="Node")
            slab = ET.SubElement(attribute, "DataItem", ItemType="HyperSlab", Dimensions=" ".join(map(str, shape)))
            select = ET.SubElement(slab, "DataItem", Format="XML", NumberType="Int", Dimensions=f"3 {ndim + 1}")
            select.text = " ".join([str(i)] + ["0"] * ndim + ["1"] * (ndim + 1) + ["1"] + [str(n) for n in shape])
            number, precision = _number_type(dtype)
            data = ET.SubElement(slab, "DataItem", Format="HDF", NumberType=number, Precision=precision,
                                 Dimensions=" ".join(map(str, (total, *shape))))
            data.text = f"{h5_name}:/fields/{name}"
    tree = ET.ElementTree(root)
    ET.indent(tree)
    return tree


def write_xdmf(path: Path, h5_path: Path, info: RunInfo, layout: dict, times: list[float]) -> None:
    """Rewrite the sidecar atomically, so ParaView never opens a half-written one."""
    tree = xdmf_tree(Path(h5_path).name, info, layout, times)
    with atomic_path(Path(path), durable=False) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(b'<?xml version="1.0" ?>\n<!DOCTYPE Xdmf SYSTEM "Xdmf.dtd" []>\n')
            tree.write(fh, encoding="utf-8", xml_declaration=False)
            fh.write(b"\n")
