"""A problem run decomposed over MPI ranks: local setup, halo-refreshing backend, global checks.

Every rank builds the same global Setup, keeps its block (fields sliced with
their ghost layers, so the initial state is bitwise that of one process),
binds boundary conditions to its physical faces only and runs the one time
loop on it. The per-cell arithmetic is the same kernel on the same values, and
global sums are exact (stencilforge.reductions), so fields, residuals, iteration counts
and error norms do not depend on the rank count or the process grid.

Device backends (cuda): each rank binds the GPU of its node-local rank, the
run goes on a non-blocking stream of its own, halos move by the transport of
device.py (CUDA-aware MPI, NCCL or pinned staging) and, with overlap, each
sweep computes the block's interior while the halos travel on a second stream,
then the boundary slabs that read them (split along the first axis, where the
slabs are contiguous views the same kernel can run on).

Failures: errors every rank meets (bad options, blocks smaller than the halo,
a blow-up detected by an allreduce) are StencilforgeErrors raised on every
rank; `fail_together` turns any other exception on one rank into its message
and MPI_Abort, so the other ranks never wait forever in a halo exchange.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from ..backends.base import Launch
from ..backends.cuda.backend import EventClock
from ..backends.numpy_ref import evaluate_sweep
from ..boundary import Periodic
from ..errors import StencilforgeError
from ..optional import require
from ..plan import AxisOperator, Setup
from ..reductions import all_true, global_max, global_sum
from ..timeloop import LoopOptions, Result, close_observers, run
from .decomposition import Decomposition
from .device import DeviceStreams, HostClock, HostTransport, NoStreams, choose_transport, is_device_array
from .halo import HaloExchange
from .outputs import Gathering, GlobalOutput

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


def minimum_extents(setup: Setup) -> tuple[int, ...]:
    """Fewest points a block may have per axis: the halo width for sweeps, the closures for operators."""
    grid = setup.grid
    if setup.operator is not None:
        op = setup.operator
        return tuple(op.min_length if a == op.axis else 1 for a in range(grid.ndim))
    return (max(grid.ghost, 1),) * grid.ndim


def operator_halo(op: AxisOperator) -> int:
    """Halo an axis operator needs at an internal cut: its reach, and room for the discarded closure rows."""
    return max(max(d.radius, len(d.left), len(d.right)) for d in op.outputs)


def localize(setup: Setup, decomp: Decomposition, coords: Sequence[int]) -> Setup:
    """The block of `setup` at process coordinates `coords`, in global coordinates."""
    grid = setup.grid
    bad = sorted(name for name, bc in setup.boundaries.items() if isinstance(bc, Periodic))
    if bad:
        raise StencilforgeError(f"periodic boundaries ({', '.join(bad)}) are not supported in decomposed runs")
    block = decomp.block_grid(grid, coords)
    g = grid.ghost
    padded = tuple(slice(s, s + n + 2 * g) for s, n in zip(block.start, block.shape))
    interior = tuple(slice(s, s + n) for s, n in zip(block.start, block.shape))
    fields = {}
    for name, arr in setup.fields.items():
        if arr.shape != grid.padded_shape:
            raise StencilforgeError(f"field {name!r} of shape {arr.shape} does not match the grid {grid.padded_shape}")
        fields[name] = np.ascontiguousarray(arr[padded])
    sources = []
    for src in setup.sources:
        local = tuple(i - s for i, s in zip(src.index, block.start))
        if all(g <= i < g + n for i, n in zip(local, block.shape)):
            sources.append(replace(src, index=local))
    exact = None
    if setup.exact is not None:
        global_exact = setup.exact

        def exact(t):
            return {k: np.ascontiguousarray(np.broadcast_to(v, grid.shape)[interior]) for k, v in global_exact(t).items()}

    return replace(setup, grid=block, fields=fields, sources=tuple(sources), exact=exact)


class MPIDomain:
    """This rank's place in the decomposed run: what the time loop asks of it."""

    def __init__(self, cart, decomp: Decomposition, coords: Sequence[int], transport=None, clock=None, sync=None):
        self.cart = cart
        self.decomp = decomp
        self.coords = tuple(coords)
        self.faces = decomp.physical_faces(coords)
        self.global_shape = decomp.shape
        self.neighbours = tuple(cart.Shift(axis, 1) for axis in range(len(decomp.dims)))
        self.transport = HostTransport(cart) if transport is None else transport
        if hasattr(self.transport, "connect"):
            self.transport.connect(self.neighbours)
        self.clock = HostClock() if clock is None else clock
        self._sync = sync
        self.reduce_seconds = 0.0
        self.compute_seconds: Callable[[], float | None] | None = None
        self.overlap = False

    @property
    def comm_seconds(self) -> float:
        return self.clock.seconds() + self.reduce_seconds

    def _timed(self, func, *args):
        if self._sync is not None:
            self._sync()  # queued kernels finish first: only the reduction itself is timed
        t = time.perf_counter()
        try:
            return func(self.cart, *args)
        finally:
            self.reduce_seconds += time.perf_counter() - t

    def all(self, flag: bool) -> bool:
        return self._timed(all_true, flag)

    def sum(self, values) -> float:
        return self._timed(global_sum, values)

    def exchanger(self, padded_shape, dtype, low, high, width, xp) -> HaloExchange:
        return HaloExchange(self.transport, padded_shape, dtype, low, high, width, self.neighbours, xp, self.clock)

    def error_norms(self, numeric, exact) -> dict:
        """Global max and relative L2 errors, with exact sums so every rank count gives the same bits."""
        diff = np.asarray(numeric, dtype=np.float64) - exact
        local_max = float(np.max(np.abs(diff))) if diff.size else 0.0
        max_abs = self._timed(global_max, local_max)
        num = np.sqrt(self.sum(diff * diff))
        ref = np.sqrt(self.sum(np.asarray(exact, dtype=np.float64) ** 2))
        return {"max_abs": max_abs, "rel_l2": float(num / ref) if ref > 0 else float(num)}

    def summary(self, wall: float) -> dict:
        """Process grid, halo transport and the slowest rank's communication and compute seconds.

        comm_s: halo exchanges (packing included; on a device, CUDA events on
        the stream they run on) plus global reductions. compute_s: the stencil
        kernels' own time where the backend measures it (cuda), else wall - comm.
        """
        comm = self.comm_seconds
        compute = self.compute_seconds() if self.compute_seconds is not None else max(wall - comm, 0.0)
        return {
            "procs": list(self.decomp.dims),
            "ranks": self.decomp.nprocs,
            "halo": self.transport.name,
            "overlap": self._timed(all_true, self.overlap),
            "comm_s": self._timed(global_max, comm),
            "compute_s": self._timed(global_max, compute),
        }


