"""Device side of a decomposed run: GPU per rank, halo transports, streams.

One GPU per rank, chosen by the rank's index among the ranks of its node
(MPI_COMM_TYPE_SHARED) modulo the node's device count. Halos of device arrays
move by one of three transports, all behind the `exchange(pairs)` call that
HaloExchange makes once per axis:

- `mpi`:    CUDA-aware MPI, device buffers handed to MPI directly;
- `nccl`:   NCCL point-to-point through CuPy, stream-ordered, no host round trip;
- `staged`: device -> pinned host buffer, MPI Sendrecv, pinned host -> device.

`auto` takes the first that works here: `mpi` if the MPI library says it is
CUDA-aware, else `nccl` if CuPy has NCCL and every rank has a GPU of its own,
else `staged`. Every rank makes the same choice (agreed over MPI). The
transports never change which values arrive, so results are the same bits
whichever moved them.

Importing this module imports neither CuPy nor mpi4py.
"""

from __future__ import annotations

import ctypes
import socket
import time

import numpy as np

from ..errors import StencilforgeError
from ..reductions import all_true

HALO_CHOICES = ("auto", "mpi", "nccl", "staged", "host")


def node_local_rank(comm) -> tuple[int, int]:
    """(this rank's index among the ranks of its node, number of ranks on the node)."""
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    try:
        return local.rank, local.size
    finally:
        local.Free()


def bind_device(comm) -> int | None:
    """Make GPU (node-local rank mod device count) current; None where CuPy or a GPU is missing.

    Collective: every rank of `comm` must call it.
    """
    rank, _ = node_local_rank(comm)
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy, no driver, no device: a CPU backend will be used
        return None
    if count < 1:
        return None
    device = rank % count
    cupy.cuda.Device(device).use()
    return device


def bind_for(comm, backend) -> None:
    """Before a backend is made for a run over `comm` (None: one process): each rank takes a GPU of its own
    (`bind_device`) where the backend is named cuda or auto; a backend object is bound by whoever made it."""
    if comm is not None and backend in ("auto", "cuda"):
        bind_device(comm)


def mpi_cuda_aware() -> bool:
    """True if the loaded MPI library reports CUDA support (MPIX_Query_cuda_support, Open MPI, MPICH, MVAPICH)."""
    from mpi4py import MPI  # noqa: F401  (loads the MPI library into the process)

    paths = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "libmpi" in path.rsplit("/", 1)[-1]:
                    paths.add(path)
    except OSError:
        return False
    for path in sorted(paths):
        try:
            query = ctypes.CDLL(path).MPIX_Query_cuda_support
        except (OSError, AttributeError):
            continue
        query.restype = ctypes.c_int
        if query() == 1:
            return True
    return False


def nccl_usable(comm) -> str:
    """Empty if NCCL can join these ranks, else why not (no NCCL in CuPy, two ranks on one GPU)."""
    import cupy

    try:
        from cupy.cuda import nccl
    except ImportError:
        return "CuPy was built without NCCL"
    if not getattr(nccl, "available", False):
        return "CuPy cannot load NCCL"
    device = cupy.cuda.Device()
    here = (socket.gethostname(), device.pci_bus_id)
    seen = comm.allgather(here)
    if len(set(seen)) != len(seen):
        return "several ranks share one GPU"
    return ""


# ------------------------------------------------------------------ clocks


class HostClock:
    """Wall-clock seconds of the regions between `start()` and `stop(token)`.

    Same interface as the cuda backend's EventClock, which times device regions.
    """

    def __init__(self):
        self._total = 0.0

    def start(self) -> float:
        return time.perf_counter()

    def stop(self, token: float) -> None:
        self._total += time.perf_counter() - token

    def seconds(self) -> float:
        return self._total


# ------------------------------------------------------------------ streams


class HostTransport:
    """Host buffers (numpy, numba): MPI Sendrecv per direction."""

    name = "host"

    def __init__(self, comm):
        self.comm = comm

    def exchange(self, pairs) -> None:
        for send, dest, recv, source in pairs:
            self.comm.Sendrecv(send, dest=dest, sendtag=0, recvbuf=recv, source=source, recvtag=0)


class CudaAwareTransport:
    """Device buffers handed to a CUDA-aware MPI after the stream has finished packing them."""

    name = "mpi"

    def __init__(self, comm, cp):
        self.comm = comm
        self._cp = cp

    def exchange(self, pairs) -> None:
        self._cp.cuda.get_current_stream().synchronize()
        for send, dest, recv, source in pairs:
            self.comm.Sendrecv(send, dest=dest, sendtag=0, recvbuf=recv, source=source, recvtag=0)


