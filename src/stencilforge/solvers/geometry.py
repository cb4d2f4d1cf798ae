"""Where the unknowns sit on each axis, how an axis coarsens, and the 1D transfer tables.

Every axis is one of three lattices on [0, L]:

- dirichlet: n nodes at (i + 1) h, h = L / (n + 1); the walls are nodes (the
  ghost layer) holding the boundary values, as in `Grid.unit_box`.
- neumann: n nodes at (i + 1/2) h, h = L / n; the walls lie half a cell
  outside the first and last node, as in `boundary.Neumann`'s mirror. The
  zero-flux wall is built into the operator (the wall face's coefficient is 0).
- periodic: n nodes at i h, h = L / n, as in `Grid.unit_box(periodic=True)`.

An axis with N intervals (dirichlet: n + 1, otherwise n) coarsens to N / 2
intervals when N is even (nested: full weighting and linear interpolation);
when N is odd it coarsens to (N - 1) / 2 or (N + 1) / 2, whichever has more
factors of two, with linear interpolation between the two non-nested lattices,
so any size coarsens and an odd count costs one non-nested level, not all.
Restriction is the transpose of interpolation scaled by h / H, which is full
weighting on nested levels and keeps the V-cycle symmetric for CG.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

WALLS = ("dirichlet", "neumann", "periodic")
_FIRST_NODE = {"dirichlet": Fraction(1), "neumann": Fraction(1, 2), "periodic": Fraction(0)}


def intervals(n: int, wall: str) -> int:
    return n + 1 if wall == "dirichlet" else n


def nodes(intervals_: int, wall: str) -> int:
    return intervals_ - 1 if wall == "dirichlet" else intervals_


def _twos(n: int) -> int:
    return (n & -n).bit_length() - 1


def coarse_intervals(n_intervals: int) -> int:
    if n_intervals % 2 == 0:
        return n_intervals // 2
    lo, hi = (n_intervals - 1) // 2, (n_intervals + 1) // 2
    return lo if _twos(lo) >= _twos(hi) else hi


def can_coarsen(n: int, wall: str) -> bool:
    """At least two coarse intervals (one node on a dirichlet axis, two on the others)."""
    return intervals(n, wall) >= 4


@dataclass(frozen=True)
class Transfer:
    """Banded 1D tables: out[i] = sum_b weight[i, b] * in[index[i, b]] (weight 0 pads short rows)."""

    index: np.ndarray
    weight: np.ndarray


def _banded(rows: list[dict[int, float]]) -> Transfer:
    """Short rows are padded with weight 0 at their own last index, so a padded entry reads a value the
    row reads anyway (a rank's block of a decomposed level holds it too: the same bits, signed zeros included)."""
    width = max(1, max(len(r) for r in rows))
    index = np.zeros((len(rows), width), dtype=np.int64)
    weight = np.zeros((len(rows), width), dtype=np.float64)
    for i, row in enumerate(rows):
        for b, (j, w) in enumerate(sorted(row.items())):
            index[i, b], weight[i, b] = j, w
        if row:
            index[i, len(row):] = index[i, len(row) - 1]
    index.setflags(write=False)
    weight.setflags(write=False)
    return Transfer(index, weight)


def position(i: int, n_from: int, n_to: int, wall: str) -> Fraction:
    """Node i of an axis of n_from nodes in the index units of the same axis with n_to nodes."""
    first = _FIRST_NODE[wall]
    return (i + first) * Fraction(intervals(n_to, wall), intervals(n_from, wall)) - first


@functools.lru_cache(maxsize=64)
def transfers(n: int, wall: str) -> tuple[int, Transfer, Transfer]:
    """(coarse node count, interpolation coarse -> fine, restriction fine -> coarse) for one axis.

    Computed in exact arithmetic, node by node, which costs more than a solve's cycles on large grids:
    kept per (n, wall), read-only, so the next solve of the same size starts at once."""
    big = intervals(n, wall)
    small = coarse_intervals(big)
    m = nodes(small, wall)
    interp: list[dict[int, float]] = []
    for i in range(n):
        t = position(i, n, m, wall)  # fine node i in coarse index units
        j = math.floor(t)
        frac = t - j
        row: dict[int, float] = {}
        for jj, w in ((j, 1 - frac), (j + 1, frac)):
            if w == 0:
                continue
            if wall == "periodic":
                jj %= m
            elif wall == "neumann":
                jj = min(max(jj, 0), m - 1)
            elif not 0 <= jj < m:
                continue  # a dirichlet wall node: corrections vanish there
            row[jj] = row.get(jj, 0.0) + float(w)
        interp.append(row)
    scale = small / big
    restrict: list[dict[int, float]] = [{} for _ in range(m)]
    for i, row in enumerate(interp):
        for j, weight in row.items():
            restrict[j][i] = restrict[j].get(i, 0.0) + scale * weight
    return m, _banded(interp), _banded(restrict)


def coarsened_axes(shape, walls, spacing) -> tuple[bool, ...]:
    """The axes to halve next: those that can and whose spacing is within 1.5x of the finest such axis,
    so a box of unequal spacings is semi-coarsened towards equal spacings (point smoothers stay good)."""
    able = [can_coarsen(n, w) for n, w in zip(shape, walls)]
    if not any(able):
        return tuple(able)
    finest = min(h for h, a in zip(spacing, able) if a)
    return tuple(a and h <= 1.5 * finest for h, a in zip(spacing, able))
