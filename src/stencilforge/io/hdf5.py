"""Snapshot series in HDF5 (one time-indexed, chunked dataset per field) with an XDMF sidecar.

Layout: root attributes from RunInfo; /step and /time (one entry per complete
snapshot); /fields/<name> of shape (T, *grid shape). The file is written in
SWMR mode and /step is extended only after the fields of that snapshot are
flushed, so len(/step) is the count of complete snapshots even if the writer
dies mid-write, and ParaView can read the file while the run goes on.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from ..errors import StencilforgeError
from .meta import RunInfo
from .paths import atomic_path

FORMAT = "stencilforge-snapshots"
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


def _h5py():
    try:
        import h5py
    except ImportError:
        raise StencilforgeError("HDF5 output needs h5py: pip install h5py") from None
    return h5py


class H5Sink:
    """Appends snapshots to an HDF5 file and keeps its XDMF sidecar in step.

    The file is created with the first snapshot, so a run refused or stopped
    before it leaves no file behind.
    """

    def __init__(self, path: Path, info: RunInfo, fields: dict[str, tuple[tuple[int, ...], np.dtype]],
                 every: int, t0: float = 0.0, dt: float = 0.0, compression: str = "none"):
        if compression not in COMPRESSIONS:
            raise StencilforgeError(f"compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}")
        self.path = Path(path)
        self.xdmf_path = self.path.with_suffix(".xmf")
        self.info = info
        self.attrs = {**info.attrs(), "format": FORMAT, "format_version": 1, "snapshot_every": int(every), "t0": float(t0), "dt": float(dt)}
        self.compression = compression
        self.file = None
        self.count = 0
        self.times: list[float] = []
        self.layout = {name: (tuple(shape), np.dtype(dtype)) for name, (shape, dtype) in fields.items()}
        _h5py()

    def _create(self):
        f = _h5py().File(self.path, "w", libver="latest")
        f.attrs.update(self.attrs)
        f.create_dataset("step", shape=(0,), maxshape=(None,), dtype=np.int64, chunks=(1024,))
        f.create_dataset("time", shape=(0,), maxshape=(None,), dtype=np.float64, chunks=(1024,))
        group = f.create_group("fields")
        options = {} if self.compression == "none" else {"compression": self.compression}
        if self.compression == "gzip":
            options["compression_opts"] = 4
        for name, (shape, dtype) in self.layout.items():
            group.create_dataset(name, shape=(0, *shape), maxshape=(None, *shape), dtype=dtype,
                                 chunks=chunk_shape(shape, dtype.itemsize), **options)
        f.swmr_mode = True  # from here on readers (ParaView) may open the file while we append
        return f

    def append(self, step: int, t: float, arrays: dict[str, np.ndarray]) -> None:
        """Write one snapshot; it counts as complete only once /step has grown."""
        if self.file is None:
            self.file = self._create()
        n = self.count
        for name, arr in arrays.items():
            ds = self.file["fields"][name]
            ds.resize(n + 1, axis=0)
            ds[n] = arr
            ds.flush()
        for name, value in (("time", t), ("step", step)):
            ds = self.file[name]
            ds.resize(n + 1, axis=0)
            ds[n] = value
            ds.flush()
        self.count = n + 1
        self.times.append(float(t))
        write_xdmf(self.xdmf_path, self.path, self.info, self.layout, self.times)

    def close(self) -> None:
        if self.file is not None and self.file.id.valid:
            self.file.close()


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