class NcclTransport:
    """NCCL send/recv of every face of one axis in one group, queued on the current stream.

    NCCL communicators are slow to create and connect their peers lazily, on
    the first send/recv between them; so `for_comm` keeps one transport per
    set of world ranks and device, and `connect` makes the first exchange with
    the neighbours before any timed loop.
    """

    name = "nccl"
    _cache: dict = {}

    @classmethod
    def for_comm(cls, comm, cp):
        from mpi4py import MPI

        world_ranks = tuple(comm.Get_group().Translate_ranks(list(range(comm.size)), MPI.COMM_WORLD.Get_group()))
        key = (world_ranks, cp.cuda.Device().id)
        if key not in cls._cache:
            cls._cache[key] = cls(comm, cp)
        return cls._cache[key]

    def __init__(self, comm, cp):
        from cupy.cuda import nccl

        self._nccl = nccl
        self._cp = cp
        uid = nccl.get_unique_id() if comm.rank == 0 else None
        uid = comm.bcast(uid, root=0)
        self._comm = nccl.NcclCommunicator(comm.size, uid, comm.rank)
        self._types = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64}

    def connect(self, neighbours) -> None:
        """One small exchange with the neighbours along each axis (every rank calls it, every time).

        Never skipped for a pair met in an earlier run: a neighbour's pairs differ
        with the process grid, and a rank that skipped would leave it waiting.
        """
        for lo, hi in neighbours:
            one = self._cp.zeros(2, dtype=np.float32)
            self.exchange([(one[:1], lo, one[1:], hi), (one[1:], hi, one[:1], lo)])
        self._cp.cuda.get_current_stream().synchronize()

    def exchange(self, pairs) -> None:
        nccl = self._nccl
        stream = self._cp.cuda.get_current_stream().ptr
        nccl.groupStart()
        for send, dest, recv, source in pairs:
            if dest >= 0:
                self._comm.send(send.data.ptr, send.size, self._types[send.dtype], dest, stream)
            if source >= 0:
                self._comm.recv(recv.data.ptr, recv.size, self._types[recv.dtype], source, stream)
        nccl.groupEnd()


class StagedTransport:
    """Device -> pinned host buffers -> MPI Sendrecv -> pinned host -> device.

    Host mirrors are allocated once per (position in the exchange, role, shape,
    dtype) and reused: a mirror is rewritten only after the stream has been
    synchronised, so an earlier upload from it has finished. With numpy arrays
    (xp is numpy) the device copies are plain host copies, which lets the CPU
    test suite run this logic under mpiexec.
    """

    name = "staged"

    def __init__(self, comm, xp):
        self.comm = comm
        self._xp = xp
        self._device = xp is not np
        self._mirrors: dict = {}

    def _mirror(self, key, arr):
        full = (key, arr.shape, np.dtype(arr.dtype).str)
        buf = self._mirrors.get(full)
        if buf is None:
            if self._device:
                import cupyx

                buf = cupyx.empty_pinned(arr.shape, dtype=arr.dtype)
            else:
                buf = np.empty(arr.shape, dtype=arr.dtype)
            self._mirrors[full] = buf
        return buf

    def exchange(self, pairs) -> None:
        staged = []
        for i, (send, dest, recv, source) in enumerate(pairs):
            host_send = self._mirror((i, "send"), send)
            host_recv = self._mirror((i, "recv"), recv)
            if dest >= 0:
                if self._device:
                    send.get(out=host_send, blocking=False)
                else:
                    np.copyto(host_send, send)
            staged.append((host_send, dest, host_recv, source, recv))
        if self._device:
            self._xp.cuda.get_current_stream().synchronize()
        for host_send, dest, host_recv, source, recv in staged:
            self.comm.Sendrecv(host_send, dest=dest, sendtag=0, recvbuf=host_recv, source=source, recvtag=0)
            if source >= 0:
                if self._device:
                    recv.set(host_recv)
                else:
                    np.copyto(recv, host_recv)


def choose_transport(comm, xp, halo: str = "auto"):
    """The transport for arrays of module `xp`, the same on every rank; a one-line error if `halo` cannot work."""
    if halo not in HALO_CHOICES:
        raise StencilforgeError(f"unknown halo transport {halo!r}: choose one of {', '.join(HALO_CHOICES)}")
    if xp is np:
        if halo in ("auto", "host"):
            return HostTransport(comm)
        if halo == "staged":
            return StagedTransport(comm, xp)
        raise StencilforgeError(f"--halo {halo} moves device arrays; this backend's arrays live on the host (use auto)")
    if halo == "host":
        raise StencilforgeError("--halo host is for CPU backends; the cuda backend takes auto, mpi, nccl or staged")
    if halo == "auto":
        if all_true(comm, mpi_cuda_aware()):
            halo = "mpi"
        elif all_true(comm, nccl_usable(comm) == ""):
            halo = "nccl"
        else:
            halo = "staged"
    elif halo == "nccl":
        reasons = [r for r in comm.allgather(nccl_usable(comm)) if r]
        if reasons:
            raise StencilforgeError(f"--halo nccl is not possible here: {reasons[0]}; use --halo staged")
    if halo == "mpi":
        return CudaAwareTransport(comm, xp)
    if halo == "nccl":
        return NcclTransport.for_comm(comm, xp)
    return StagedTransport(comm, xp)
