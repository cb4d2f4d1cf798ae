"""Boundary conditions, applied by filling ghost layers with array-module operations.

The same code runs on NumPy and CuPy arrays (on the GPU every assignment is a
device kernel), so no backend carries its own boundary logic. `bind` does the
per-run work once (slices, ghost coordinates moved to the device) and returns
the callable the time loop invokes.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from .errors import StencilforgeError
from .grid import AXIS_NAMES, Grid, row_pitch

if TYPE_CHECKING:
    from .ir.nodes import Expr

Face = tuple[int, int]  # (axis, side), side 0 = low end, 1 = high end
Filler = Callable[[object, float], None]
Scale = Callable[[np.ndarray, np.ndarray, float], None]  # (out, values, factor): out = values * factor


def all_faces(ndim: int) -> tuple[Face, ...]:
    return tuple((axis, side) for axis in range(ndim) for side in (0, 1))


def slab(ndim: int, axis: int, sl: slice) -> tuple[slice, ...]:
    idx = [slice(None)] * ndim
    idx[axis] = sl
    return tuple(idx)


def ghost_region(grid: Grid, axis: int, side: int) -> tuple[slice, ...]:
    g, n = grid.ghost, grid.shape[axis]
    return slab(grid.ndim, axis, slice(0, g) if side == 0 else slice(g + n, 2 * g + n))


def _source_region(grid: Grid, axis: int, side: int, mirror: bool) -> tuple[slice, ...]:
    """Interior slab copied into a ghost slab: the mirror image or the periodic image."""
    g, n = grid.ghost, grid.shape[axis]
    if mirror:
        sl = slice(g, 2 * g) if side == 0 else slice(n, g + n)
    else:
        sl = slice(n, n + g) if side == 0 else slice(g, 2 * g)
    return slab(grid.ndim, axis, sl)


def ghost_boxes(grid: Grid, faces: Sequence[Face]) -> list[tuple[slice, ...]]:
    """The faces' ghost slabs as boxes that cover each ghost cell once.

    A slab spans the other axes' ghosts too (edges and corners), so where two
    faces meet, the later one skips the cells the earlier one already holds.
    """
    g = grid.ghost
    done: set[Face] = set()
    boxes = []
    for axis, side in faces:
        box = []
        for b, n in enumerate(grid.shape):
            if b == axis:
                box.append(slice(0, g) if side == 0 else slice(g + n, 2 * g + n))
            else:
                box.append(slice(g if (b, 0) in done else 0, g + n if (b, 1) in done else 2 * g + n))
        done.add((axis, side))
        boxes.append(tuple(box))
    return boxes


def _ghost_cells(grid: Grid, faces: Sequence[Face], pitch: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Flat indices of the cells the faces' ghost slabs cover, each once, box by box in C order
    (`ghost_boxes`), and their coordinates.

    The indices count elements from the field's first cell in a layout whose rows lie `pitch` apart.
    """
    index: list[np.ndarray] = []
    coords: list[list[np.ndarray]] = [[] for _ in range(grid.ndim)]
    layout = grid.padded_shape[:-1] + (pitch,)
    for box in ghost_boxes(grid, faces):
        mesh = np.meshgrid(*[np.arange(s.start, s.stop) for s in box], indexing="ij")
        flat = np.ravel_multi_index(tuple(m.ravel() for m in mesh), layout)
        index.append(flat.astype(np.int32 if np.prod(layout) < 2**31 else np.int64))
        for b, m in enumerate(mesh):
            coords[b].append(grid.coords(b)[m.ravel()])
    return np.concatenate(index), [np.concatenate(c) for c in coords]


