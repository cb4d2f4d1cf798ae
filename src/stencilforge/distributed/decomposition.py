"""Cartesian domain decomposition: the process grid and each rank's block (pure Python, no MPI).

A block keeps the global `lower` and carries its integer `start`, so a block
coordinate is lower + (start + i) * h exactly as in the undecomposed grid:
offsetting `lower` instead would round differently (lower + start*h + i*h) and
break bitwise identity of boundary values and exact solutions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product
from typing import Sequence

import numpy as np

from ..errors import StencilforgeError
from ..grid import Grid


@dataclass(frozen=True)
class BlockGrid(Grid):
    """One rank's block of a global grid: local shape, global coordinates."""

    start: tuple[int, ...] = ()

    def first_index(self, axis: int) -> int:
        return self.start[axis]


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """(start, size) of each of `parts` contiguous pieces of n points, sizes differing by at most one."""
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append((start, size))
        start += size
    return out


def factorizations(n: int, ndim: int) -> list[tuple[int, ...]]:
    """Every ordered tuple of `ndim` positive integers whose product is n."""
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return [dims for dims in product(divisors, repeat=ndim) if math.prod(dims) == n]


def _fits(shape: Sequence[int], dims: Sequence[int], min_extent: Sequence[int]) -> bool:
    return all(n // p >= m for n, p, m in zip(shape, dims, min_extent))


def _cut_area(shape: Sequence[int], dims: Sequence[int]) -> int:
    """Total area of the internal cuts: the halo traffic of one exchange, up to the width."""
    total = math.prod(shape)
    return sum((p - 1) * (total // n) for n, p in zip(shape, dims))


def choose_dims(nprocs: int, shape: Sequence[int], min_extent: Sequence[int]) -> tuple[int, ...]:
    """The process grid with the least cut area, then the smallest largest block, among those that fit."""
    fitting = [d for d in factorizations(nprocs, len(shape)) if _fits(shape, d, min_extent)]
    if not fitting:
        raise StencilforgeError(
            f"cannot split shape {'x'.join(map(str, shape))} over {nprocs} ranks: every process grid leaves "
            f"blocks smaller than the halo/stencil (at least {'x'.join(map(str, min_extent))} points); "
            "use fewer ranks or a larger grid"
        )

    def key(dims):
        largest = math.prod(-(-n // p) for n, p in zip(shape, dims))
        return (_cut_area(shape, dims), largest, tuple(-p for p in dims))

    return min(fitting, key=key)


def check_dims(nprocs: int, shape: Sequence[int], dims: Sequence[int], min_extent: Sequence[int]) -> tuple[int, ...]:
    """A user-given process grid, refused with a one-line reason and a suggestion."""
    dims = tuple(int(p) for p in dims)
    if len(dims) != len(shape):
        raise StencilforgeError(f"--procs needs {len(shape)} values for a {len(shape)}D grid, got {len(dims)}")
    if math.prod(dims) != nprocs:
        raise StencilforgeError(
            f"--procs {' '.join(map(str, dims))} makes {math.prod(dims)} processes but {nprocs} ranks were started"
        )
    for axis, (n, p, m) in enumerate(zip(shape, dims, min_extent)):
        if n // p < m:
            try:
                hint = "another process grid such as --procs " + " ".join(map(str, choose_dims(nprocs, shape, min_extent)))
            except StencilforgeError:
                hint = "fewer ranks"
            raise StencilforgeError(
                f"--procs {' '.join(map(str, dims))} leaves blocks of {n // p} points along axis {axis} "
                f"(of {n}), fewer than the {m} the halo/stencil needs; use {hint}"
            )
    return dims


@dataclass(frozen=True)
class Decomposition:
    """The process grid over a global shape and where each rank's block lies."""

    shape: tuple[int, ...]
    dims: tuple[int, ...]

    @classmethod
    def create(cls, nprocs: int, shape: Sequence[int], min_extent: Sequence[int], dims: Sequence[int] | None = None):
        shape = tuple(int(n) for n in shape)
        chosen = choose_dims(nprocs, shape, min_extent) if dims is None else check_dims(nprocs, shape, dims, min_extent)
        return cls(shape, chosen)

    @property
    def nprocs(self) -> int:
        return math.prod(self.dims)

    def coords_of(self, rank: int) -> tuple[int, ...]:
        """Row-major process coordinates, as MPI_Cart_create numbers ranks without reordering."""
        return tuple(int(c) for c in np.unravel_index(rank, self.dims))

    def extent(self, coords: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """(start, size) along every axis of the block at process coordinates `coords`."""
        return tuple(split(n, p)[c] for n, p, c in zip(self.shape, self.dims, coords))

    def block_grid(self, grid: Grid, coords: Sequence[int]) -> BlockGrid:
        ext = self.extent(coords)
        return BlockGrid(
            tuple(s for _, s in ext), grid.spacing, grid.dtype, grid.ghost, grid.lower, tuple(a for a, _ in ext)
        )

    def physical_faces(self, coords: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """Faces of this block on the global boundary: only there do boundary conditions apply."""
        faces = []
        for axis, (c, p) in enumerate(zip(coords, self.dims)):
            if c == 0:
                faces.append((axis, 0))
            if c == p - 1:
                faces.append((axis, 1))
        return tuple(faces)
