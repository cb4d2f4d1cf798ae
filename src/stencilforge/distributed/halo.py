"""Ghost-layer exchange with the neighbours of a Cartesian communicator.

Axis by axis, each face's outermost interior layers are packed into a
contiguous buffer, swapped with the neighbour by Sendrecv and unpacked into
the ghost layers. Each axis sends the full padded extent of the other axes,
ghosts received on earlier axes included, so corner and edge ghosts arrive
too. Packing goes through the array module (`xp`) and the transfer through a
`transport`, so a device path (CUDA-aware MPI, NCCL, pinned staging) is a new
transport plus device buffers, and nothing else here changes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass
class HostTransport:
    """Moves packed host buffers with MPI Sendrecv and accumulates the seconds spent."""

    comm: object
    seconds: float = 0.0

    def sendrecv(self, send, dest: int, recv, source: int) -> None:
        t = time.perf_counter()
        self.comm.Sendrecv(send, dest=dest, sendtag=0, recvbuf=recv, source=source, recvtag=0)
        self.seconds += time.perf_counter() - t


def _slab(ndim: int, axis: int, lo: int, hi: int) -> tuple[slice, ...]:
    idx = [slice(None)] * ndim
    idx[axis] = slice(lo, hi)
    return tuple(idx)


class HaloExchange:
    """Fills the ghost layers of arrays of one padded shape from the neighbouring ranks.

    Along axis a the interior starts at `low[a]` and ends `high[a]` before the
    array's end; `width[a]` layers are exchanged with each neighbour that
    exists (0 skips the axis). `neighbours[a]` is (low rank, high rank), with
    MPI.PROC_NULL (negative) on the global boundary, whose ghosts are left to
    the boundary conditions.
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
    ):
        self.transport = transport
        self.xp = xp
        ndim = len(padded_shape)
        self.plan = []
        for axis in range(ndim):
            w = width[axis]
            lo_rank, hi_rank = neighbours[axis]
            if w == 0 or (lo_rank < 0 and hi_rank < 0):
                continue
            n = padded_shape[axis] - low[axis] - high[axis]
            begin, end = low[axis], low[axis] + n
            buf_shape = list(padded_shape)
            buf_shape[axis] = w
            bufs = [xp.empty(buf_shape, dtype=dtype) for _ in range(4)]
            # (send region, destination, receive region, source): the low face goes down, the high face up.
            self.plan.append((_slab(ndim, axis, begin, begin + w), lo_rank, _slab(ndim, axis, end, end + w), hi_rank, bufs[0], bufs[1]))
            self.plan.append((_slab(ndim, axis, end - w, end), hi_rank, _slab(ndim, axis, begin - w, begin), lo_rank, bufs[2], bufs[3]))

    def __call__(self, arr) -> None:
        for send_region, dest, recv_region, source, send, recv in self.plan:
            if dest >= 0:
                self.xp.copyto(send, arr[send_region])
            self.transport.sendrecv(send, dest, recv, source)
            if source >= 0:
                arr[recv_region] = recv
