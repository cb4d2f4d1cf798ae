"""Ghost-layer exchange with the neighbours of a Cartesian communicator.

Axis by axis, each face's outermost interior layers are packed into a
contiguous buffer, swapped with the neighbour and unpacked into the ghost
layers. Each axis sends the full padded extent of the other axes, ghosts
received on earlier axes included, so corner and edge ghosts arrive too.
Faces along the first axis (or any axis with only unit extents before it) are
contiguous in a C-contiguous array and go straight from and into it; in an array
whose rows lie a pitch apart (the cuda backend's fields) they are packed too. Packing goes
through the array module (`xp`, NumPy or CuPy) and both directions of an axis
go to the transport in one `exchange` call (device.py: host MPI, CUDA-aware
MPI, NCCL or pinned staging), so the device paths change nothing here.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..boundary import slab
from .device import HostClock


class HaloExchange:
    """Fills the ghost layers of arrays of one padded shape from the neighbouring ranks.

    Along axis a the interior starts at `low[a]` and ends `high[a]` before the
    array's end; `width[a]` layers are exchanged with each neighbour that
    exists (0 skips the axis). `neighbours[a]` is (low rank, high rank), with
    MPI.PROC_NULL (negative) on the global boundary, whose ghosts are left to
    the boundary conditions. `clock` times every call, packing included.
    """

    def __init__(
        self,
        transport,
        padded_shape: Sequence[int],
        dtype,
        low: Sequence[int],
        high: Sequence[int],
        width: Sequence[int],
        neighbours: Sequence[tuple[int, int]],
        xp=np,
        clock=None,
    ):
        self.transport = transport
        self.xp = xp
        self._packed: dict = {}  # buffers for faces that would go in place but whose array has gaps between rows
        self.clock = HostClock() if clock is None else clock
        ndim = len(padded_shape)
        self.plan = []
        for axis in range(ndim):
            w = width[axis]
            lo_rank, hi_rank = neighbours[axis]
            if w == 0 or (lo_rank < 0 and hi_rank < 0):
                continue
            n = padded_shape[axis] - low[axis] - high[axis]
            begin, end = low[axis], low[axis] + n
            if all(size == 1 for size in padded_shape[:axis]):
                bufs = [None] * 4
            else:
                buf_shape = list(padded_shape)
                buf_shape[axis] = w
                bufs = [xp.empty(buf_shape, dtype=dtype) for _ in range(4)]
            # (send region, destination, receive region, source): the low face goes down, the high face up.
            self.plan.append((
                (slab(ndim, axis, slice(begin, begin + w)), lo_rank, slab(ndim, axis, slice(end, end + w)), hi_rank, bufs[0], bufs[1]),
                (slab(ndim, axis, slice(end - w, end)), hi_rank, slab(ndim, axis, slice(begin - w, begin)), lo_rank, bufs[2], bufs[3]),
            ))

    def __call__(self, arr) -> None:
        token = self.clock.start()
        for i in range(len(self.plan)):
            pairs, unpack = self._pack(i, arr)
            self.transport.exchange(pairs)
            _unpack(arr, unpack)
        self.clock.stop(token)

    def _pack(self, i: int, arr) -> tuple[list, list]:
        """(the transport's pairs, what to unpack) of plan entry i for `arr`, its faces packed where they must be."""
        pairs, unpack = [], []
        for j, (send_region, dest, recv_region, source, send, recv) in enumerate(self.plan[i]):
            if send is None:
                send, recv = arr[send_region], arr[recv_region]
                if send.flags.c_contiguous and recv.flags.c_contiguous:
                    pairs.append((send, dest, recv, source))
                    continue
                if (i, j) not in self._packed:
                    self._packed[i, j] = (self.xp.empty(send.shape, send.dtype), self.xp.empty(recv.shape, recv.dtype))
                send, recv = self._packed[i, j]
            if dest >= 0:
                self.xp.copyto(send, arr[send_region])
            pairs.append((send, dest, recv, source))
            unpack.append((recv_region, source, recv))
        return pairs, unpack


def exchange_together(transport, items) -> None:
    """The exchanges `items` ((HaloExchange of one axis, array) each) in one call of `transport`: one synchronisation
    and one message round for several fields, where each alone would take its own; the same values arrive."""
    packed = [(exchange._pack(0, arr), arr) for exchange, arr in items if exchange.plan]
    if packed:
        transport.exchange([pair for (pairs, _), _ in packed for pair in pairs])
        for (_, unpack), arr in packed:
            _unpack(arr, unpack)


def _unpack(arr, unpack) -> None:
    for recv_region, source, recv in unpack:
        if source >= 0:
            arr[recv_region] = recv
