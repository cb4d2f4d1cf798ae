"""Sources at any point of the grid: the cells a point touches, their weights, and the arrays that inject
into those cells where the fields live.

A point between grid nodes touches the nodes of the cell around it (two per axis) with linear weights,
products over the axes, that sum to one; along an axis where the point lies on a node, to within a few
roundings of that node's coordinate, it touches the node alone with weight one. A point on a node thus
touches one cell with weight one, so linear and nearest interpolation give the same bits there.

A source adds signal(t) times each weight to its cells after each step: the amount it injects per step is
signal(t), spread over its cells, as a point on a node adds all of it to one cell.

Injection is a gather and a scatter of index arrays on the backend's array module, the same operations
in the same order on every backend, so numpy and numba give the same bits and nothing of a field travels
to the host. Split over ranks, each rank adds the weights of the cells it holds.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Sequence

import numpy as np

from .errors import StencilforgeError

INTERPOLATIONS = ("linear", "nearest")
ON_NODE = 8 * np.finfo(np.float64).eps  # a point this close to a node's coordinate (relative) lies on it


def point_cells(at: Sequence[float], origin: Sequence[float], spacing: Sequence[float], shape: Sequence[int],
                interpolation: str, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Global interior indices (cells x axes, the cells in C order) and float64 weights of the cells a point at
    `at` touches on the lattice of nodes origin + i * spacing; `what` names the point in the error for a point
    outside the grid (linear: outside its first and last nodes; nearest: nearest a node outside it)."""
    per_axis = []
    for axis, (x, lo, h, n) in enumerate(zip(map(float, at), origin, spacing, shape)):
        p = (x - lo) / h
        i = math.floor(p + 0.5)  # the nearest node, ties up
        node = lo + i * h
        lower = math.floor(p)
        if interpolation == "nearest" or p == lower or abs(x - node) <= ON_NODE * max(abs(x), abs(lo), abs(node)):
            touched = [(i, 1.0)]
        else:
            f = p - lower
            touched = [(lower, 1.0 - f), (lower + 1, f)]
        if touched[0][0] < 0 or touched[-1][0] >= n:
            raise StencilforgeError(f"{what} at {tuple(at)} lies outside the grid: axis {axis} has its nodes from "
                                    f"{lo:.6g} to {lo + (n - 1) * h:.6g}")
        per_axis.append(touched)
    corners = list(itertools.product(*per_axis))
    cells = np.array([[i for i, _ in c] for c in corners], dtype=np.int64).reshape(len(corners), len(per_axis))
    return cells, np.array([math.prod(w for _, w in c) for c in corners], dtype=np.float64)


def held(cells: np.ndarray, lattice) -> np.ndarray:
    """Which of the global interior indices `cells` (cells x axes) lie in this lattice's interior (a block's)."""
    start = np.array([lattice.first_index(a) for a in range(lattice.ndim)], dtype=np.int64)
    local = cells - start
    return np.all((local >= 0) & (local < np.array(lattice.shape)), axis=1)


def padded_index(cells: np.ndarray, lattice, xp) -> tuple:
    """Index arrays (one per axis, on `xp`) of global interior indices in this lattice's padded arrays."""
    return tuple(xp.asarray(cells[..., a] - lattice.first_index(a) + lattice.ghost) for a in range(lattice.ndim))


def _cells_of(points, grid, what: str) -> list[tuple[np.ndarray, np.ndarray]]:
    return [point_cells(p.at, grid.origin, grid.spacing, grid.shape, p.interpolation, f"{what} on {p.field.name}")
            for p in points]


class Injection:
    """A problem's sources on one lattice (a block's: the cells it holds), added to the level a step computes.

    A cell several sources touch takes their amounts one after another, in the problem's order of sources:
    the amounts go in rounds, each touching a cell at most once."""

    def __init__(self, problem, lattice, signals: Sequence[Callable[[float], float]], xp):
        """`signals`: each source's signal as a function of t."""
        self.signals = signals
        self.dtype, self.xp = lattice.dtype, xp
        entries: dict[str, list[list]] = {}  # field -> rounds -> (source, cell, weight)
        count: dict[tuple, int] = {}
        for k, (s, (cells, weights)) in enumerate(zip(problem.sources, _cells_of(problem.sources, problem.grid, "source"))):
            mine = held(cells, lattice)
            for cell, w in zip(cells[mine], weights[mine]):
                key = (s.field.name, *cell)
                rounds = entries.setdefault(s.field.name, [])
                r = count[key] = count.get(key, -1) + 1
                if r == len(rounds):
                    rounds.append([])
                rounds[r].append((k, cell, w))
        self.rounds = [(name, padded_index(np.array([c for _, c, _ in batch]), lattice, xp),
                        np.array([k for k, _, _ in batch]), np.array([w for _, _, w in batch], dtype=np.float64))
                       for name, rounds in entries.items() for batch in rounds]

    def add(self, t: float, target: Callable[[str], Any]) -> None:
        """Each source's signal at `t` times its weights, rounded to the grid's dtype, added to its cells of
        `target(field)`: the sum rounded to the grid's dtype, stored in the field's."""
        if not self.rounds:
            return
        values = np.array([signal(t) for signal in self.signals], dtype=np.float64)
        for name, index, sources, weights in self.rounds:
            arr = target(name)
            amounts = self.xp.asarray((weights * values[sources]).astype(self.dtype))
            arr[index] = arr[index].astype(self.dtype, copy=False) + amounts  # float16 storage widens, exactly
