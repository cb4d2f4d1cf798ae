"""Checkpoints: the full state (every field, all time levels, ghost layers), enough to resume bit for bit.

A checkpoint is written to a temporary file in the target directory, synced,
and renamed over the previous one, so a crash mid-write leaves the last good
checkpoint in place. Field datasets carry Fletcher-32 checksums, so a corrupted
file is refused on read rather than resumed from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import StencilforgeError
from ..optional import require
from .hdf5 import write_image
from .meta import SNAPSHOT_FORMAT, RunInfo
from .paths import atomic_path, reserve

FORMAT = "stencilforge-checkpoint"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    info: RunInfo
    step: int
    t: float
    fields: dict


def write(path: Path, info: RunInfo, step: int, t: float, fields: dict[str, np.ndarray]) -> None:
    """Write a checkpoint beside `path` and rename it into place; the disk space is reserved before HDF5 writes."""
    h5py = require("h5py", f"checkpoint {path}")

    def build(f):
        f.attrs.update(info.attrs())
        f.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, step=int(step), t=float(t))
        group = f.create_group("fields")
        for name, arr in fields.items():
            group.create_dataset(name, shape=arr.shape, dtype=arr.dtype, fletcher32=True)

    with atomic_path(Path(path)) as tmp:
        write_image(tmp, build)
        reserve(tmp, sum(arr.nbytes for arr in fields.values()))
        with h5py.File(tmp, "r+", locking=False) as f:
            for name, arr in fields.items():
                f["fields"][name][...] = arr


class CheckpointSink:
    """StreamingObserver sink: each append replaces the checkpoint file."""

    def __init__(self, path: Path, info: RunInfo):
        self.path, self.info, self.count = Path(path), info, 0
        self.last_step: int | None = None

    def append(self, step: int, t: float, arrays: dict[str, np.ndarray]) -> None:
        write(self.path, self.info, step, t, arrays)
        self.count += 1
        self.last_step = int(step)

    def close(self) -> None:
        """Nothing stays open between checkpoints."""


def _checked(path: Path, load):
    """Open `path`, check it is a checkpoint we can read, and return load(file); refusals are one line."""
    if not path.is_file():
        raise StencilforgeError(f"cannot resume: no such checkpoint {path}")
    h5py = require("h5py", f"reading {path}")
    try:
        with h5py.File(path, "r", locking=False) as f:
            kind = f.attrs.get("format")
            if kind == SNAPSHOT_FORMAT:
                raise StencilforgeError(f"cannot resume from {path}: it is a snapshot file, not a checkpoint")
            if kind != FORMAT:
                raise StencilforgeError(f"cannot resume from {path}: not a stencilforge checkpoint")
            if int(f.attrs["format_version"]) > FORMAT_VERSION:
                raise StencilforgeError(f"cannot resume from {path}: written by a newer stencilforge (format {f.attrs['format_version']})")
            return load(f)
    except StencilforgeError:
        raise
    except (OSError, KeyError, ValueError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StencilforgeError(f"cannot resume from {path}: corrupted or not a checkpoint ({reason})") from None


def _native(arr: np.ndarray) -> np.ndarray:
    """Fields in native byte order: a checkpoint written big-endian must still resume on compiled kernels."""
    return arr.astype(arr.dtype.newbyteorder("="), copy=False)


def peek(path: str | Path) -> tuple[RunInfo, int]:
    """(run info, step) of a checkpoint without loading its fields: enough to check outputs before the run."""
    return _checked(Path(path), lambda f: (RunInfo.from_attrs(f.attrs), int(f.attrs["step"])))


def read(path: str | Path) -> Checkpoint:
    """Load and validate a checkpoint; anything else (snapshot file, garbage, truncation) is refused in one line."""
    path = Path(path)

    def load(f):
        fields = {name: _native(ds[...]) for name, ds in f["fields"].items()}
        return Checkpoint(path, RunInfo.from_attrs(f.attrs), int(f.attrs["step"]), float(f.attrs["t"]), fields)

    return _checked(path, load)
