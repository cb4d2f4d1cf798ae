"""Snapshots and checkpoints of a decomposed run, written by rank 0 as one global file.

At each output step every rank sends rank 0 the part of its block it owns.
For snapshots that is the interior. For checkpoints it is the padded block cut
down to the interior plus the ghost layers on global walls, so the assembled
arrays are the padded arrays of one process. The files are therefore the
single-process files, and a run may resume on any rank count. Rank 0 receives
one block at a time into one global copy of the fields it writes, then hands
that copy to the ordinary observer (stencilforge.jobs builds it), whose writer thread takes
a copy. Parallel HDF5 is not used.

A write failure on rank 0 is broadcast at the same step, so every rank stops
together instead of waiting in the next exchange.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import OutputError, StencilforgeError
from ..io.snapshots import StreamingObserver

TAG = 7


@dataclass(frozen=True)
class GlobalOutput:
    """An observer of the global padded fields (given on rank 0 only) and what it reads every `every` steps."""

    observer: StreamingObserver | None
    every: int | None
    names: tuple[str, ...]
    walls: bool  # also the ghost layers on global walls (checkpoints), not only the interior


class _HostArrays:
    """The backend an observer on rank 0 sees: the assembled fields are NumPy arrays."""

    name = "numpy"

    @staticmethod
    def to_host(a):
        return np.asarray(a)


def owned(decomp, coords: Sequence[int], ghost: int, walls: bool) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """(slices into the block's padded arrays, slices into the global padded arrays) of what the block owns."""
    faces = set(decomp.physical_faces(coords))
    local, glob = [], []
    for axis, (start, n) in enumerate(decomp.extent(coords)):
        lo = ghost if walls and (axis, 0) in faces else 0
        hi = ghost if walls and (axis, 1) in faces else 0
        local.append(slice(ghost - lo, ghost + n + hi))
        glob.append(slice(ghost + start - lo, ghost + start + n + hi))
    return tuple(local), tuple(glob)


class Gathering:
    """Time-loop observer on every rank of a decomposed run, feeding `output.observer` on rank 0."""

    def __init__(self, output: GlobalOutput, cart, decomp, ghost: int, padded_shapes: dict, dtypes: dict):
        self.output = output
        self.every = output.every
        self._cart = cart
        self._mine = owned(decomp, tuple(cart.Get_coords(cart.rank)), ghost, output.walls)[0]
        self._blocks = []
        self._global = {}
        if cart.rank == 0:
            self._blocks = [owned(decomp, tuple(cart.Get_coords(r)), ghost, output.walls) for r in range(cart.size)]
            self._global = {n: np.zeros(padded_shapes[n], dtype=dtypes[n]) for n in output.names}

    def __call__(self, step: int, t: float, fields: dict, backend) -> None:
        cart = self._cart
        parts = [np.ascontiguousarray(backend.to_host(fields[n][self._mine])) for n in self.output.names]
        failure = None
        if cart.rank == 0:
            for rank, (_local, glob) in enumerate(self._blocks):
                for name, mine in zip(self.output.names, parts):
                    target = self._global[name][glob]
                    if rank == 0:
                        target[...] = mine
                    else:
                        block = np.empty(target.shape, dtype=target.dtype)
                        cart.Recv(block, source=rank, tag=TAG)
                        target[...] = block
            assert self.output.observer is not None, "rank 0 holds the observer"
            try:
                self.output.observer(step, t, self._global, _HostArrays)
            except OutputError as exc:
                failure = exc
        else:
            for mine in parts:
                cart.Send(mine, dest=0, tag=TAG)
        message = cart.bcast(None if failure is None else str(failure), root=0)
        if failure is not None:
            raise failure
        if message is not None:
            raise StencilforgeError(f"rank 0: {message}")

    def close(self) -> None:
        if self.output.observer is not None:
            self.output.observer.close()