class DecomposedBackend:
    """Wraps a backend so sweeps refresh the halos they read and reductions are global.

    Everything else (name, xp, asarray, check_fits) is the wrapped backend's. Two steps per pass
    are a one-process path (`fuses_steps` False): a pass would need the halo of its middle state.
    `overlap`: None splits sweeps where it can on a device, True wherever it
    can (a one-line error if the process grid does not allow it), False never.
    """

    fuses_steps = False
    writes_ghost_images = False  # ghost cells are halos from neighbours
    half_storage = False  # halos travel in the grid's dtype

    def __init__(self, backend, domain: MPIDomain, streams=None, overlap: bool | None = None):
        self._backend = backend
        self._domain = domain
        self._streams = NoStreams() if streams is None else streams
        self._overlap = is_device_array(backend.xp) if overlap is None else overlap
        self._required = overlap is True
        self._timed_backends = [backend]
        self._kernel_base = backend.kernel_seconds()
        if self._kernel_base is not None:
            domain.compute_seconds = self.kernel_seconds

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def kernel_seconds(self) -> float | None:
        if self._kernel_base is None:
            return None
        return sum(b.kernel_seconds() for b in self._timed_backends) - self._kernel_base

    def sweep_fused(self, sweep, grid) -> None:
        return None

    def synchronize(self) -> None:
        """The device, then every rank: the loop's timer starts and stops together on all ranks."""
        self._backend.synchronize()
        self._domain.cart.Barrier()

    def _halo(self, grid):
        g = grid.ghost
        nd = grid.ndim
        return self._domain.exchanger(grid.padded_shape, grid.dtype, (g,) * nd, (g,) * nd, (g,) * nd, self._backend.xp)

    def sweep(self, sweep, grid, background=False):
        """The rank's sweep after the halo exchange; compiled before stepping (`background` is not taken)."""
        inner = self._backend.sweep(sweep, grid)
        exchange = self._halo(grid)
        names = sweep.stencil_inputs
        split = self._split(sweep, grid, inner) if self._overlap else None
        if split is None:

            def run_sweep(fields):
                for name in names:
                    exchange(fields[name])
                inner(fields)

            return Launch(run_sweep, inner.strategy, inner.tile)

        self._domain.overlap = True
        interior, slabs = split
        streams = self._streams

        def run_overlapped(fields):
            streams.ready()
            interior(fields)
            with streams.comm():
                for name in names:
                    exchange(fields[name])
            streams.join()
            for slab in slabs:
                slab(fields)

        return Launch(run_overlapped, inner.strategy, inner.tile)

    def _split(self, sweep, grid, whole):
        """(interior, boundary slabs) as sweeps over contiguous axis-0 views, or None where no split helps."""
        dims = self._domain.decomp.dims
        if any(p > 1 for p in dims[1:]):
            if self._required:
                raise StencilforgeError(
                    f"overlap needs a process grid split along the first axis only (--procs {self._domain.decomp.nprocs}"
                    f" {' '.join('1' for _ in dims[1:])}), not {' '.join(map(str, dims))}"
                )
            return None
        lo_rank, hi_rank = self._domain.neighbours[0]
        r, n = sweep.radius, grid.shape[0]
        lo, hi = (r if lo_rank >= 0 else 0), (r if hi_rank >= 0 else 0)
        if lo + hi == 0 or n - lo - hi < 1:
            return None
        engine = self._backend
        if whole.strategy is not None:
            # the kernel the whole block resolved to, on every part: the same code gives the same bits
            engine = type(engine)(strategy=whole.strategy, tile=whole.tile)
        parts = [(lo, n - hi)] + [(a, b) for a, b in ((0, lo), (n - hi, n)) if b > a]
        runs = [self._part(engine, sweep, grid, a, b) for a, b in parts]
        if engine is not self._backend:
            self._kernel_base += engine.kernel_seconds()
            self._timed_backends.append(engine)
        return runs[0], runs[1:]

    @staticmethod
    def _part(engine, sweep, grid, a: int, b: int):
        """The sweep on interior planes a..b-1 of axis 0, through views that keep their ghost planes."""
        g = grid.ghost
        sub = replace(grid, shape=(b - a,) + tuple(grid.shape[1:]))
        if hasattr(grid, "start"):
            sub = replace(sub, start=(grid.start[0] + a,) + tuple(grid.start[1:]))
        run_part = engine.sweep(sweep, sub)
        padded = grid.padded_shape
        views: dict = {}

        def run(fields):
            key = tuple(id(arr) for arr in fields.values())
            entry = views.get(key)
            if entry is None:  # the arrays are kept with their views, so their ids stay theirs
                part = {name: (arr[a : b + 2 * g] if arr.shape == padded else arr) for name, arr in fields.items()}
                entry = views[key] = (tuple(fields.values()), part)
            run_part(entry[1])

        return run

    def sum_squares(self, sweep, grid, background=False):
        exchange = self._halo(grid)
        names = sweep.stencil_inputs

        def run_sum(fields):
            for name in names:
                exchange(fields[name])
            r = evaluate_sweep(sweep, grid, fields).astype(np.float64)
            return self._domain.sum(r * r)

        return run_sum

    def axis_operator(self, op: AxisOperator, dtype, shape=None, background=False):
        """Apply on the block extended by a halo along the axis; closures then fall only on global ends."""
        lo_rank, hi_rank = self._domain.neighbours[op.axis]
        if lo_rank < 0 and hi_rank < 0:
            return self._backend.axis_operator(op, dtype, shape)
        xp = self._backend.xp
        h = operator_halo(op)
        low, high = (h if lo_rank >= 0 else 0), (h if hi_rank >= 0 else 0)
        nd = op.ndim
        shape = [size for _, size in self._domain.decomp.extent(self._domain.coords)]
        n = shape[op.axis]
        shape[op.axis] += low + high
        zeros = [0] * nd

        def along(value):
            out = list(zeros)
            out[op.axis] = value
            return tuple(out)

        inner = self._backend.axis_operator(op, dtype, tuple(shape))
        exchange = self._domain.exchanger(tuple(shape), dtype, along(low), along(high), along(h), xp)
        u_ext = xp.zeros(shape, dtype=dtype)
        outs_ext = [xp.zeros(shape, dtype=dtype) for _ in op.outputs]
        own = tuple(slice(low, low + n) if a == op.axis else slice(None) for a in range(nd))

        def run_operator(u, *outs):
            u_ext[own] = u
            exchange(u_ext)
            inner(u_ext, *outs_ext)
            for o, o_ext in zip(outs, outs_ext):
                o[...] = o_ext[own]

        return Launch(run_operator, inner.strategy, inner.tile)


