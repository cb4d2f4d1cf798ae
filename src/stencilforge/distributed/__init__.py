"""MPI domain decomposition: process grid, halo exchange (its sums are exact: `stencilforge.reductions`).

Importing this package does not import mpi4py; only a decomposed run does.
"""

from .comm import fail_together, gather, launched, world, world_rank
from .decomposition import BlockGrid, Decomposition, choose_dims, split
from .device import bind_device, bind_for

__all__ = [
    "BlockGrid",
    "bind_device",
    "bind_for",
    "Decomposition",
    "choose_dims",
    "fail_together",
    "gather",
    "launched",
    "split",
    "world",
    "world_rank",
]
