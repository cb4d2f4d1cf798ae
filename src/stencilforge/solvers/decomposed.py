"""Multigrid over MPI ranks: the fine levels split into blocks, the coarse levels whole on every rank.

Level 0 is split by `distributed.Decomposition` (least cut area, or `procs`).
Each coarser level inherits the split axis by axis: a coarse node belongs to
the rank holding the fine node at or just below its position, so every rank
keeps one contiguous block per level on the same process grid. A block is
ghosted like a whole level; a halo exchange replaces the periodic refresh (the
Cartesian communicator wraps along periodic axes) and colours follow the
global index. Restriction reads the fine residual with a halo of
RESIDUAL_HALO nodes (non-nested lattices reach two fine nodes out);
interpolation reads the coarse iterate's ghost layer.

The first level whose blocks would be thinner than MIN_BLOCK nodes along a
split axis, or whose transfers would reach past those halos, and at the latest
the coarsest, is gathered: the residual of the level above is allgathered and
every rank cycles the remaining levels whole. They are small, every rank does
the same arithmetic on the same values, and so no correction is sent back.

Every node's value comes from the same kernel on the same values as on one
process, and sums (residual norms, means, CG's dot products) are exact
(reductions.py), so solutions, residual histories and cycle counts do
not depend on the number of ranks or the process grid. On GPU ranks the
blocks are CuPy arrays and their halos travel by the device transports
(distributed/device.py); what is gathered goes through the host; a cycle
runs kernel by kernel (`BlockKernels.recorded`).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..distributed.comm import agree, allgather
from ..distributed.decomposition import Decomposition, split
from ..distributed.device import choose_transport
from ..distributed.halo import HaloExchange
from ..errors import StencilforgeError
from ..interop import to_module
from ..reductions import global_sum
from .geometry import Transfer, position
from .multigrid import Level, Undivided

MIN_BLOCK = 4  # nodes per split axis below which a level is gathered (and level 0 is refused)
RESIDUAL_HALO = 2  # ghost layers of the fine residual that restriction reads


@dataclass
class Block:
    """What a rank's block of a decomposed level needs beyond a whole level's arrays."""

    start: tuple[int, ...]  # global index of the block's first node
    source: object  # the residual restriction reads: the block with its halo, or the whole level
    own: tuple[slice, ...]  # the block inside `source`
    share: Callable  # fills the rest of `source` from the other ranks


def _coarse_ranges(ranges, n: int, m: int, wall: str) -> list[tuple[int, int]]:
    """(start, size) per process coordinate of the coarse axis: node J goes where fine node floor(position) is."""
    firsts = [s for s, _ in ranges]
    counts = [0] * len(ranges)
    for j in range(m):
        counts[bisect.bisect_right(firsts, math.floor(position(j, m, n, wall))) - 1] += 1
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return [(int(s), c) for s, c in zip(starts, counts)]


def _rows(t: Transfer, first: int, stop: int, lo: int, hi: int, period: int, shift: int) -> Transfer | None:
    """Rows first..stop-1 of `t`, each index moved into [lo, hi) by a multiple of `period` (periodic wrap;
    0: none) and shifted by `shift`; None where an index lies outside (the transfer needs a wider halo)."""
    index = t.index[first:stop]
    out = index.copy()
    inside = (index >= lo) & (index < hi)
    for wrap in ((-period, period) if period else ()):
        moved = ~inside & (index + wrap >= lo) & (index + wrap < hi)
        out = np.where(moved, index + wrap, out)
        inside |= moved
    if not inside.all():
        return None
    return Transfer(out + shift, t.weight[first:stop])


def _identity(first: int, size: int, shift: int) -> Transfer:
    return Transfer(np.arange(first, first + size, dtype=np.int64).reshape(size, 1) + shift, np.ones((size, 1)))


class BlockLayout:
    """This rank's blocks of the fine levels of a hierarchy, and the exact global sums and gathers of a solve.

    Halos of arrays of module `xp` (NumPy, or CuPy on GPU ranks) travel by `transport`, by default the one
    `distributed.choose_transport` picks for them; a decomposed simulation hands over its own."""

    def __init__(self, comm, shape: Sequence[int], walls: Sequence[str], procs: Sequence[int] | None = None, xp=np,
                 transport=None):
        nd = len(shape)
        self.comm = comm
        self.shape = tuple(shape)
        self.walls = tuple(walls)
        self.decomp = Decomposition.create(comm.size, shape, (MIN_BLOCK,) * nd, procs)
        self.cart = comm.Create_cart(self.decomp.dims, periods=[w == "periodic" for w in walls], reorder=False)
        self.coords = tuple(self.cart.Get_coords(self.cart.rank))
        self.neighbours = tuple(self.cart.Shift(a, 1) for a in range(nd))
        self.xp = xp
        self.transport = transport if transport is not None else agree(self.cart, lambda: choose_transport(self.cart, xp))
        self.gathered: int | None = None  # index of the first level held whole

    def _fill(self, padded, width: int):
        """A halo exchange of `width` layers for ghosted arrays of shape `padded`, whatever their dtype."""
        nd = len(padded)
        exchanges: dict[np.dtype, HaloExchange] = {}

        def fill(arr):
            exchange = exchanges.get(arr.dtype)
            if exchange is None:
                exchange = exchanges[arr.dtype] = HaloExchange(
                    self.transport, padded, arr.dtype, (width,) * nd, (width,) * nd, (width,) * nd, self.neighbours, self.xp
                )
            exchange(arr)

        return fill

    def _transition(self, fine: Level, coarse: Level, ranges):
        """(coarse ranges per axis, down and up tables of this rank) when the coarse level can be split too, else None."""
        assert fine.down is not None and fine.up is not None, "a level with a coarser one has transfer tables"
        coarse_ranges, down, up = [], [], []
        for a, (n, m, wall) in enumerate(zip(fine.shape, coarse.shape, fine.walls)):
            period = n if wall == "periodic" else 0
            if fine.down[a] is None:
                coarse_ranges.append(ranges[a])
                start, size = ranges[a][self.coords[a]]
                down.append(_identity(0, size, RESIDUAL_HALO))
                up.append(_identity(0, size, 1))
                continue
            axis = _coarse_ranges(ranges[a], n, m, wall)
            if len(axis) > 1 and min(size for _, size in axis) < MIN_BLOCK:
                return None
            mine = None
            for c, ((s, size), (cs, csize)) in enumerate(zip(ranges[a], axis)):
                d = _rows(fine.down[a], cs, cs + csize, s - RESIDUAL_HALO, s + size + RESIDUAL_HALO, period, RESIDUAL_HALO - s)
                u = _rows(fine.up[a], s, s + size, cs - 1, cs + csize + 1, m if period else 0, 1 - cs)
                if d is None or u is None:
                    return None
                if c == self.coords[a]:
                    mine = (d, u)
            assert mine is not None, "this rank's coordinate is one of the axis's blocks"
            coarse_ranges.append(axis)
            down.append(mine[0])
            up.append(mine[1])
        return coarse_ranges, down, up

    def _block(self, level: Level, ranges, down, up, source_shape, own, share) -> Level:
        """The level cut to this rank's block, with its tables, halo exchange and residual source."""
        ext = [ranges[a][c] for a, c in enumerate(self.coords)]
        start = tuple(s for s, _ in ext)
        shape = tuple(size for _, size in ext)
        faces = []
        for a, kf in enumerate(level.host_faces):
            faces.append(kf[tuple(
                slice(s, s + size + 1) if b == a else (slice(s, s + size) if kf.shape[b] > 1 else slice(None))
                for b, (s, size) in enumerate(ext)
            )])
        block = Block(start, self.xp.zeros(source_shape, dtype=self.dtype), own, share)
        local = Level(shape, level.walls, level.spacing, faces, down=down, up=up, parity=sum(start) % 2, block=block)
        local.fill = self._fill(tuple(n + 2 for n in shape), 1)
        return local

    def localize(self, levels: list[Level], dtype, xp) -> list[Level]:
        """Split the levels while they split cleanly; the rest (the coarsest at least) stay whole."""
        if len(levels) < 2:
            raise StencilforgeError(
                f"shape {'x'.join(map(str, self.shape))} is solved directly on one level, so there is nothing to split "
                f"over {self.comm.size} rank{'s' if self.comm.size > 1 else ''}: run it in one process"
            )
        assert xp is self.xp, "the levels live where the layout's transport moves arrays"
        self.dtype = np.dtype(dtype)
        plans, ranges = [], [[split(n, p) for n, p in zip(self.shape, self.decomp.dims)]]
        for fine, coarse in zip(levels[:-2], levels[1:-1]):
            plan = self._transition(fine, coarse, ranges[-1])
            if plan is None:
                break
            plans.append(plan)
            ranges.append(plan[0])
        self.gathered = gathered = len(ranges)
        out = []
        for index, (level, plan) in enumerate(zip(levels, plans)):
            local_ranges = ranges[index]
            shape = tuple(size for _, size in (local_ranges[a][c] for a, c in enumerate(self.coords)))
            halo = tuple(n + 2 * RESIDUAL_HALO for n in shape)
            own = tuple(slice(RESIDUAL_HALO, RESIDUAL_HALO + n) for n in shape)
            out.append(self._block(level, local_ranges, plan[1], plan[2], halo, own, self._fill(halo, RESIDUAL_HALO)))
        out.append(self._gathering(levels[gathered - 1], ranges[-1]))
        return out + Undivided().localize(levels[gathered:], dtype, xp)

    def _gathering(self, level: Level, ranges) -> Level:
        """The last split level: its residual is allgathered whole and restricted by the global tables."""
        assert level.down is not None and level.up is not None, "a split level has a coarser one"
        down, up = [], []
        for a, n in enumerate(level.shape):
            s, size = ranges[a][self.coords[a]]
            full = level.down[a] if level.down[a] is not None else _identity(0, n, 0)
            down.append(full)
            up.append(_rows(level.up[a], s, s + size, 0, 10 ** 18, 0, 1) if level.up[a] is not None else _identity(s, size, 1))
        extents = [tuple(ranges[a][c] for a, c in enumerate(self.decomp.coords_of(rank))) for rank in range(self.comm.size)]

        def share(whole):
            assembled = np.empty(whole.shape, dtype=whole.dtype)
            mine = to_module(whole[tuple(slice(s, s + size) for s, size in extents[self.cart.rank])], np)
            for extent, part in zip(extents, self.cart.allgather(mine)):
                assembled[tuple(slice(s, s + size) for s, size in extent)] = part
            whole[...] = self.xp.asarray(assembled)

        start = tuple(ranges[a][c][0] for a, c in enumerate(self.coords))
        shape = tuple(ranges[a][c][1] for a, c in enumerate(self.coords))
        own = tuple(slice(s, s + n) for s, n in zip(start, shape))
        return self._block(level, ranges, down, up, level.shape, own, share)

    def kernels(self, inner):
        return BlockKernels(inner, self.cart)

    def block(self, arr):
        """This rank's block of a whole interior array, a copy of its own where `arr` lives."""
        return arr[tuple(slice(s, s + n) for s, n in self.decomp.extent(self.coords))].copy()

    def gather(self, arr):
        """The whole interior array on every rank from every rank's block."""
        return self.xp.asarray(allgather(self.cart, self.decomp, to_module(arr, np)))

    def dot(self, xp, a, b) -> float:
        return global_sum(self.cart, a * b)

    def norm2(self, xp, a) -> float:
        """sum(a**2) over every rank's block, exactly (the same bits for any process grid)."""
        return global_sum(self.cart, xp.square(a, dtype=np.float64))

    def mean(self, arr):
        return np.float64(global_sum(self.cart, arr) / math.prod(self.shape))

    def summary(self) -> dict:
        return {"procs": list(self.decomp.dims), "ranks": self.comm.size, "split_levels": self.gathered}

    def close(self) -> None:
        self.cart.Free()


class BlockKernels:
    """A backend's kernels on blocks: restriction reads a residual completed by its halo, sums are global."""

    def __init__(self, inner, comm):
        self.inner = inner
        self.comm = comm
        self.xp = inner.xp
        self.traffic = inner.traffic

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def recorded(self, fn):
        """fn itself: a cycle of a split level exchanges halos through MPI between its kernels, which a CUDA graph
        cannot hold."""
        return fn

    def residual_norm2(self, level: Level, u, f) -> float:
        r = self.xp.empty(level.shape, dtype=u.dtype)
        self.inner.residual(level, u, f, r)
        r = r.astype(np.float64)
        return global_sum(self.comm, r * r)

    def restrict_residual(self, level: Level, coarse: Level) -> None:
        block = level.block
        if block is None:
            self.inner.restrict_residual(level, coarse)
            return
        self.inner.residual(level, level.u, level.f, block.source[block.own])
        block.share(block.source)
        self.inner.restrict(level, block.source, coarse)

    def prolong_add(self, level: Level, coarse: Level) -> None:
        if coarse.block is not None:
            coarse.refresh(coarse.u)  # the ghost layer interpolation reads
        self.inner.prolong_add(level, coarse)