def run_decomposed(
    setup: Setup,
    backend,
    opts: LoopOptions = LoopOptions(),
    procs: Sequence[int] | None = None,
    comm=None,
    halo: str = "auto",
    overlap: bool | None = None,
    outputs: Sequence[GlobalOutput] = (),
) -> Result:
    """Run `setup` (the global problem) over the ranks of `comm`; every rank returns its block's Result.

    `halo` picks the transport (device.py: auto, mpi, nccl, staged; host for
    CPU backends) and `overlap` hides halo exchanges behind the interior
    computation (None: wherever it applies on a device). The summary (identical
    on every rank) reports the global shape, the process grid, the transport,
    and the slowest rank's comm and compute seconds. On GPUs the caller has
    already called `bind_device` before creating the backend, which fixes the
    backend's device; binding again here could move the rank to another GPU.
    `outputs` (snapshots, checkpoints) are written by rank 0 as global files.
    """
    comm = world() if comm is None else comm
    if opts.observers:
        raise StencilforgeError("a decomposed run takes global outputs (distributed.outputs), not per-rank observers")
    try:
        on_device = is_device_array(backend.xp)
        decomp = agree(comm, lambda: Decomposition.create(comm.size, setup.grid.shape, minimum_extents(setup), procs))
        cart = comm.Create_cart(decomp.dims, periods=[False] * len(decomp.dims), reorder=False)
        coords = tuple(cart.Get_coords(cart.rank))
        local = agree(cart, lambda: localize(setup, decomp, coords))
        transport = agree(cart, lambda: choose_transport(cart, backend.xp, halo))
    except BaseException:
        close_observers([o.observer for o in outputs if o.observer is not None])
        raise
    shapes = {name: arr.shape for name, arr in setup.fields.items()}
    dtypes = {name: arr.dtype for name, arr in setup.fields.items()}
    opts = replace(opts, observers=tuple(Gathering(o, cart, decomp, setup.grid.ghost, shapes, dtypes) for o in outputs))
    if not on_device:
        domain = MPIDomain(cart, decomp, coords, transport)
        return run(local, DecomposedBackend(backend, domain, overlap=overlap), replace(opts, domain=domain))
    cp = backend.xp
    with cp.cuda.Stream(non_blocking=True) as stream:
        domain = MPIDomain(cart, decomp, coords, transport, EventClock(cp), stream.synchronize)
        wrapped = DecomposedBackend(backend, domain, DeviceStreams(cp), overlap)
        return run(local, wrapped, replace(opts, domain=domain))


def gather(comm, decomp: Decomposition, local: np.ndarray, root: int = 0):
    """The global interior array assembled on `root` from every rank's block (None elsewhere).

    Ranks are numbered row-major over the process grid (the Cartesian
    communicator is created without reordering), so `decomp` alone places them.
    """
    parts = comm.gather((decomp.extent(decomp.coords_of(comm.rank)), np.asarray(local)), root=root)
    if comm.rank != root:
        return None
    out = np.empty(decomp.shape, dtype=parts[0][1].dtype)
    for extent, block in parts:
        out[tuple(slice(s, s + n) for s, n in extent)] = block
    return out