@dataclass(frozen=True)
class Dirichlet:
    """Fixed values in the ghost layers: a constant, value(x, y[, z], t) -> array, or an expression of the
    grid's coordinates and time (sf.where(y > 0.5, 1.0, 0.0)).

    A function is called by name, value(x=..., y=..., z=..., t=...): x is the last
    array axis, y the one before, z axis 0 (1D: value(x, t)), so the order of its
    parameters does not matter but their names do (one that cannot take them by
    name is refused at bind time, not handed the axes in some order). It is
    evaluated on the ghost points' own coordinates, so an exact
    solution that extends smoothly past the wall keeps high-order stencils exact.
    For a function, the ghost cells of all faces are gathered into one index at
    bind time, so a fill is one evaluation and one scatter, not a few small
    kernels per face (on a GPU those launches cost more than the stencil).
    With `time_factor`, value(x, t) = value(x, 0) * time_factor(t): the spatial
    part is evaluated once, on the host in float64 (the same bits on every
    backend), and each step only scales it; on the host, straight into each
    face's box (`ScaledWalls`), where a scatter would cost more than the scaling.
    """

    value: float | Callable | Expr = 0.0
    time_dependent: bool = False
    time_factor: Callable[[float], float] | None = None
    reads_interior = False  # its ghost values at a time do not depend on the field: a fused pair may fill them ahead

    @property
    def static(self) -> bool:
        return not self.time_dependent and self.time_factor is None

    def bind(self, grid: Grid, xp=np, faces: Sequence[Face] | None = None, pitch: int | None = None,
             scaler: Callable[[], Scale | None] | None = None) -> Filler:
        """`pitch`: the row pitch, in elements, of the fields it will fill (None: C-contiguous); `scaler`: a
        backend's `wall_scaler`, asked for a writer only by walls with a time factor on host arrays (None: NumPy's)."""
        faces = faces if faces is not None else all_faces(grid.ndim)
        if not callable(self.value):
            regions = [ghost_region(grid, a, s) for a, s in faces]
            value = self.value

            def fill_constant(arr, t):
                for region in regions:
                    arr[region] = rounded(value, arr, grid.dtype)

            return fill_constant
        pitch = grid.padded_shape[-1] if pitch is None else pitch
        index, coords = _ghost_cells(grid, faces, pitch)
        func, factor = self.value, self.time_factor
        names = argument_names(func, grid.ndim)
        if factor is not None:
            spatial = np.broadcast_to(np.asarray(func(**dict(zip(names, coords)), t=0.0), dtype=np.float64), index.shape)
            if xp is np:
                return ScaledWalls(grid, _box_values(grid, faces, spatial), factor, (scaler and scaler()) or scale_with_numpy)
        cells = xp.asarray(index)
        if factor is not None:
            return _scaled_scatter(xp, cells, xp.asarray(np.ascontiguousarray(spatial)), factor, pitch)
        points = {name: xp.asarray(c) for name, c in zip(names, coords)}

        def fill_function(arr, t):
            _flat(xp, arr, pitch)[cells] = rounded(func(**points, t=t), arr, grid.dtype)

        return fill_function


def argument_names(func: Callable, ndim: int, timed: bool = True) -> tuple[str, ...]:
    """The coordinates' names in array-axis order (z, y, x), once `func` is known to take them (and t, if `timed`)
    by name: a function taking them in another order, or positionally only, is refused rather than given the wrong axes."""
    names = AXIS_NAMES[ndim]
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # no signature to read (some builtins): the call says what it takes
        return names
    try:
        signature.bind(**dict.fromkeys(names), **({"t": 0.0} if timed else {}))
    except TypeError:
        wanted = ", ".join(f"{n}=" for n in (*reversed(names), *(("t",) if timed else ())))
        raise StencilforgeError(f"a Dirichlet value function on a {ndim}D grid is called as value({wanted}) (x the last axis); "
                                f"{getattr(func, '__name__', 'it')}{signature} cannot take those arguments by name") from None
    return names


def scale_with_numpy(out: np.ndarray, values: np.ndarray, factor: float) -> None:
    """out = values * factor in float64, rounded once to out's dtype."""
    np.multiply(values, factor, out=out)


