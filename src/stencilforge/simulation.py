"""A problem compiled for one backend: its arrays where the backend computes, its passes, its walls.

A step fills the ghost layers a pass reads, runs the passes (and the solves
between them, `solvers.stepped`) in order, an sf.Iterate group's `count` times
in a row (swapping its fields' levels and filling their walls between runs),
adds point sources, rotates every written field's time levels (no copies),
then records receivers (`points`).
Initial values, wall values and exact solutions that are expressions are
evaluated where the fields live: no full-size host array is built for a GPU
run, and initial values and exact solutions are written there by one generated
kernel each (`tabulated`), without float64 temporaries of the grid's size.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from typing import Any, Callable, Mapping

import numpy as np

from .backends import get_backend
from .backends.base import Launch, with_walls
from .boundary import Copies, Dirichlet, Neumann, Periodic, Sides, all_faces, bind, conditions, faces_of, ghost_boxes
from .errors import StencilforgeError
from .grid import Grid as Lattice, row_pitch
from .interop import backend_for, to_module
from .ir.analysis import Loop, OperatorStage, Pass, SolveStage, accesses, pass_of, slot_name
from .ir.lowering import linear_passes
from .ir.nodes import Constant, Eq, Expr, Field, Time, walk
from .metrics import error_summary, throughput, where_nonfinite
from .plan import AxisOperator, Sweep
from .points import Injection, Recording, Traces
from .printers.numpy import evaluate, float64_coordinates, source_signal, wall_values
from .problem import Problem
from .resources import wall_carriers

log = logging.getLogger(__name__)

SOLVE_TOL = {"float64": 1e-8, "float32": 1e-4}  # sf.Solve's default relative residual, above each dtype's rounding floor


def tabulated(expr: Expr, lattice: Lattice, dtype, params, t: float, xp=np, ghosts: bool = False):
    """An expression of coordinates, t and constants at every cell of the interior (with `ghosts`: of the
    padded lattice) as an array of `dtype`, evaluated in float64 and rounded once to the grid's dtype (for
    a field stored in float16, then to float16). With CuPy one generated kernel writes it on the device."""
    dtype = np.dtype(dtype)
    if xp is not np:
        from .backends.cuda.tabulate import tabulate

        return tabulate(expr, lattice, dtype, params, t, ghosts)
    value = evaluate(expr, dtype=np.float64, coordinate=float64_coordinates(lattice, ghosts=ghosts), params=params, t=t)
    out = np.empty(lattice.padded_shape if ghosts else lattice.shape, dtype=lattice.dtype if dtype == np.float16 else dtype)
    out[...] = value
    return out if out.dtype == dtype else out.astype(dtype)


def initial_array(problem: Problem, lattice: Lattice, name: str, level: int, params, dt: float, xp=np):
    """A ghosted array of a field's initial value at one time level, in the field's storage dtype.

    An expression is evaluated in float64 on the whole lattice (ghosts too) at t = level * dt, so
    u.prev of a leapfrog scheme starts one step back (`tabulated`). A level without its own value
    starts from level 0's. An array holds the whole grid's values: a block of a decomposed run takes its part.
    """
    value = problem.initial.get((name, level), problem.initial.get((name, 0), 0.0))
    storage = problem.analysis.field(name).storage
    if isinstance(value, Expr):
        return tabulated(value, lattice, storage, params, min(level, 0) * dt, xp, ghosts=True)
    arr = xp.zeros(lattice.padded_shape, dtype=lattice.dtype)
    if getattr(value, "ndim", 0):  # a NumPy or CuPy array (Problem reads others through DLPack)
        value = value[tuple(slice(lattice.first_index(a), lattice.first_index(a) + n) for a, n in enumerate(lattice.shape))]
    arr[lattice.interior] = to_module(value, xp)
    return arr if storage == lattice.dtype else arr.astype(storage)


def axis_operator(stage: OperatorStage) -> AxisOperator:
    """The kernel-level form of an operator stage: its operand's slot, each derivative writing its equation's slot."""
    derivatives = tuple(dataclasses.replace(d.derivative, out=slot_name(w)) for d, w in zip(stage.derivatives, stage.writes))
    return AxisOperator(slot_name((stage.operand.field.name, stage.operand.level)), stage.axis, 2, derivatives)


# The most steps one CUDA graph replays: a bound on what a capture records and holds, not tuned (at 50 steps a graph
# the 1D 81-point diffusion step took 3.1 us on an H200: h200-small-steps-graphs-fbc8de8-2026-12-03.json).
GRAPH_STEPS = 64
# What a single step costs beside one graph launch, in graph launches, when choosing a graph's length (a few
# launches of its passes and walls against one): a rough weight, not a measurement.
SINGLE_STEP_COST = 8


def graph_units(unit: int, window: int | None) -> int | None:
    """How many passes of `unit` steps one graph takes: at most GRAPH_STEPS steps, and the count that leaves the fewest
    single steps between the run's looks at the state (every window + 1 steps; after a graph of single steps (unit 1)
    the run may look, after fused passes it may not). None where a graph would not take two steps."""
    interval = None if window is None else window + 1
    span = GRAPH_STEPS if interval is None else interval - (unit != 1)  # the steps graphs may cover between looks
    fits = [k for k in range(1, min(GRAPH_STEPS, span) // unit + 1) if k * unit >= 2]
    if not fits or interval is None:
        return max(fits, default=None)

    def cost(k: int) -> tuple:
        graphs = span // (k * unit)
        return graphs + SINGLE_STEP_COST * (interval - graphs * k * unit), -k

    return min(fits, key=cost)


class Simulation:
    """The problem's state on a backend, for a loop of one's own: `step(n)` advances n steps (`t`, `step_count`);
    `field(name)` is a host copy of a field's current level, `set_field(name, values)` writes it from host or device
    values; `fields` are the current levels as views in the backend's arrays (CuPy on cuda). `sf.run` steps the same
    way, with fused steps, checks, outputs and signals on top (docs/api.md, "Stepping it yourself")."""

    decomposed = False  # one process holds the whole grid

    def __init__(self, problem: Problem, backend="auto", params: Mapping[str, float] | None = None, background: bool = False,
                 sweeps: bool = True):
        """`backend`: a name (auto, numpy, numba, cuda; auto as `sf.run` picks it) or a backend object.
        `background`: the passes' kernels may compile while the time loop steps on a path with the same bits
        (`Backend.equation_pass`); off, they compile as the Simulation is built (what a bare loop timing them needs).
        `sweeps`: a pass of one equation linear in the fields runs as the backend's sweep (`linear_passes`); off,
        every pass runs its generated kernel."""
        if isinstance(backend, str):
            backend = get_backend(backend_for(backend, problem.initial.values(), host="auto"))
        self.problem, self.backend, self.background = problem, backend, background
        an = problem.analysis
        grid = an.grid
        self.params = problem.values(params)
        if an.half and not backend.half_storage:
            raise StencilforgeError(f"{problem.name}: fields stored in float16 ({', '.join(an.half)}) run on the numpy and cuda "
                                    f"backends, not {backend.name}")
        if an.half and self.decomposed:
            raise StencilforgeError(f"{problem.name}: fields stored in float16 ({', '.join(an.half)}) run in one process, "
                                    "not split over ranks")
        dt = problem.dt
        self.dt = self.params[dt.name] if isinstance(dt, Constant) else dt.value
        if not self.dt > 0:
            raise StencilforgeError(f"dt must be positive, got {self.dt}")
        # no ghost layers where no field is read at a neighbouring cell and none has walls: the arrays are dense,
        # as the axis-operator kernels of one-sided derivatives take them
        ghost = an.ghost if problem.boundary or any(any(r) for r in an.reach.values()) else 0
        self.whole = Lattice(grid.shape, grid.spacing, grid.dtype, ghost, grid.origin)
        self.lattice = self._lattice(self.whole)
        self.xp = backend.xp
        self.sweeps = self._linear_passes() if sweeps else {}
        self.launches: dict[str, Any] = {}  # a sweep's output slot -> its Launch (what strategy ran)
        self.step_count, self.t = 0, 0.0
        self.levels: dict[str, list] = {}
        for f in an.fields:
            kept = {1: (0,), 2: (0, 1), 3: (-1, 0, 1)}[f.levels]
            self.levels[f.name] = [self._initial(f.name, level) for level in kept]
        self._pitch = row_pitch(next(iter(self.levels.values()))[0])  # every array's: walls and gathers index by it
        # per step, without recomputing them: each slot's (name, field, index in its levels list), the level lists rotated
        self._slot_index = [(slot_name((name, lv)), name, lv + 1 if len(levels) == 3 else lv)
                            for name, levels in self.levels.items()
                            for lv in ((-1, 0, 1) if len(levels) == 3 else (0, 1) if len(levels) == 2 else (0,))]
        self._rotating = [self.levels[name] for name in an.written if len(self.levels[name]) > 1]
        self._gathers: dict[tuple, tuple] = {}  # walls per axis -> (ghost cells, their interior images)
        self._gathered: dict[str, tuple] = {}  # field -> its walls, for fields filled by a gather
        self._moving: set[str] = set()  # fields with Dirichlet walls that change in time
        self._fillers = {name: self._bind(name, conds) for name, conds in problem.boundary.items()}
        for name, fills in self._fillers.items():
            for static, fill in fills:
                if static:
                    for arr in self.levels[name]:
                        fill(arr, 0.0)
        self._images = self._written_images()
        self._image_fields = frozenset(name for name, _ in self._images)
        self._imaged: frozenset[str] = frozenset()  # fields whose current level's ghost cells the last step's pass wrote
        self.solvers: dict[str, Any] = {}  # solved field -> its `solvers.stepped.StepSolver`
        self._residual: tuple | None = None  # ((slot, run) and the slots it reads, of the residual and its scale; their array)
        self.stages = [(s, self._pass(i, s) if isinstance(s, Pass) else self._solve(s) if isinstance(s, SolveStage)
                        else self._operator(s)) for i, s in enumerate(an.stages)]
        self.passes = [(p, run) for p, run in self.stages if isinstance(p, Pass)]  # each compiled once, however often it runs
        self._segments = self._segments_of(an.loops)
        self._walls_between = self._walls_within_step()
        self._iterated = [self._iterated_pass(seg, walls) for seg, walls in zip(self._segments, self._walls_between)]
        self.fused: Launch | None = None  # several steps in one pass, where `build_fused` found a kernel
        self._carriers: list = []  # the fused sweep's walls of its middle states past the first
        self._after_fused = False  # the last step was a fused pass (`step` then restores what single steps leave)
        self.graphs: dict[tuple[int, ...], Launch] = {}  # several steps as a CUDA graph, by the levels' order at its start
        self._halo_now = sorted({s for p in an.stages for s in p.halo if s[1] <= 0 and s[0] in self._fillers})
        signals = [source_signal(s.signal, self.params) for s in problem.sources]
        self._sources = Injection(problem, self.lattice, signals, self.xp)  # the cells this lattice holds
        self._receivers = Recording(problem, self.lattice, self.xp, backend.to_host, whole=not self.decomposed)

    # ------------------------------------------------------------ set-up

    def _lattice(self, lattice: Lattice) -> Lattice:
        """The part of the problem's lattice this simulation holds: all of it."""
        return lattice

    def _initial(self, name: str, level: int):
        """The level's initial values; on a device, in the layout of its sweep kernels (`Backend.field`: rows on
        cache lines) where every stage of the step is a sweep (a generated pass takes C-contiguous arrays)."""
        arr = initial_array(self.problem, self.lattice, name, level, self.params, self.dt, self.xp)
        if self.backend.device and len(self.sweeps) == len(self.problem.analysis.stages):
            return self.backend.field(arr, self.lattice.ghost)
        return arr

    def _bind(self, name: str, conds) -> list[tuple[bool, Callable]]:
        """(static, fill(arr, t)) per wall in axis order, so that corners take the later axis's values: one Dirichlet
        condition of consecutive axes is one wall (one launch a fill on a GPU), as its corners take one value either way.

        Walls that copy the interior (periodic, Neumann) on every axis become one gather of all ghost
        cells from their interior images; `step` fills the fields that share such walls in one call.
        """
        if all(isinstance(c, (Periodic, Neumann)) for c in conds):
            self._gathered[name] = tuple(type(c).__name__ for c in conds)
            return [(False, self._gather_fill(conds))]
        walls: list[tuple[Any, tuple]] = []  # (condition, faces): one Dirichlet wall on consecutive axes fills them at once
        for axis, cond in enumerate(conds):
            if isinstance(cond, Periodic) and self.lattice.ghost > self.lattice.shape[axis]:
                raise StencilforgeError(f"periodic {name} along axis {axis}: ghost width exceeds the grid")
            for end, faces in faces_of(axis, cond):
                if walls and isinstance(end, Dirichlet) and walls[-1][0] is end:
                    walls[-1] = (end, walls[-1][1] + faces)
                else:
                    walls.append((end, faces))
        fills = []
        for end, faces in walls:
            if isinstance(end, Dirichlet) and isinstance(end.value, Expr):
                end = wall_values(end.value, self.params, self.xp)
            if isinstance(end, Dirichlet) and not end.static:
                self._moving.add(name)
            fills.append((isinstance(end, Dirichlet) and end.static,
                          bind(end, self.lattice, self.backend, faces=faces, pitch=self._pitch)))
        return fills

    def _written_images(self) -> dict[tuple[str, int], tuple[str, ...]]:
        """Written slots whose pass writes their ghost cells too (fields whose walls are a gather, on a backend
        that can; not fields with point sources, which change cells after the pass): their gathers are skipped."""
        if self.decomposed or not self.backend.writes_ghost_images:
            return {}
        sourced = {s.field.name for s in self.problem.sources}
        return {slot: self._gathered[slot[0]] for i, p in enumerate(self.problem.analysis.stages) if isinstance(p, Pass)
                and i not in self.sweeps for slot in p.writes if slot[0] in self._gathered and slot[0] not in sourced}

    def _linear_passes(self) -> dict[int, Sweep]:
        """Stage index -> the linear form of each linear pass (`ir.lowering.linear_passes`): the backend's
        hand-scheduled sweep kernels run it, whatever else the step computes, where one of them applies
        (`Backend.takes_sweep`). None where a field is stored in float16 (sweeps keep every field in the grid's dtype)."""
        an = self.problem.analysis
        if an.half:
            return {}
        return {i: sweep for i, sweep in linear_passes(an.stages, self.params).items() if self.backend.takes_sweep(sweep, self.lattice)}

    def _pass(self, index: int, p: Pass) -> Callable:
        sweep = self.sweeps.get(index)
        if sweep is not None:
            launch = self.launches[sweep.out] = self.backend.sweep(sweep, self.lattice, background=self.background)
            return lambda arrays, params, t: launch(arrays)
        images = self.pass_images(p)
        if images:
            return self.backend.equation_pass(p, self.lattice, self.problem.constants, images=images, background=self.background)
        return self.backend.equation_pass(p, self.lattice, self.problem.constants, background=self.background)

    def pass_images(self, p: Pass) -> dict[str, tuple[str, ...]]:
        """The written slots whose ghost cells the generated pass `p` writes too, with their walls per axis
        (`Backend.equation_pass`'s `images`)."""
        return {slot_name(s): walls for s, walls in self._images.items() if s in p.writes}

    def _operator(self, stage: OperatorStage) -> Callable:
        """run(arrays, params, t) for one-sided derivatives: the backend's axis-operator kernel over the interior, on the
        arrays themselves where they have no ghost layers, else through dense copies."""
        op, lat = axis_operator(stage), self.lattice
        apply = self.backend.axis_operator(op, lat.dtype, lat.shape, background=self.background)
        self.launches[op.outputs[0].out] = apply
        outs = [d.out for d in op.outputs]
        if lat.ghost == 0:
            return lambda arrays, params, t: apply(arrays[op.inp], *(arrays[o] for o in outs))
        inside = lat.interior
        operand, *dense = (self.xp.empty(lat.shape, dtype=lat.dtype) for _ in range(len(outs) + 1))

        def run(arrays, params, t):
            operand[...] = arrays[op.inp][inside]
            apply(operand, *dense)
            for o, d in zip(outs, dense):
                arrays[o][inside] = d

        return run

    def _solve(self, stage: SolveStage) -> Callable:
        """run(arrays, params, t) for a solve: its right-hand side from the step's arrays, then multigrid from the
        field's current level into the slot it writes (walls: the field's, Dirichlet values at t + dt)."""
        from .solvers.stepped import StepSolver

        s, lat, xp = stage.solve, self.lattice, self.xp
        (name, level), = stage.writes
        if any(isinstance(c, Sides) for c in self.problem.boundary[name]):
            raise StencilforgeError(f"{self.problem.name}: the solve for {name} takes one wall kind per axis; its walls differ per side")
        walls = tuple(type(c).__name__.lower() for c in self.problem.boundary[name])
        g, shape = lat.ghost, lat.shape
        near = tuple(slice(g - 1, g + n + 1) for n in shape)  # the interior and the ghost layer next to it

        def scalar(e) -> float:
            return float(evaluate(e, dtype=np.float64, coordinate=lambda axis, shift: None, params=self.params))

        k = None
        if s.k is not None:  # the whole grid's, as the hierarchy is built from it on every rank
            def field_value(node):
                return np.asarray(self._whole_interior(self._slot((node.field.name, 0))), dtype=np.float64)

            k = evaluate(s.k, dtype=np.float64, coordinate=float64_coordinates(self.whole), access=field_value, params=self.params)
        tol = s.tol if s.tol is not None else SOLVE_TOL[lat.dtype.name]
        layout, faces = self._solve_layout(walls)
        solver = self.solvers[name] = StepSolver(self.backend, self.whole.shape, lat.spacing, walls, k, scalar(s.a), scalar(s.b),
                                                 lat.dtype, tol, s.max_cycles, f"{self.problem.name}: solve for {s.label}", layout, faces)
        rhs_slot, rhs_pass = self._value_pass(s.rhs, f"{name}_rhs")
        scratch = xp.zeros(lat.padded_shape, dtype=lat.dtype)

        def run(arrays, params, t):
            rhs_pass({**arrays, rhs_slot: scratch}, params, t)
            rhs = scratch[lat.interior]
            out = arrays[slot_name((name, level))]
            if "dirichlet" in walls:
                self._fill(name, out, t + self.dt)
            start = arrays[name][lat.interior]  # the field's current level: the previous step's solution
            out[lat.interior] = solver.solve(start, rhs, out[near] if "dirichlet" in walls else None, self.step_count + 1)

        return run

    def _value_pass(self, expr: Expr, name: str, pitch: int | None = None) -> tuple[str, Callable]:
        """(slot, run) of the generated pass that writes `expr` into an array of its own (a solve's right-hand side, a
        residual): compiled as the step's passes are, where array code would make a temporary per operation (the
        same values: the backends' passes give NumPy's oracle's bits). `pitch`: on a device, a pass over the
        fields in the sweeps' layout (`Backend.field`), its array laid out alike."""
        slot = name
        while slot in self.levels:  # not a field's name
            slot += "_"
        p = pass_of(Eq(Field(slot, self.problem.grid, levels=1), expr))
        extra = {} if pitch is None else {"pitch": pitch}
        return slot, self.backend.equation_pass(p, self.lattice, self.problem.constants, background=self.background, **extra)

    def _solve_layout(self, walls) -> tuple[Any, Any]:
        """(the solve's multigrid layout, the grid faces this block touches): None for both, the whole grid here."""
        return None, None

    def _whole_interior(self, arr) -> np.ndarray:
        """The interior of one of this simulation's arrays over the whole grid, on the host."""
        return self.backend.to_host(arr[self.lattice.interior])

    def _walls_within_step(self) -> list[tuple[list, list, tuple[str, ...]]]:
        """The walls a step fills at t + dt between its stages, worked out once: per segment, for its first run and for
        each later one, per stage the (field, slot) filled before it (the slots it reads at neighbours that the step
        has written since their ghost cells were filled; in a later run of a loop, since that run began), and the
        rotated fields filled between two runs of a loop (read at neighbours in it); none where a pass wrote them as
        ghost images."""
        plans = []
        done: set[tuple[str, int]] = set()
        for _, stages, loop in self._segments:
            plan = []
            for changed in (done, set()):
                fills = []
                for p, _ in stages:
                    fills.append([(name, slot_name((name, level))) for name, level in p.halo
                                  if (name, level) in changed and (name, level) not in self._images])
                    changed.update(p.writes)
                plan.append(fills)
            read = {s for p, _ in stages for s in p.halo}
            rotated = () if loop is None else tuple(name for name in loop.rotated if (name, 0) in read and (name, 1) not in self._images)
            plans.append((plan[0], plan[1], rotated))
        return plans

    def _iterated_pass(self, segment, walls) -> Launch | None:
        """A loop's runs as one call of the backend's (`iterated_pass`), where it has one and the loop is one
        generated pass that rotates one field of two levels whose walls between runs are copies (Neumann,
        Periodic; `boundary.Copies`) or one gather of C-contiguous arrays and, alone in one process, needs nothing
        else between runs; else None."""
        runs, stages, loop = segment
        _, later, rotated = walls
        iterate = getattr(self.backend, "iterated_pass", None)
        if iterate is None or loop is None or self.decomposed or len(stages) != 1 or later[0] or len(loop.rotated) != 1:
            return None
        ((p, _),) = stages
        (name,) = loop.rotated
        if not isinstance(p, Pass) or loop.start in self.sweeps or self.pass_images(p) or len(self.levels[name]) != 2:
            return None
        gather = self._gathers[self._gathered[name]] if rotated and name in self._gathered else None
        if gather is not None and not all(a.flags.c_contiguous for a in self.levels[name]):
            return None
        fills = [fill for static, fill in self._fillers.get(name, ()) if not static] if rotated and gather is None else []
        copies = tuple(pair for f in fills if isinstance(f, Copies) for pair in f.pairs)
        if not all(isinstance(f, Copies) for f in fills):
            return None
        return iterate(p, self.lattice, self.problem.constants, (name, slot_name((name, 1))), copies, gather,
                       background=self.background)

    def _segments_of(self, loops) -> list[tuple[int, list, Loop | None]]:
        """The step as (runs, stages, loop) in order: the stages outside loops run once, a loop's `count` times."""
        segments: list[tuple[int, list, Loop | None]] = []
        at = 0
        for loop in loops:
            segments += [(1, self.stages[at:loop.start], None), (loop.count, self.stages[loop.start:loop.stop], loop)]
            at = loop.stop
        return [seg for seg in segments + [(1, self.stages[at:], None)] if seg[1]]

    def _gather_fill(self, conds) -> Callable:
        lat, xp = self.lattice, self.xp
        g = lat.ghost
        for axis, cond in enumerate(conds):
            if g > lat.shape[axis]:
                raise StencilforgeError(
                    f"a {type(cond).__name__.lower()} wall along axis {axis} needs at least {g} points, the grid has {lat.shape[axis]}"
                )
        key = tuple(type(c).__name__ for c in conds)
        if key not in self._gathers:
            self._gathers[key] = tuple(xp.asarray(cells) for cells in self._ghost_images(conds))
        dst, src = self._gathers[key]
        copy = self.backend.copy_cells
        return lambda arr, t: copy([arr], dst, src)

    def _ghost_images(self, conds) -> tuple[np.ndarray, np.ndarray]:
        """Flat indices of every ghost cell, ascending, and of its interior image under the walls `conds`;
        built from the ghost boxes alone (the whole lattice's indices cost a large grid a second)."""
        lat = self.lattice
        g = lat.ghost
        boxes = ghost_boxes(lat, all_faces(lat.ndim))
        meshes = [np.meshgrid(*[np.arange(s.start, s.stop) for s in box], indexing="ij") for box in boxes]
        idx = np.stack([np.concatenate([m[axis].ravel() for m in meshes]) for axis in range(lat.ndim)])
        src = idx.copy()
        for axis, cond in enumerate(conds):
            i, n = idx[axis] - g, lat.shape[axis]
            if isinstance(cond, Periodic):
                src[axis] = np.mod(i, n) + g
            else:  # mirror about a wall half a cell outside the first and last interior points
                src[axis] = np.where(i < 0, -1 - i, np.where(i >= n, 2 * n - 1 - i, i)) + g
        rows = lat.padded_shape[:-1] + (self._pitch or lat.padded_shape[-1],)
        dst = np.ravel_multi_index(tuple(idx), rows)
        order = np.argsort(dst)
        return dst[order].astype(np.int64), np.ravel_multi_index(tuple(src), rows)[order].astype(np.int64)

    # ------------------------------------------------------------ stepping

    def _fill(self, name: str, arr, t: float) -> None:
        for static, fill in self._fillers.get(name, ()):
            if not static:
                fill(arr, t)

    def _slot(self, slot) -> Any:
        name, level = slot
        levels = self.levels[name]
        return levels[level + 1] if len(levels) == 3 else levels[level] if len(levels) == 2 else levels[0]

    def _newest(self, name: str) -> Any:
        """The level a step has just computed: the next one, or the only one of a field without levels."""
        return self.levels[name][-1]

    def _current(self, name: str) -> Any:
        return self._slot((name, 0))

    def arrays(self) -> dict:
        """Every time level of every field by slot name (u_prev, u, u_next): what the passes take."""
        levels = self.levels
        return {slot: levels[name][i] for slot, name, i in self._slot_index}

    def _fill_all(self, items: list[tuple[str, Any, float]]) -> None:
        """`_fill` of each (field, array, time)."""
        for name, arr, t in items:
            self._fill(name, arr, t)

    def _fill_before(self, t: float) -> None:
        """The ghost cells of the levels a step reads at neighbours, where its passes did not write them."""
        together: dict[tuple, list] = {}
        filled = []
        for name, level in self._halo_now:
            if level == 0 and name in self._imaged:
                continue
            if name in self._gathered:
                together.setdefault(self._gathered[name], []).append(self._slot((name, level)))
            else:
                filled.append((name, self._slot((name, level)), t + level * self.dt))
        self._fill_all(filled)
        for key, group in together.items():
            self.backend.copy_cells(group, *self._gathers[key])

    def step(self, count: int = 1) -> None:
        for _ in range(count):
            t, dt = self.t, self.dt
            if self._after_fused:
                self._refill_written(t - dt)
            self._fill_before(t)
            arrays = self.arrays()
            for (runs, stages, loop), (first, later, rotated), iterated in zip(self._segments, self._walls_between, self._iterated):
                if iterated is not None and loop is not None and iterated.ready():
                    if first[0]:
                        self._fill_all([(name, arrays[slot], t + dt) for name, slot in first[0]])
                    iterated(arrays, self.params, t, runs)
                    if runs % 2 == 0:  # it left the last iterate where the loop's swaps leave it
                        self._swap_iterate(loop, arrays)
                    continue
                for k in range(runs):
                    if loop is not None and k:
                        self._next_iterate(loop, arrays, t + dt, rotated)
                    for (_, run), fills in zip(stages, later if k else first):
                        if fills:  # together: a decomposed run exchanges their halos in one round per axis
                            self._fill_all([(name, arrays[slot], t + dt) for name, slot in fills])
                        run(arrays, self.params, t)
            self._sources.add(t, self._newest)
            self._rotate(1)
            if self._receivers:
                self._receivers.record(self.step_count, self._current)

    def _refill_written(self, t: float) -> None:
        """After a fused pass, the walls single steps leave in the level a step writes: those of the step before
        (when it was the current level), so that every level, ghost cells included, holds single steps' bits."""
        self._after_fused = False
        self._fill_all([(name, self._slot((name, 1)), t) for name, level in self._halo_now
                        if level == 0 and name not in self._gathered and len(self.levels[name]) == 2])

    def _next_iterate(self, loop: Loop, arrays: dict, t: float, walls: tuple[str, ...]) -> None:
        """Between two runs of a loop: each rotated field's new iterate becomes its current level (its two arrays
        swap, in `levels` and in the step's `arrays`), the walls of `walls` (`_walls_within_step`) at `t`."""
        self._swap_iterate(loop, arrays)
        self._fill_all([(name, arrays[name], t) for name in walls])

    def _swap_iterate(self, loop: Loop, arrays: dict) -> None:
        """Each rotated field's two arrays exchanged, in `levels` and in the step's `arrays`."""
        for name in loop.rotated:
            levels = self.levels[name]
            levels.reverse()
            arrays[name], arrays[slot_name((name, 1))] = levels

    @property
    def passes_per_step(self) -> int:
        """Passes a step launches: an iterated pass once per iteration (`passes` holds each once)."""
        return sum(runs * sum(isinstance(p, Pass) for p, _ in stages) for runs, stages, _ in self._segments)

    def _rotate(self, steps: int) -> None:
        for levels in self._rotating:  # [cur, next] -> [next, cur]; [prev, cur, next] -> [cur, next, prev]
            levels.append(levels.pop(0))
        self._imaged = self._image_fields
        self.step_count += steps
        self.t = self.step_count * self.dt

    # ------------------------------------------------------------ several steps per pass

    def _one_pass(self) -> str | None:
        """Why a step is not one pass that maps the current level of its fields to the next, alone in one
        process (what any kernel of several steps needs), or None."""
        an = self.problem.analysis
        if self.decomposed:
            return "the run is decomposed"
        if an.solves:
            return "a step solves for " + ", ".join(s.solve.label for s in an.solves)
        if an.loops:
            return "a step runs sf.Iterate's passes several times"
        if len(an.passes) != 1:
            return f"a step runs {len(an.passes)} passes"
        if self.problem.sources:
            return "it has point sources"
        if self.problem.receivers:
            return "it records receivers"
        (p,) = an.passes
        if any(len(self.levels[name]) != 2 for name in an.written) or any(level != 1 for _, level in p.writes):
            return "a written field does not keep two time levels"
        return None

    def pair_plan(self) -> tuple[tuple[str, ...] | None, int] | str:
        """(walls, reach) for `backend.equation_pair`, or why two steps cannot run as one pass.

        It needs one generated pass per step (`_one_pass`) and the same kind of walls on every written field
        that has walls: periodic or Neumann (the kernel puts the middle state's own images in its ghost cells), or
        Dirichlet (`step_fused` puts the walls at t + dt in the output's ghost cells, where the kernel reads them).
        """
        an = self.problem.analysis
        why = self._one_pass() or ("its pass runs as a sweep" if self.sweeps else None)
        if why:
            return why
        (p,) = an.passes
        kinds = {self._gathered.get(name) for name in an.written if name in self._fillers}
        if kinds == {None}:
            if not all(isinstance(c, Dirichlet) for name in an.written for c in conditions(self.problem.boundary.get(name, ()))):
                return "its walls mix Dirichlet with periodic or Neumann"
            walls = None
        elif len(kinds) > 1:
            return "its fields' walls differ"
        else:
            (walls,) = kinds
        reach = max([0] + [max(abs(o) for o in a.offset) for eq in p.equations for a in accesses(eq.expr)
                           if a.level == 0 and a.field.name in an.written])
        return walls, reach

    def build_fused(self, window: int | None = None) -> str | None:
        """Compile the kernel of several steps in one pass; returns why there is none, or None. A step that is one
        sweep of a field's current level into its next takes the backend's fused sweep (`Backend.sweep_fused`),
        any other pass its two-step kernel (`Backend.equation_pair`). `window`: the most steps a pass may take
        and still fall between the run's looks at the state (`timeloop.fusion_window`)."""
        if self.sweeps:
            return self._fuse_sweep(window)
        plan = self.pair_plan()
        if isinstance(plan, str):
            return plan
        (p,) = self.problem.analysis.passes
        images = {slot_name(s): walls for s, walls in self._images.items()}
        pair = self.backend.equation_pair(p, self.lattice, self.problem.constants, plan[0], plan[1], images)
        if pair is None:
            return f"the {self.backend.name} backend has no two-step kernel for it"
        self.fused = Launch(lambda arrays, times: pair(arrays, self.params, *times), steps=2)
        return None

    def _fuse_sweep(self, window: int | None) -> str | None:
        """The fused sweep where it gives single steps' bits: the sweep iterates one field (`Sweep.composes_with`)
        whose walls are Dirichlet (the middle states' walls are filled ahead: the first in the output's ghost
        cells, the others in carriers of their own, where they change in time)."""
        why = self._one_pass()
        if why:
            return why
        if not self.backend.fuses_steps:
            return f"the {self.backend.name} backend has no fused kernels"
        (sweep,) = self.sweeps.values()
        (name,) = self.problem.analysis.written
        if not sweep.composes_with((name, slot_name((name, 1)))):
            return "its step is not one sweep between the two levels of one field"
        if not all(isinstance(c, Dirichlet) for c in conditions(self.problem.boundary.get(name, ()))):
            return "a wall that changes in time reads the field"
        fused = self.backend.sweep_fused(sweep, self.lattice, window=window)
        if fused is None:
            return f"the {self.backend.name} backend has no fused kernel for it"
        moving = any(not static for static, _ in self._fillers.get(name, ()))
        carriers = wall_carriers(self.backend, self._slot((name, 0)), self.lattice.ghost, fused.steps - 2) if moving else []
        if carriers is None:
            return f"the walls of its {fused.steps - 2} middle steps do not fit in memory"
        self._carriers = carriers
        self.fused = Launch(lambda arrays, times: fused(with_walls(arrays, sweep, fused.steps, self._carriers)),
                            steps=fused.steps, compiling=fused.compiling)
        return None

    def step_fused(self) -> int:
        """`fused.steps` steps in one pass (after `build_fused`): the fields single steps give, bit for bit. The
        level it leaves behind holds an older state than single steps leave there, which no step reads. Returns
        the count."""
        assert self.fused is not None
        steps = self.fused.steps
        times = [(self.step_count + s) * self.dt for s in range(steps)]  # as single steps form them
        self._fill_before(self.t)
        for name in self.problem.analysis.written:  # Dirichlet walls of the middle states, ahead
            if name not in self._gathered:
                self._fill(name, self._slot((name, 1)), times[1])
                for carrier, t in zip(self._carriers, times[2:]):
                    self._fill(name, carrier, t)
        self.fused(self.arrays(), times)
        self._rotate(steps)
        self._after_fused = True
        return steps

    def graph_plan(self) -> str | None:
        """Why the step's launches cannot be captured once and replayed (what a CUDA graph needs: every launch the
        same at every step, no host work between them), or None."""
        an = self.problem.analysis
        if self.decomposed:
            return "the run is decomposed"
        if an.solves:
            return "a step solves for " + ", ".join(s.solve.label for s in an.solves) + " (its cycles are decided on the host)"
        if self.problem.sources:
            return "it has point sources"
        if self.problem.receivers:
            return "it records receivers"
        if self._moving:
            return f"the walls of {', '.join(sorted(self._moving))} change in time"
        if any(isinstance(node, Time) for stage in an.stages if not isinstance(stage, SolveStage)
               for eq in stage.equations for node in walk(eq.expr)):
            return "its equations read t"
        return None

    def build_graph(self, window: int | None = None) -> str | None:
        """Capture several steps (fused passes where `build_fused` built one, else single steps) as graphs of the
        backend's (`Backend.capture`), as many as fit in `window` (`graph_units`); returns why there are none, or None.
        A graph's launches hold the arrays of the time levels as they stood at its start, so there is one for each
        order steps leave them in, captured from there (a level list of n arrays rotates by one a step; a loop's
        iterates swap). A replay launches the kernels the steps launch, so it gives their bits."""
        if not self.backend.captures:
            return f"the {self.backend.name} backend has no graphs"
        why = self.graph_plan()
        if why:
            return why
        unit = self.fused.steps if self.fused is not None else 1
        if self.fused is not None and not self.fused.ready():
            return "the fused kernel is still compiling"
        units = graph_units(unit, window)
        if units is None:
            return f"the run looks at its state more often than every {unit + 1} steps"
        take = self.step_fused if self.fused is not None else self.step
        before = self._host_state()
        graphs = {}
        try:
            for order in range(math.lcm(2, *(len(levels) for levels in self._rotating))):  # the orders steps leave
                if order:
                    self.backend.capture(self.step)  # the host's side of one step (the order it leaves), nothing run
                start, key = self._host_state(), self._order()
                replay = self.backend.capture(lambda: [take() for _ in range(units)])
                end = self._host_state()
                graphs[key] = Launch(functools.partial(self._replay, replay, end[0], units * unit, end[2:]), steps=units * unit)
                self._restore(start)
        finally:
            self._restore(before)
        self.graphs = graphs
        return None

    def _host_state(self) -> tuple:
        """What stepping changes on the host: every level's array in order, the step count, the flags of walls."""
        return [a for levels in self.levels.values() for a in levels], self.step_count, self._imaged, self._after_fused

    def _restore(self, state: tuple) -> None:
        arrays, self.step_count, self._imaged, self._after_fused = state
        it = iter(arrays)
        for levels in self.levels.values():
            levels[:] = [next(it) for _ in levels]
        self.t = self.step_count * self.dt

    def _replay(self, replay: Callable[[], None], arrays: list, steps: int, flags: tuple) -> None:
        """Launch `replay`; the host then holds what its steps leave: the levels' order `arrays`, the flags."""
        replay()
        self._restore((arrays, self.step_count + steps, *flags))

    def _order(self) -> tuple[int, ...]:
        """The identities of the level arrays, in order: what a graph's launches hold."""
        return tuple(id(a) for levels in self.levels.values() for a in levels)

    @property
    def graph(self) -> Launch | None:
        """The graph that starts from the levels' present order, or None."""
        return self.graphs.get(self._order()) if self.graphs else None

    @property
    def graph_steps(self) -> int | None:
        """Steps a graph replays, None without graphs."""
        return next(iter(self.graphs.values())).steps if self.graphs else None

    # ------------------------------------------------------------ results

    def current(self) -> dict:
        """Each field's current level, ghost layers included (what outputs copy their regions from)."""
        return {name: self._slot((name, 0)) for name in self.levels}

    def start_timing(self) -> None:
        """Where a decomposed run starts counting its communication (`DecomposedSimulation`); one process has none."""

    def synchronize(self) -> None:
        """Wait for the backend's queued work, so a timer read next covers it."""
        self.backend.synchronize()

    def _sum(self, values) -> float:
        """Correctly rounded, as a decomposed run's global sum is: the residual has the same bits on any process grid."""
        from .reductions import combine, local_part

        return combine([local_part(values)])

    def _sum_squares(self, values) -> float:
        """`_sum` of the squares of `values` in float64, without an array of them."""
        from .reductions import combine, squares_part

        return combine([squares_part(values)])

    def _max(self, value) -> float:
        return float(value)

    def all(self, flag: bool) -> bool:
        """`flag` on every process holding a part of the grid."""
        return self._max(0.0 if flag else 1.0) == 0.0

    def finite(self) -> bool:
        """Whether every written field's current level is free of NaN and Inf, on every process."""
        interior = self.lattice.interior
        return self.all(self.backend.all_finite([self._slot((name, 0))[interior] for name in self.problem.analysis.written]))

    def nonfinite(self) -> dict[str, str]:
        """On this process, each written field whose current level holds NaN or Inf -> where (see `where_nonfinite`)."""
        written = self.problem.analysis.written
        dirichlet = {name for name in written if any(isinstance(c, Dirichlet) for c in conditions(self.problem.boundary.get(name, ())))}
        return where_nonfinite({name: self._slot((name, 0)) for name in written}, self.lattice.interior, self.xp, dirichlet)

    # ------------------------------------------------------------ checkpoints

    def state(self) -> dict:
        """Every time level of every field by slot name (u, u_next, u_prev), ghost layers included: a step's whole input."""
        return self.arrays()

    def load(self, step: int, arrays: Mapping[str, np.ndarray]) -> None:
        """Continue from `state()` saved at global step `step`: the same bits as the run that saved it. A checkpoint that
        the earlier sweep path wrote (before the one path) names its levels as that path did: u_new for u_next, and a
        leapfrog keeps u and u_prev only (its next level is written before it is read)."""
        arrays = dict(arrays)
        current = self.arrays()
        for name, levels in self.levels.items():
            if f"{name}_new" in arrays and f"{name}_next" not in arrays:
                arrays[f"{name}_next"] = arrays.pop(f"{name}_new")
            if len(levels) == 3 and f"{name}_next" not in arrays and f"{name}_prev" in arrays:
                arrays[f"{name}_next"] = current[f"{name}_next"]
        expected = {name: (arr.shape, arr.dtype) for name, arr in current.items()}
        found = {name: (arr.shape, arr.dtype) for name, arr in arrays.items()}
        if expected != found:
            raise StencilforgeError(f"the saved fields {sorted(found)} do not match {self.problem.name}'s {sorted(expected)}")
        for slot, arr in self.arrays().items():
            arr[...] = self.xp.asarray(arrays[slot])
        self._imaged = frozenset()
        self.step_count = int(step)
        self.t = self.step_count * self.dt
        self._receivers.start()

    @property
    def fields(self) -> dict:
        """Each field's current level, interior only, in the backend's array type."""
        return {name: self._slot((name, 0))[self.lattice.interior] for name in self.levels}

    def field(self, name: str) -> np.ndarray:
        """A host copy of the field's current level (interior)."""
        return np.array(self.backend.to_host(self._named(name)[self.lattice.interior]))

    def set_field(self, name: str, values) -> None:
        """Write the field's current level (interior) from a number or an array of the interior's shape, on the host or
        the device; the next step fills its walls and halos from it."""
        arr = self._named(name)
        shape = self.lattice.shape
        if getattr(values, "ndim", 0) and tuple(values.shape) != shape:
            raise StencilforgeError(f"{name} holds {'x'.join(map(str, shape))} values here, got an array of shape "
                                    f"{'x'.join(map(str, values.shape))}")
        arr[self.lattice.interior] = to_module(values, self.xp) if getattr(values, "ndim", 0) else values
        self._imaged = frozenset()

    def _named(self, name: str):
        if self.decomposed:
            raise StencilforgeError("field and set_field read and write the whole grid in one process; a decomposed run's "
                                    "fields come together on rank 0 with gathered()")
        if name not in self.levels:
            raise StencilforgeError(f"{self.problem.name} has no field {name!r}: it has {', '.join(self.levels)}")
        return self._slot((name, 0))

    def traces(self, since: int = 0) -> Traces | None:
        """What the receivers recorded since the start (or the last `load`), rows `since` on, on the host; None
        without receivers."""
        return self._receivers.traces(self.dt, since=since) if self._receivers else None

    def residual(self, scale: float | None = None) -> float:
        """||residual||_2 / ||residual_scale||_2 over the interior (the RMS without a scale), walls filled first; `scale`:
        the scale's norm where the caller holds it (`steady_scale`)."""
        if self.problem.residual is None:
            raise StencilforgeError(f"{self.problem.name} defines no residual, so it cannot run to a tolerance")
        self._fill_walls()
        residual = self._norm(0)
        if self.problem.residual_scale is None:
            return residual / math.sqrt(math.prod(self.problem.grid.shape))
        return residual / (scale if scale is not None else self._norm(1))

    def steady_scale(self) -> float | None:
        """The residual scale's norm where it is the same at every step (it reads neither t nor a field that a step
        writes or whose walls move), so that a run computes it once; else None."""
        scale = self.problem.residual_scale
        moving = set(self.problem.analysis.written) | self._moving
        if scale is None or any(isinstance(node, Time) for node in walk(scale)) or any(a.field.name in moving for a in accesses(scale)):
            return None
        self._fill_walls()
        return self._norm(1)

    def _fill_walls(self) -> None:
        for name in self._fillers:
            self._fill(name, self._slot((name, 0)), self.t)

    def _norm(self, which: int) -> float:
        """||residual||_2 (0) or ||residual_scale||_2 (1) over the interior: a generated pass into one array, over the
        fields as they lie (on a device, in the sweeps' layout where they have it), its squares summed in float64
        exactly."""
        lat, xp = self.lattice, self.xp
        if self._residual is None:
            pitched = self.backend.device and self._pitch is not None and self._pitch != lat.padded_shape[-1]
            exprs = [e for e in (self.problem.residual, self.problem.residual_scale) if e is not None]
            values = xp.zeros(lat.padded_shape, dtype=lat.dtype)
            self._residual = ([(self._value_pass(e, "residual", self._pitch if pitched else None),
                                {slot_name((a.field.name, a.level)) for a in accesses(e)}) for e in exprs],
                              self.backend.field(values, lat.ghost) if pitched else values)
        passes, values = self._residual
        (slot, run), read = passes[which]
        arrays = {s: arr for s, arr in self.arrays().items() if s in read}
        with np.errstate(over="ignore", invalid="ignore"):  # a blow-up is reported once, by the loop's finite test
            run({**arrays, slot: values}, self.params, self.t)
        return math.sqrt(self._sum_squares(values[lat.interior]))  # squared in float64

    def errors(self) -> dict[str, dict[str, float]]:
        """Each field with an exact solution -> its max-norm and relative L2 errors at the current time, reduced
        where the field lives (the sums correctly rounded, so any process grid gives the same bits)."""
        lat, xp = self.lattice, self.xp
        out = {}
        for name, expr in self.problem.exact.items():
            exact = tabulated(expr, lat, np.float64, self.params, self.t, xp)
            diff = xp.subtract(self._slot((name, 0))[lat.interior], exact, dtype=np.float64)
            l2, ref = math.sqrt(self._sum(diff * diff)), math.sqrt(self._sum(exact * exact))
            out[name] = {"max_abs": self._max(xp.max(xp.abs(diff, out=diff))), "rel_l2": l2 / ref if ref > 0 else l2}
        return out


