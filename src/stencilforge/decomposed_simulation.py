"""A problem's equations run decomposed over MPI ranks: each rank steps its block of every field.

Every rank builds the whole Problem, keeps its block with ghost layers of the
problem's ghost width and evaluates initial values on it in global
coordinates (arrays are sliced from the global array), so the start is
bitwise that of one process. Kernels form coordinates from global indices too.

Ghost layers are refreshed axis by axis, in axis order: the walls of the
block's global-boundary faces along an axis, then the exchange with the
neighbours along that axis, sending the full padded extent of the other axes.
One process fills axis after axis over full extents as well, so every ghost
cell, corners included, ends up with the value one process gives it. Periodic
walls wrap through the Cartesian communicator where an axis is split and are
filled locally where it is not. Only the slots a pass reads at neighbouring
cells are refreshed, at the times `Simulation.step` refreshes them, so the
per-cell arithmetic is the same kernel on the same values for any process grid.
A source adds its weights at the cells a rank holds; receivers come together on
rank 0 (`points`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from .boundary import Dirichlet, Periodic, bind, faces_of
from .distributed.comm import agree, allgather, gather
from .distributed.decomposition import Decomposition
from .distributed.device import HostClock, choose_transport
from .distributed.halo import HaloExchange, exchange_together
from .ir.analysis import accesses
from .ir.nodes import Expr
from .points import Traces
from .printers.numpy import wall_values
from .problem import Problem
from .reductions import global_max, global_squares_sum, global_sum
from .simulation import Simulation, axis_operator


def halo_widths(problem: Problem) -> dict[str, tuple[int, ...]]:
    """Layers of each field a neighbour must send, per axis: its reach in the step and in the residual."""
    widths = {name: list(reach) for name, reach in problem.analysis.reach.items()}
    for expr in (problem.residual, problem.residual_scale):
        for a in accesses(expr) if expr is not None else ():
            widths[a.field.name] = [max(w, abs(o)) for w, o in zip(widths[a.field.name], a.offset)]
    return {name: tuple(w) for name, w in widths.items()}


class DecomposedSimulation(Simulation):
    """This rank's block of `problem`; `fields` are the block's, `gathered()` the whole grid's on rank 0.

    `procs` fixes the process grid (default: the least cut area); every rank of
    `comm` must build it with the same problem, parameters and backend. On GPUs
    halos move by `halo` (device.choose_transport), and each rank's device must
    be bound (`bind_device`) before its backend is made.
    """

    decomposed = True

    def __init__(self, problem: Problem, backend, params, comm, procs: Sequence[int] | None = None, halo: str = "auto",
                 sweeps: bool = True):
        grid = problem.grid
        minimum = [problem.analysis.ghost] * grid.ndim  # a block holds the layers its neighbours read, and closure rows
        for stage in problem.analysis.operators:
            minimum[stage.axis] = max(minimum[stage.axis], axis_operator(stage).min_length)
        self.decomp = agree(comm, lambda: Decomposition.create(comm.size, grid.shape, minimum, procs))
        wraps = [self.decomp.dims[a] > 1 and any(isinstance(c[a], Periodic) for c in problem.boundary.values())
                 for a in range(grid.ndim)]
        self.cart = comm.Create_cart(self.decomp.dims, periods=wraps, reorder=False)
        self.coords = tuple(self.cart.Get_coords(self.cart.rank))
        self._transport = agree(self.cart, lambda: choose_transport(self.cart, backend.xp, halo))
        self._widths = halo_widths(problem)
        self._phases: dict[str, list] = {}  # field -> per axis (its walls' fills, its exchange with the neighbours)
        self._clock: Any = HostClock()  # the halo exchanges, packing included: on a device, CUDA events on the stream
        if backend.device:
            from .backends.cuda.backend import EventClock

            self._clock = EventClock(backend.xp)
        self._reduce_s = 0.0  # global sums and maxima
        self._comm_before = 0.0  # the exchanges' seconds before the stepping (`start_timing`)
        agree(self.cart, lambda: Simulation.__init__(self, problem, backend, params, sweeps=sweeps))

    def _lattice(self, lattice):
        return self.decomp.block_grid(lattice, self.coords)

    def _bind(self, name: str, conds):
        """The walls that stay put, filled once; per axis (`_phases`), the walls on this block's global-boundary
        faces that move, then the exchange with its neighbours, which `_fill_all` runs for several fields at once."""
        from mpi4py import MPI

        lat, nd = self.lattice, self.lattice.ndim
        physical = self.decomp.physical_faces(self.coords)
        static: list[tuple[bool, Callable]] = []
        phases = self._phases[name] = []
        for axis, cond in enumerate(conds):
            wrapped = isinstance(cond, Periodic) and self.decomp.dims[axis] > 1
            faces = () if wrapped else tuple(f for f in physical if f[0] == axis)
            moving = []
            for end, ends in faces_of(axis, cond, faces):
                if isinstance(end, Dirichlet) and isinstance(end.value, Expr):
                    end = wall_values(end.value, self.params, self.xp)
                fill = bind(end, lat, self.backend, faces=ends, pitch=self._pitch)
                if isinstance(end, Dirichlet) and end.static:
                    static.append((True, fill))
                else:
                    moving.append(fill)
            low, high = self.cart.Shift(axis, 1)
            neighbours = [(MPI.PROC_NULL, MPI.PROC_NULL)] * nd
            neighbours[axis] = (MPI.PROC_NULL if (axis, 0) in faces else low, MPI.PROC_NULL if (axis, 1) in faces else high)
            width = [0] * nd
            width[axis] = self._widths[name][axis]
            phases.append((moving, HaloExchange(self._transport, lat.padded_shape, lat.dtype, (lat.ghost,) * nd,
                                                (lat.ghost,) * nd, width, neighbours, self.xp)))
        return static

    def _fill(self, name: str, arr, t: float) -> None:
        self._fill_all([(name, arr, t)])

    def _fill_all(self, items) -> None:
        """Axis by axis, the walls of every item's array, then one exchange of all of them with the neighbours:
        in one message round (and synchronisation) per axis, each array gets the values one process gives it."""
        items = [item for item in items if item[0] in self._phases]  # fields without walls keep their ghost values
        for axis in range(self.lattice.ndim):
            for name, arr, t in items:
                for fill in self._phases[name][axis][0]:
                    fill(arr, t)
            token = self._clock.start()
            exchange_together(self._transport, [(self._phases[name][axis][1], arr) for name, arr, _ in items])
            self._clock.stop(token)

    def _operator(self, stage):
        """The operator on the block extended along its axis by `AxisOperator.halo` layers of each neighbour's values
        (exchanged each time): closure rows then fall only on the grid's ends, and each cell gets one process's
        arithmetic on one process's values."""
        op, lat, xp = axis_operator(stage), self.lattice, self.xp
        physical = self.decomp.physical_faces(self.coords)
        h, axis, nd = op.halo, op.axis, lat.ndim
        low, high = (0 if (axis, 0) in physical else h), (0 if (axis, 1) in physical else h)
        if low == high == 0:
            return super()._operator(stage)
        from mpi4py import MPI

        shape = list(lat.shape)
        n = shape[axis]
        shape[axis] += low + high
        apply = self.backend.axis_operator(op, lat.dtype, tuple(shape))
        self.launches[op.outputs[0].out] = apply

        def along(value):
            return tuple(value if a == axis else 0 for a in range(nd))

        down, up = self.cart.Shift(axis, 1)
        neighbours = [(MPI.PROC_NULL, MPI.PROC_NULL)] * nd
        neighbours[axis] = (down if low else MPI.PROC_NULL, up if high else MPI.PROC_NULL)
        exchange = HaloExchange(self._transport, tuple(shape), lat.dtype, along(low), along(high), along(h), neighbours, xp,
                                self._clock)
        extended = xp.zeros(tuple(shape), dtype=lat.dtype)
        outs = [xp.zeros(tuple(shape), dtype=lat.dtype) for _ in op.outputs]
        own = tuple(slice(low, low + n) if a == axis else slice(None) for a in range(nd))
        inside = lat.interior

        def run(arrays, params, t):
            extended[own] = arrays[op.inp][inside]
            exchange(extended)
            apply(extended, *outs)
            for d, out in zip(op.outputs, outs):
                arrays[d.out][inside] = out[own]

        return run

    def _solve_layout(self, walls):
        """This rank's blocks of the solve's fine levels, on this simulation's process grid (the coarse levels
        are gathered whole onto every rank: `solvers.decomposed`), and the grid faces its block touches."""
        from .solvers.decomposed import BlockLayout

        layout = BlockLayout(self.cart, self.whole.shape, walls, self.decomp.dims, xp=self.xp, transport=self._transport)
        assert layout.decomp.extent(self.coords) == self.decomp.extent(self.coords), "the solve's blocks are the fields'"
        return layout, self.decomp.physical_faces(self.coords)

    def _whole_interior(self, arr):
        """The whole grid's interior on every rank, from every rank's block."""
        return allgather(self.cart, self.decomp, self.backend.to_host(arr[self.lattice.interior]))

    @property
    def transport(self) -> str:
        """How halos travel: host (CPU ranks), mpi (CUDA-aware), nccl or staged (through pinned host memory)."""
        return self._transport.name

    def load(self, step: int, arrays) -> None:
        """Continue from one process's saved state (global padded arrays, as checkpoints hold them): this block's
        part of each, its ghost layers included, so any process grid resumes any other's checkpoint."""
        g = self.lattice.ghost
        block = tuple(slice(start, start + n + 2 * g) for start, n in self.decomp.extent(self.coords))
        super().load(step, {name: arr[block] for name, arr in arrays.items()})

    def synchronize(self) -> None:
        """The backend, then every rank: a timer read next covers the slowest rank."""
        super().synchronize()
        self.cart.Barrier()

    def _reduced(self, reduce: Callable, value) -> float:
        """reduce(cart, value) over every rank, its seconds counted as the run's reductions'."""
        start = time.perf_counter()
        try:
            return reduce(self.cart, value)
        finally:
            self._reduce_s += time.perf_counter() - start

    def _sum(self, values) -> float:
        return self._reduced(global_sum, values)

    def _sum_squares(self, values) -> float:
        return self._reduced(global_squares_sum, values)

    def _max(self, value) -> float:
        return self._reduced(global_max, float(value))

    def start_timing(self) -> None:
        """Count communication from here: the stepping, not the set-up's waits for the slowest rank."""
        self.synchronize()
        self._comm_before, self._reduce_s = self._clock.seconds(), 0.0

    def timing(self, wall: float) -> dict:
        """The slowest rank's seconds in communication (halo exchanges, timed by CUDA events on a device, and global
        reductions) and in the rest of `wall` (`compute_s`); every rank calls it."""
        comm = self._clock.seconds() - self._comm_before + self._reduce_s
        return {"comm_s": global_max(self.cart, comm), "compute_s": global_max(self.cart, max(wall - comm, 0.0))}

    def gathered(self) -> dict:
        """Each field's current level over the whole grid on rank 0 (None on the other ranks)."""
        return {name: gather(self.cart, self.decomp, self.backend.to_host(local)) for name, local in self.fields.items()}

    def traces(self, since: int = 0) -> Traces | None:
        """The receivers' recordings on rank 0, rows `since` on (None on the other ranks, and without receivers): every
        rank's terms of the cells it holds, summed per receiver on rank 0 in one process's order (`points`)."""
        if not self._receivers:
            return None
        blocks = self.cart.gather(self._receivers.terms(since), root=0)
        return self._receivers.traces(self.dt, blocks, since) if self.cart.rank == 0 else None