def _box_values(grid: Grid, faces: Sequence[Face], spatial: np.ndarray) -> list[tuple[tuple[slice, ...], np.ndarray]]:
    """(box, values) of each of the faces' ghost boxes (`ghost_boxes`), from values in `_ghost_cells` order."""
    parts, start = [], 0
    for box in ghost_boxes(grid, faces):
        shape = tuple(s.stop - s.start for s in box)
        size = math.prod(shape)
        parts.append((box, spatial[start:start + size].reshape(shape)))
        start += size
    return parts


class ScaledWalls:
    """Host arrays: each ghost box written in place as values * factor(t), rounded to the field's dtype
    once, as the gather does. No index array, no temporary, and the boxes' rows stay contiguous, so a
    fill moves little more than the ghost cells' own bytes. `parts`: (box, values) per face (`_box_values`)."""

    def __init__(self, grid: Grid, parts: list[tuple[tuple[slice, ...], np.ndarray]], factor, scale: Scale):
        self.grid, self.parts, self.factor, self.scale = grid, parts, factor, scale

    def __call__(self, arr, t) -> None:
        f = self.factor(t)
        for box, values in self.parts:
            if arr.dtype == np.float16:
                arr[box] = rounded(values * f, arr, self.grid.dtype)
            else:
                self.scale(arr[box], values, f)


_SCALED_SCATTER = r"""
struct half_bits { unsigned short bits; };  // float16 storage, written from the value rounded to float32
__device__ __forceinline__ void store(float* p, double v) { *p = (float)v; }
__device__ __forceinline__ void store(double* p, double v) { *p = v; }
__device__ __forceinline__ void store(half_bits* p, double v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"((float)v));
    p->bits = h;
}
template <typename T, typename I>
__global__ void scaled_scatter(T* __restrict__ field, const I* __restrict__ cells, const double* __restrict__ spatial,
                               double factor, long long count) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) store(field + cells[i], spatial[i] * factor);
}
"""


