"""Structured grids whose fields carry ghost layers, so interior kernels need no bounds checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .errors import StencilforgeError

AXIS_NAMES = {1: ("x",), 2: ("y", "x"), 3: ("z", "y", "x")}  # in array order: the last axis is x
DTYPES = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}


def parse_dtype(dtype: str | np.dtype | type) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt.name not in DTYPES:
        raise StencilforgeError(f"unsupported dtype {dtype!r}: choose float32 or float64")
    return dt.newbyteorder("=")  # big-endian input is converted: compiled kernels take native byte order only


@dataclass(frozen=True)
class Grid:
    """Interior shape (C order, last axis x contiguous), spacing, dtype and ghost width.

    Interior point i along an axis sits at lower + i * spacing; ghost points
    continue the same lattice outside the interior.
    """

    shape: tuple[int, ...]
    spacing: tuple[float, ...]
    dtype: np.dtype
    ghost: int
    lower: tuple[float, ...]

    @classmethod
    def unit_box(cls, shape: Sequence[int], dtype, ghost: int, periodic: bool = False) -> "Grid":
        """The unit box [0, 1]^d: Dirichlet nodes at 0 and 1 (or a periodic lattice)."""
        shape = tuple(int(n) for n in shape)
        check_shape(shape, ghost)
        if periodic:
            spacing = tuple(1.0 / n for n in shape)
            lower = tuple(0.0 for _ in shape)
        else:
            spacing = tuple(1.0 / (n + 1) for n in shape)
            lower = spacing
        return cls(shape, spacing, parse_dtype(dtype), ghost, lower)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def padded_shape(self) -> tuple[int, ...]:
        return tuple(n + 2 * self.ghost for n in self.shape)

    @property
    def interior(self) -> tuple[slice, ...]:
        g = self.ghost
        return tuple(slice(g, g + n) for n in self.shape)

    @property
    def cells(self) -> int:
        return int(np.prod(self.shape))

    def first_index(self, axis: int) -> int:
        """Global index of the first interior point along `axis`: 0 here, a block's start in a
        decomposed run, so coordinates are formed from the same integers on every block."""
        return 0

    def coords(self, axis: int, ghosts: bool = True) -> np.ndarray:
        """Float64 coordinates along one axis, ghost points included by default."""
        g = self.ghost if ghosts else 0
        s = self.first_index(axis)
        idx = np.arange(s - g, s + self.shape[axis] + g, dtype=np.float64)
        return self.lower[axis] + idx * self.spacing[axis]

    def mesh(self, ghosts: bool = True) -> tuple[np.ndarray, ...]:
        return tuple(np.meshgrid(*(self.coords(a, ghosts) for a in range(self.ndim)), indexing="ij", sparse=True))

    def zeros(self, xp=np) -> "np.ndarray":
        return xp.zeros(self.padded_shape, dtype=self.dtype)


def check_shape(shape: Sequence[int], radius: int) -> None:
    if not shape or any(not isinstance(n, (int, np.integer)) for n in shape):
        raise StencilforgeError(f"shape must be a list of integers, got {shape!r}")
    smallest = 2 * radius + 1
    for n in shape:
        if n < smallest:
            raise StencilforgeError(
                f"shape {tuple(shape)} is too small: every axis needs at least 2*radius+1 = {smallest} points"
            )


def pitched(buf, shape: Sequence[int], pitch: int, first: int = 0):
    """A view of `shape` into the 1D array `buf` whose rows start `pitch` elements apart, the first
    row at buf[first]: a field with gaps after its rows (the cuda backend puts rows on cache lines)."""
    rows = int(np.prod(shape[:-1]))
    return buf[first : first + rows * pitch].reshape(tuple(shape[:-1]) + (pitch,))[..., : shape[-1]]


def row_pitch(arr) -> int | None:
    """Elements from one row's start to the next's, for an array whose rows are contiguous and whose
    planes follow each other without gaps (C-contiguous, or `pitched`); None for any other layout."""
    item = arr.itemsize
    if arr.strides[-1] != item:
        return None
    if arr.ndim == 1:
        return arr.shape[0]
    pitch, rest = divmod(arr.strides[-2], item)
    if rest or pitch < arr.shape[-1]:
        return None
    plane = arr.strides[-2]
    for n, stride in zip(reversed(arr.shape[1:-1]), reversed(arr.strides[:-2])):
        plane *= n
        if stride != plane:
            return None
    return pitch