class PassStepper:
    """A Simulation as the time loop's stepper (`timeloop.Stepper`): one step per call, from its step count."""

    def __init__(self, sim: Simulation, single: str | None = "not asked for", window: int | None = None):
        """`single`: why the loop would take no two-step pass (`timeloop.never_fuses`), or None; `window`: the most
        steps a pass may take (`timeloop.fusion_window`)."""
        problem = sim.problem
        self.sim, self.backend, self.single, self.window = sim, sim.backend, single, window
        self.name, self.first, self.decomposed = problem.name, sim.step_count, sim.decomposed
        self.default_steps = problem.default_steps
        self.has_residual = problem.residual is not None
        self.watched = tuple(problem.analysis.written)
        self.fused_steps = 0  # steps taken several per pass
        self.noted: tuple[int, dict, str] = (self.first, {name: 0 for name in sim.solvers}, "")  # the last `note`: step, cycles, text

    @property
    def per_pass(self) -> int:
        """The graph's steps where one was captured, else the fused kernel's once it is compiled (it may compile in
        the background), else 1."""
        graph = self.sim.graph
        if graph is not None:
            return graph.steps
        fused = self.sim.fused
        return fused.steps if fused is not None and fused.ready() else 1

    @property
    def whole_after_pass(self) -> bool:
        return self.sim.fused is None and self.sim.graph is not None

    def compile(self) -> None:
        """The passes were compiled with the Simulation; the fused kernel, then the graph of several steps, are built
        here where the loop would take them (on a backend that has them)."""
        self.sim.start_timing()  # the last thing before the loop's clock starts
        if self.backend.fuses_steps:
            why = self.single or self.sim.build_fused(self.window)
            fused = self.sim.fused
            log.info("%s: %s", self.name, f"{fused.steps} steps per pass" if fused is not None else f"one step per pass: {why}")
        why = self.single or self.sim.build_graph(self.window)
        if self.sim.graphs:
            log.info("%s: %d steps a CUDA graph (%d graphs)", self.name, self.sim.graph_steps, len(self.sim.graphs))
        elif self.backend.captures:
            log.info("%s: no CUDA graph: %s", self.name, why)

    def warm(self) -> None:
        """The first step's ghost fill and the finite test, once, before the clock starts: both leave the fields as
        they are, and their first calls set up what a timed step should not pay for (the array library's kernels on
        a GPU; a decomposed run's halo transport, whose NCCL communicators are made at the first exchange)."""
        self.sim._fill_before(self.sim.t)
        self.sim.finite()

    def advance(self, n: int, fuse: bool) -> int:
        if fuse:
            graph = self.sim.graph
            if graph is not None:
                graph()
                steps = graph.steps
            else:
                steps = self.sim.step_fused()
            self.fused_steps += steps
            return steps
        self.sim.step(1)
        return 1

    def state(self) -> dict:
        return self.sim.state()

    def time_at(self, n: int) -> float:
        return n * self.sim.dt

    def finite(self) -> bool:
        return self.sim.finite()

    def nonfinite(self) -> dict[str, str]:
        return self.sim.nonfinite()

    def agree(self, flag: bool) -> bool:
        return self.sim.all(flag)

    def residual(self, n: int) -> float:
        return self.sim.residual(self._scale)

    @functools.cached_property
    def _scale(self) -> float | None:
        """The residual scale's norm, once a run, where it is steady (`Simulation.steady_scale`)."""
        return self.sim.steady_scale()

    def missed(self):
        misses = [solver.first_miss for solver in self.sim.solvers.values() if solver.first_miss is not None]
        return min(misses, key=lambda miss: miss.step, default=None)

    def note(self, n: int) -> str:
        """Each solve's cycles per step since the last note, and its misses so far: "p 2.5 cycles/step, 3 missed"."""
        solvers = self.sim.solvers
        step, before, text = self.noted
        if n != step:
            text = ", ".join(f"{name} {(solver.cycles - before[name]) / (n - step):.2g} cycles/step"
                             + (f", {solver.missed} missed" if solver.missed else "") for name, solver in solvers.items())
            self.noted = (n, {name: solver.cycles for name, solver in solvers.items()}, text)
        return text

    def fields(self) -> dict:
        return self.sim.fields

    def report(self, n: int, wall: float) -> dict:
        sim, an = self.sim, self.sim.problem.analysis
        shape = an.grid.shape
        return {
            "shape": list(shape),
            "dtype": an.grid.dtype.name,
            "bytes_per_cell": an.bytes_per_cell(),
            **throughput(math.prod(shape), n - self.first, wall, an.bytes_per_cell(), an.flops_per_cell()),
            "params": dict(sim.params),
            "passes_per_step": sim.passes_per_step,
            **({"solves": {name: solver.summary() for name, solver in sim.solvers.items()}} if sim.solvers else {}),
            "steps_per_pass": sim.fused.steps if sim.fused is not None and sim.fused.ready() else 1,
            **({"fused_steps": self.fused_steps} if self.fused_steps else {}),
            "graph_steps": sim.graph_steps,
            "sweeps": {out: launch.strategy for out, launch in sim.launches.items()},
            **error_summary(sim.errors()),
        }