def _scaled_scatter(xp, cells, spatial, factor, pitch: int) -> Filler:
    """A GPU field's ghost cells set to spatial * factor(t) by one kernel launch per fill: the product in
    float64, rounded to the field's dtype once, as on the host. (Array statements took a multiply, a
    strided view and a scatter, whose launches and host work cost more than a small grid's step.)"""
    kernels: dict = {}
    count = int(cells.size)
    blocks = (max(1, -(-count // 256)),)

    def fill_scaled(arr, t):
        if row_pitch(arr) != pitch:
            raise ValueError(f"boundary values need a field with rows {pitch} elements apart, got strides {arr.strides}")
        kernel = kernels.get(arr.dtype)
        if kernel is None:
            real = {"float16": "half_bits", "float32": "float", "float64": "double"}[arr.dtype.name]
            index = "int" if cells.dtype == np.int32 else "long long"
            module = xp.RawModule(code=_SCALED_SCATTER, options=("-std=c++17",),
                                  name_expressions=[f"scaled_scatter<{real}, {index}>"])
            kernel = kernels[arr.dtype] = module.get_function(f"scaled_scatter<{real}, {index}>")
        kernel(blocks, (256,), (arr, cells, spatial, np.float64(factor(t)), np.int64(count)))

    return fill_scaled


def rounded(values, arr, dtype):
    """Wall values for `arr`: as they are for a field stored in the grid's dtype; rounded to the grid's
    dtype first for one stored in float16, so host and device round alike (CuPy converts a double to
    half through float)."""
    if arr.dtype != np.float16:
        return values
    return values.astype(dtype) if hasattr(values, "astype") else np.dtype(dtype).type(values)


def _flat(xp, arr, pitch: int):
    """A 1D view from a field's first cell to its last, for a field whose rows lie `pitch` apart
    and whose planes follow each other without gaps; any other layout would misplace the writes."""
    if row_pitch(arr) != pitch:
        raise ValueError(f"boundary values need a field with rows {pitch} elements apart, got strides {arr.strides}")
    span = (math.prod(arr.shape[:-1]) - 1) * pitch + arr.shape[-1]
    return xp.lib.stride_tricks.as_strided(arr, shape=(span,), strides=(arr.itemsize,))


@dataclass(frozen=True)
class Copies:
    """A wall that reads its field: ghost boxes copied from interior boxes in order (Neumann's mirror images,
    Periodic's wrapped ones). `pairs` holds (ghost box, interior box) as tuples of slices, so that a compiled loop
    can repeat the same copies (`Backend.iterated_pass`)."""

    pairs: tuple[tuple[tuple[slice, ...], tuple[slice, ...]], ...]

    def __call__(self, arr, t) -> None:
        for dst, src in self.pairs:
            arr[dst] = arr[src]


@dataclass(frozen=True)
class Neumann:
    """Zero normal derivative: ghosts mirror the interior about a wall half a cell out."""

    static = False
    reads_interior = True

    def bind(self, grid: Grid, xp=np, faces: Sequence[Face] | None = None, pitch: int | None = None) -> Filler:
        return Copies(tuple((ghost_region(grid, a, s), _reversed(_source_region(grid, a, s, mirror=True), a))
                            for a, s in (faces if faces is not None else all_faces(grid.ndim))))


def _reversed(region: tuple[slice, ...], axis: int) -> tuple[slice, ...]:
    """`region` read backwards along `axis` (a view, where flip() cost more than the copy of a small slab); its
    slice there starts at 1 or more, so the reversed one stops at 0 or more."""
    sl = region[axis]
    return region[:axis] + (slice(sl.stop - 1, sl.start - 1, -1),) + region[axis + 1:]


@dataclass(frozen=True)
class Periodic:
    """Ghosts hold copies of the opposite end of the interior."""

    static = False
    reads_interior = True

    def bind(self, grid: Grid, xp=np, faces: Sequence[Face] | None = None, pitch: int | None = None) -> Filler:
        return Copies(tuple((ghost_region(grid, a, s), _source_region(grid, a, s, mirror=False))
                            for a, s in (faces if faces is not None else all_faces(grid.ndim))))


@dataclass(frozen=True)
class Sides:
    """Two walls of one axis that differ, at its low and its high end (inflow and outflow, say): each
    Dirichlet or Neumann; a periodic axis is periodic at both ends."""

    low: Dirichlet | Neumann
    high: Dirichlet | Neumann


Boundary = Dirichlet | Neumann | Periodic


def faces_of(axis: int, cond: Boundary | Sides, faces: Sequence[Face] = ((0, 0), (0, 1))) -> list[tuple[Boundary, tuple[Face, ...]]]:
    """(condition, its faces) along `axis`, of the faces in `faces` (by side; both ends by default): one entry
    for a condition of the whole axis, one per end for `Sides`."""
    sides = tuple(side for _, side in faces)
    if isinstance(cond, Sides):
        return [(c, ((axis, side),)) for side, c in ((0, cond.low), (1, cond.high)) if side in sides]
    chosen = tuple((axis, side) for side in (0, 1) if side in sides)
    return [(cond, chosen)] if chosen else []


def conditions(conds: Sequence[Boundary | Sides]) -> list[Boundary]:
    """Every condition of a field's walls, both ends of `Sides` included."""
    return [c for cond in conds for c in ((cond.low, cond.high) if isinstance(cond, Sides) else (cond,))]


def bind(cond: Boundary, grid: Grid, backend, faces: Sequence[Face] | None = None, pitch: int | None = None) -> Filler:
    """cond's filler for fields on `backend`, whose `wall_scaler` reaches the walls that scale (Dirichlet)."""
    if isinstance(cond, Dirichlet):
        return cond.bind(grid, backend.xp, faces, pitch, scaler=backend.wall_scaler)
    return cond.bind(grid, backend.xp, faces, pitch)
