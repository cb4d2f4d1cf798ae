"""MPI domain decomposition: process grid, halo exchange (its sums are exact: `stencilforge.reductions`).

Importing this package does not import mpi4py; only a decomposed run does.
"""

from .decomposition import BlockGrid, Decomposition, choose_dims, split
from .device import bind_device
from .runner import fail_together, gather, launched, run_decomposed, world, world_rank

__all__ = [
    "BlockGrid",
    "bind_device",
    "Decomposition",
    "choose_dims",
    "fail_together",
    "gather",
    "launched",
    "run_decomposed",
    "split",
    "world",
    "world_rank",
]
