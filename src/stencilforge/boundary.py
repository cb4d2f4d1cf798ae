"""Boundary conditions, applied by filling ghost layers with array-module slicing.

The same code runs on NumPy and CuPy arrays (on the GPU every assignment is a
device kernel), so no backend carries its own boundary logic. `bind` does the
per-run work once (slices, ghost coordinates moved to the device) and returns
the callable the time loop invokes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .grid import Grid

Face = tuple[int, int]  # (axis, side), side 0 = low end, 1 = high end
Filler = Callable[[object, float], None]


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


@dataclass(frozen=True)
class Dirichlet:
    """Fixed values in the ghost layers: a constant, or value(x, y[, z], t) -> array.

    A function is evaluated on the ghost points' own coordinates, so an exact
    solution that extends smoothly past the wall keeps high-order stencils exact.
    """

    value: float | Callable = 0.0
    time_dependent: bool = False

    @property
    def static(self) -> bool:
        return not self.time_dependent

    def bind(self, grid: Grid, xp=np, faces: Sequence[Face] | None = None) -> Filler:
        regions = [ghost_region(grid, a, s) for a, s in (faces if faces is not None else all_faces(grid.ndim))]
        if not callable(self.value):
            value = self.value

            def fill_constant(arr, t):
                for region in regions:
                    arr[region] = value

            return fill_constant
        coords = []
        for region in regions:
            axes = []
            for a in range(grid.ndim):
                c = grid.coords(a)[region[a]]
                shape = [1] * grid.ndim
                shape[a] = c.size
                axes.append(xp.asarray(c.reshape(shape)))
            coords.append(axes)
        func = self.value

        def fill_function(arr, t):
            for region, xs in zip(regions, coords):
                arr[region] = func(*xs, t)

        return fill_function


@dataclass(frozen=True)
class Neumann:
    """Zero normal derivative: ghosts mirror the interior about a wall half a cell out."""

    static = False

    def bind(self, grid: Grid, xp=np, faces: Sequence[Face] | None = None) -> Filler:
        pairs = [
            (ghost_region(grid, a, s), _source_region(grid, a, s, mirror=True), a)
            for a, s in (faces if faces is not None else all_faces(grid.ndim))
        ]

        def fill(arr, t):
            for dst, src, axis in pairs:
                arr[dst] = xp.flip(arr[src], axis=axis)

        return fill


@dataclass(frozen=True)
class Periodic:
    """Ghosts hold copies of the opposite end of the interior."""

    static = False

    def bind(self, grid: Grid, xp=np, faces: Sequence[Face] | None = None) -> Filler:
        pairs = [
            (ghost_region(grid, a, s), _source_region(grid, a, s, mirror=False))
            for a, s in (faces if faces is not None else all_faces(grid.ndim))
        ]

        def fill(arr, t):
            for dst, src in pairs:
                arr[dst] = arr[src]

        return fill


Boundary = Dirichlet | Neumann | Periodic
