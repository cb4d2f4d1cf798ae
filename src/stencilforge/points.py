"""Sources and receivers at any point of the grid: the cells a point touches, their weights, and the arrays
that inject into and record from those cells where the fields live.

Interpolated linearly, a point between grid nodes touches the nodes of the cell around it (two per axis)
with weights, products over the axes, that sum to one; along an axis where the point lies on a node, to
within a few roundings of that node's coordinate, it touches the node alone with weight one. A point on a
node thus touches one cell with weight one, so every interpolation gives the same bits there.

Sinc interpolation (Hicks 2002, Geophysics 67(1), 156-166) touches, along each axis where the point lies
between nodes, the 2r nodes within r cells of it (r: the sinc radius), the node at distance d cells weighted
sinc(d) W(d), W the Kaiser window I0(b sqrt(1 - (d / r)^2)) / I0(b); along an axis where it lies on a node
it touches that node alone, as sinc(d) vanishes at every other node. The weights are Hicks' as they are:
they reproduce waves up to half the Nyquist wavenumber to within about 1e-3 at r = 4, but they sum to one
only to within that too, so the error does not vanish as the grid is refined.

A source adds signal(t) times each weight to its cells after each step: the amount it injects per step is
signal(t) (sinc: to within its error), spread over its cells, as a point on a node adds all of it to one
cell. A receiver records the sum of weight times value over its cells, in float64, the cells in C order.

Injection and recording are gathers and scatters of index arrays on the backend's array module, the
same operations in the same order on every backend (on the GPU a receiver's gather and sum are one kernel
that keeps that order), so numpy and numba give the same bits and nothing of a field travels to the host.
Split over ranks, each rank adds the weights of the cells it holds, and records, for the cells it holds,
each cell's term (weight times value); rank 0 sums every receiver's terms in the order one process sums
them in, so any process grid gives one process's traces.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from .errors import StencilforgeError

INTERPOLATIONS = ("linear", "nearest", "sinc")
# The Kaiser window's b per sinc radius r: Hicks (2002), table 1, the b of the least largest error for wavenumbers
# up to pi/2 per cell (half the Nyquist wavenumber). The largest error measured here, on sin(k x + phase) at 99
# points between nodes, k from pi/16 to pi/2: 2.3e-2 (r = 2), 1.3e-3 (r = 4, Hicks: 1.34e-3), 4.5e-5 (r = 6), 7.3e-7 (r = 8).
KAISER_B = {1: 1.24, 2: 2.94, 3: 4.53, 4: 6.31, 5: 7.91, 6: 9.42, 7: 10.95, 8: 12.53, 9: 14.09, 10: 14.18}
ON_NODE = 8 * np.finfo(np.float64).eps  # a point this close to a node's coordinate (relative) lies on it
CHUNK_BYTES = 1 << 24  # recorded rows stay on the backend until they fill this much, then move to the host


def point_cells(at: Sequence[float], origin: Sequence[float], spacing: Sequence[float], shape: Sequence[int],
                interpolation: str, what: str, sinc_radius: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Global interior indices (cells x axes, the cells in C order) and float64 weights of the cells a point at
    `at` touches on the lattice of nodes origin + i * spacing; `what` names the point in the error for a point
    outside the grid (linear: outside its first and last nodes; nearest: nearest a node outside it; sinc:
    also between nodes with fewer than `sinc_radius` nodes on a side)."""
    per_axis, r = [], sinc_radius
    for axis, (x, lo, h, n) in enumerate(zip(map(float, at), origin, spacing, shape)):
        p = (x - lo) / h
        i = math.floor(p + 0.5)  # the nearest node, ties up
        node = lo + i * h
        lower = math.floor(p)
        on_node = interpolation == "nearest" or p == lower or abs(x - node) <= ON_NODE * max(abs(x), abs(lo), abs(node))
        first, last = (i, i) if on_node else (lower, lower + 1)
        if first < 0 or last >= n:
            raise StencilforgeError(f"{what} at {tuple(at)} lies outside the grid: axis {axis} has its nodes from "
                                    f"{lo:.6g} to {lo + (n - 1) * h:.6g}")
        if interpolation == "sinc" and not on_node and (first < r - 1 or last > n - r):
            where = (f"takes points between nodes from {lo + (r - 1) * h:.6g} to {lo + (n - r) * h:.6g}" if n >= 2 * r
                     else f"has {n} nodes, fewer than the {2 * r} its support needs")
            raise StencilforgeError(f"{what} at {tuple(at)} lies too near the grid's edge for sinc interpolation of "
                                    f"radius {r}: axis {axis} {where}")
        if on_node:
            touched = [(i, 1.0)]
        elif interpolation == "linear":
            touched = [(lower, 1.0 - (p - lower)), (lower + 1, p - lower)]
        else:
            nodes = np.arange(lower - r + 1, lower + r + 1)
            d = p - nodes
            weights = np.sinc(d) * np.i0(KAISER_B[r] * np.sqrt(1 - (d / r) ** 2)) / np.i0(KAISER_B[r])
            touched = list(zip(nodes.tolist(), weights.tolist()))
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


