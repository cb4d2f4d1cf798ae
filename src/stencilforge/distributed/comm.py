"""The ranks of an MPI run: launch detection, the world communicator, agreeing on failures, gathering blocks.

Failures: errors every rank meets (bad options, blocks smaller than the halo,
a blow-up detected by an allreduce) are StencilforgeErrors raised on every
rank (`agree`); `fail_together` turns any other exception on one rank into its
message and MPI_Abort, so the other ranks never wait forever in a halo exchange.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Callable

import numpy as np

from ..errors import StencilforgeError
from ..optional import require
from .decomposition import Decomposition

SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE")
ABORT_GRACE_S = 0.5  # lets the launcher forward the failing rank's message before MPI_Abort tears down its stdio
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK")


def launched() -> bool:
    """True when an MPI launcher (mpiexec, mpirun, srun with PMI) started this process."""
    return any(v in os.environ for v in SIZE_VARIABLES)


def world_rank() -> int:
    """This process's rank without initialising MPI: 0 when not launched by MPI."""
    if "mpi4py.MPI" in sys.modules:
        from mpi4py import MPI

        if MPI.Is_initialized():
            return MPI.COMM_WORLD.rank
    for name in RANK_VARIABLES:
        if name in os.environ:
            return int(os.environ[name])
    return 0


def world():
    """MPI.COMM_WORLD, or a one-line error naming the package to install."""
    return require("mpi4py.MPI", "an MPI run").COMM_WORLD


@contextmanager
def fail_together(comm, collective: tuple[type[BaseException], ...] = ()):
    """A rank failing alone prints its message and aborts every rank (MPI_Abort), never a hang.

    StencilforgeError (and the `collective` types, such as a CLI's exit) pass
    through: decomposed runs raise those on every rank at once.
    """
    passing: tuple[type[BaseException], ...] = (StencilforgeError, KeyboardInterrupt, *collective)
    try:
        yield
    except passing:
        raise
    except Exception as exc:  # any unexpected failure: the other ranks may be blocked on this one
        sys.stderr.write(f"error: rank {comm.rank}: {type(exc).__name__}: {exc}\n")  # one write: ranks share stderr
        sys.stderr.flush()
        time.sleep(ABORT_GRACE_S)
        comm.Abort(2)


def agree(comm, build: Callable):
    """Run `build` on every rank; if any rank fails, every rank raises the first failure's message."""
    try:
        value, error = build(), None
    except StencilforgeError as exc:
        value, error = None, str(exc)
    except Exception as exc:  # reported collectively below, so no rank is left waiting
        value, error = None, f"{type(exc).__name__}: {exc}"
    errors = comm.allgather(error)
    failed = [(rank, msg) for rank, msg in enumerate(errors) if msg is not None]
    if failed:
        rank, msg = failed[0]
        raise StencilforgeError(msg if len(failed) == comm.size else f"rank {rank}: {msg}")
    return value


def gather(comm, decomp: Decomposition, local: np.ndarray, root: int = 0):
    """The global interior array assembled on `root` from every rank's block (None elsewhere).

    Ranks are numbered row-major over the process grid (the Cartesian
    communicator is created without reordering), so `decomp` alone places them.
    """
    parts = comm.gather(np.ascontiguousarray(local), root=root)
    return _assembled(decomp, parts) if comm.rank == root else None


def allgather(comm, decomp: Decomposition, local: np.ndarray) -> np.ndarray:
    """The global interior array on every rank, from every rank's block (`gather`'s, everywhere)."""
    return _assembled(decomp, comm.allgather(np.ascontiguousarray(local)))


def _assembled(decomp: Decomposition, parts) -> np.ndarray:
    out = np.empty(decomp.shape, dtype=parts[0].dtype)
    for rank, block in enumerate(parts):
        out[tuple(slice(s, s + n) for s, n in decomp.extent(decomp.coords_of(rank)))] = block
    return out