def fold(terms, xp):
    """Each row's terms summed left to right along the last axis, as float64; a missing term is -0.0, which
    leaves every sum as it is."""
    acc = terms[..., 0]
    for k in range(1, terms.shape[-1]):
        acc = xp.add(acc, terms[..., k])
    return acc


def _cells_of(points, grid, what: str) -> list[tuple[np.ndarray, np.ndarray]]:
    return [point_cells(p.at, grid.origin, grid.spacing, grid.shape, p.interpolation, f"{what} on {p.field.name}",
                        p.sinc_radius) for p in points]


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


@dataclass
class Traces:
    """What a run's receivers recorded: `values[i, r]` is receiver r's interpolated value of its field after step
    `steps[i]` (at time `times[i]`), in float64; `at` holds each receiver's coordinates (receivers x axes, x last)
    and `fields` its field's name. A resumed run records from the step it resumed at."""

    values: np.ndarray
    steps: np.ndarray
    times: np.ndarray
    at: np.ndarray
    fields: tuple[str, ...]

    def upto(self, step: int) -> "Traces":
        """The rows recorded up to step `step` (a blow-up's last finite one, a resume's)."""
        keep = self.steps <= step
        return replace(self, values=self.values[keep], steps=self.steps[keep], times=self.times[keep])

    def rows(self, start: int) -> "Traces":
        """The rows from the `start`-th on."""
        return replace(self, values=self.values[start:], steps=self.steps[start:], times=self.times[start:])

    def then(self, later: "Traces") -> "Traces":
        """These rows followed by those of `later`, a later run of the same receivers (a resumed one)."""
        return replace(self, values=np.concatenate([self.values, later.values]), steps=np.concatenate([self.steps, later.steps]),
                       times=np.concatenate([self.times, later.times]))


class _Rows:
    """Rows of float64 values kept on the backend, copied to the host a chunk of rows at a time."""

    def __init__(self, width: int, xp, to_host):
        self.chunk = max(1, CHUNK_BYTES // (8 * max(width, 1)))
        self.xp, self.to_host, self.width = xp, to_host, width
        self.buffer = xp.empty((self.chunk, width), dtype=np.float64)
        self.filled = 0
        self.done: list[np.ndarray] = []  # the chunks already on the host

    def next(self):
        """The buffer's next row, to write a step's values into."""
        if self.filled == self.chunk:
            self.done.append(np.array(self.to_host(self.buffer)))
            self.filled = 0
        self.filled += 1
        return self.buffer[self.filled - 1]

    def host(self, since: int = 0) -> np.ndarray:
        """Rows `since` on, on the host: only the chunks that hold them are copied and joined."""
        first, skip = divmod(since, self.chunk)
        tail = [np.array(self.to_host(self.buffer[:self.filled]))] if first <= len(self.done) else []
        parts = self.done[first:] + tail
        return np.concatenate(parts)[skip:] if parts else np.empty((0, self.width))


@functools.lru_cache(maxsize=None)
def _gather_kernel(cp):
    """out[i] = sum over k < counts[i] of weights[i, k] * field[offsets[i, k]], left to right in float64: `fold`'s
    bits (its missing terms, -0.0, change no sum), with no product fused into an add."""
    return cp.ElementwiseKernel(
        "raw T field, raw int64 offsets, raw float64 weights, raw int32 counts, int32 corners",
        "float64 out",
        """
        const long long first = (long long)i * corners;
        double acc = __dmul_rn(weights[first], (double)field[offsets[first]]);
        for (int k = 1; k < counts[i]; ++k)
            acc = __dadd_rn(acc, __dmul_rn(weights[first + k], (double)field[offsets[first + k]]));
        out = acc;
        """,
        "stencilforge_receivers",
    )


class Recording:
    """A problem's receivers on one lattice, recorded every `problem.record_every` steps after the step's sources.

    On the whole grid (`whole`) each receiver's terms are summed as they are recorded; on a block each cell's
    term the block holds is kept (`terms`) for rank 0 to sum (`Recording.traces` of all blocks' terms)."""

    def __init__(self, problem, lattice, xp, to_host, whole: bool):
        self.problem, self.xp, self.to_host, self.whole = problem, xp, to_host, whole
        self.every = problem.record_every
        points = _cells_of(problem.receivers, problem.grid, "receiver")
        self.corners = max([len(w) for _, w in points], default=1)
        groups: dict[str, list[int]] = {}
        for r, rec in enumerate(problem.receivers):
            groups.setdefault(rec.field.name, []).append(r)
        self.groups = []  # (field, gather(field, out) of its receivers, columns of the rows)
        self.columns: list[int] = []  # a whole grid's: receiver per column; a block's: receiver * corners + corner
        for name, members in groups.items():
            if whole:
                k = self.corners
                cells = np.stack([np.concatenate([points[r][0], np.repeat(points[r][0][:1], k - len(points[r][1]), 0)])
                                  for r in members])
                weights = np.stack([np.pad(points[r][1], (0, k - len(points[r][1]))) for r in members])
                present = np.arange(k) < np.array([len(points[r][1]) for r in members])[:, None]
                ids = members
            else:
                flat = [(r * self.corners + c, cell, w) for r in members for c, (cell, w) in enumerate(zip(*points[r]))]
                mine = [e for e in flat if held(e[1][None], lattice)[0]]
                if not mine:
                    continue
                cells = np.array([c for _, c, _ in mine])
                weights, present = np.array([w for _, _, w in mine], dtype=np.float64), None
                ids = [i for i, _, _ in mine]
            columns = slice(len(self.columns), len(self.columns) + len(ids))
            self.columns += ids
            if xp is np:
                self.groups.append((name, self._host_gather(padded_index(cells, lattice, np), weights, present), columns))
            else:
                self.groups.append((name, self._device_gather(cells, weights, present, lattice), columns))
        self.start()

    def _host_gather(self, index, weights, present) -> Callable:
        """gather(field, out): out = each receiver's folded terms (whole grid) or each held cell's term (a block)."""
        if present is not None and present.all():
            present = None

        def gather(field, out):
            terms = weights * field[index].astype(np.float64)
            if present is not None:
                terms = np.where(present, terms, -0.0)
            out[...] = fold(terms, np) if self.whole else terms

        return gather

    def _device_gather(self, cells, weights, present, lattice) -> Callable:
        """`_host_gather`'s values in one kernel launch on the GPU, where the array code takes a launch per term and
        per sum (benchmarks/results/receivers-wave3d-512-h200-2026-12-02.json): a block's cells are one-term receivers."""
        xp = self.xp
        corners = weights.shape[1] if self.whole else 1
        index = padded_index(cells, lattice, np)
        offsets = xp.asarray(np.ravel_multi_index(index, lattice.padded_shape).reshape(-1).astype(np.int64))
        counts = xp.asarray(present.sum(axis=1) if present is not None else np.full(len(cells), corners), dtype=np.int32)
        weights = xp.asarray(weights.reshape(-1), dtype=np.float64)
        kernel = _gather_kernel(xp)

        def gather(field, out):  # a raw array's flat index is its C-order index, also in a pitched field
            kernel(field, offsets, weights, counts, np.int32(corners), out)

        return gather

    def __bool__(self) -> bool:
        return bool(self.problem.receivers)

    def start(self) -> None:
        """Forget what was recorded: the traces begin after the next step."""
        self.rows = _Rows(len(self.columns), self.xp, self.to_host)
        self.steps: list[int] = []

    def record(self, step: int, current: Callable[[str], Any]) -> None:
        """After step `step`, where it is one to record: each receiver's value (whole grid) or each held cell's
        term, from `current(field)`, the field's current level."""
        if step % self.every:
            return
        row = self.rows.next()
        for name, gather, columns in self.groups:
            gather(current(name), row[columns])
        self.steps.append(step)

    def terms(self, since: int = 0) -> tuple[list[int], np.ndarray]:
        """A block's recorded terms on the host, rows `since` on: (receiver * corners + corner per column, steps x columns)."""
        return self.columns, self.rows.host(since)

    def traces(self, dt: float, blocks: Sequence[tuple[list[int], np.ndarray]] | None = None, since: int = 0) -> Traces:
        """The recorded values on the host, rows `since` on; on a block, from every block's `terms` of those rows
        (rank 0's sum of them)."""
        receivers = self.problem.receivers
        count = max(len(self.steps) - since, 0)
        if blocks is None:
            values = np.empty((count, len(receivers)))
            values[:, self.columns] = self.rows.host(since)
        else:
            terms = np.full((count, len(receivers) * self.corners), -0.0)
            for columns, rows in blocks:
                terms[:, columns] = rows
            values = fold(terms.reshape(count, len(receivers), self.corners), np)
        steps = np.array(self.steps[since:], dtype=np.int64)
        return Traces(values, steps, steps * dt, np.array([r.at for r in receivers], dtype=np.float64).reshape(len(receivers), -1),
                      tuple(r.field.name for r in receivers))
