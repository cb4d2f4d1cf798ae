"""What the equations of one step need: validation, passes over memory, reach, traffic.

Equations run in the order given, as if one cell at a time. Equations that
read only what earlier equations of the same pass wrote at the same cell share
one kernel (Gray-Scott's u and v: one pass); an equation that reads a value
computed earlier in the step at a neighbouring cell starts a new pass, after
that value's ghost layers are filled. A solve (sf.Solve) runs between passes:
it ends the pass before it, reads what the step computed so far (at
neighbouring cells too), and equations after it may read the solved field at
neighbouring cells. The equations of an sf.Iterate group are passes of their
own (none spans the group's edges), run `count` times in a row (`Loop`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..errors import StencilforgeError
from .nodes import (
    Access,
    Binary,
    Call,
    Compare,
    Constant,
    Coordinate,
    Eq,
    Field,
    Grid,
    Iterate,
    Negate,
    OneSided,
    Power,
    Solve,
    Time,
    Where,
    walk,
)

Slot = tuple[str, int]  # (field name, time level)


def slot_name(slot: Slot) -> str:
    name, level = slot
    return name + {-1: "_prev", 0: "", 1: "_next"}[level]


@dataclass(frozen=True)
class Pass:
    """Equations computed in one sweep over the interior."""

    equations: tuple[Eq, ...]
    reads: tuple[Slot, ...]  # arrays read, in first-use order (the kernel's argument order)
    writes: tuple[Slot, ...]
    halo: tuple[Slot, ...]  # arrays read at neighbouring cells: their ghosts must be current
    reach: int  # largest |offset| of any access

    @property
    def box(self) -> bool:
        """Whether any access moves along two axes at once (corners of the ghost layers are read)."""
        return any(sum(1 for o in a.offset if o) > 1 for eq in self.equations for a in accesses(eq.expr))


@dataclass(frozen=True)
class SolveStage:
    """A solve between passes: its right-hand side's reads (`halo`: those at neighbouring cells, whose ghosts
    must be current) and the one slot it writes."""

    solve: Solve
    reads: tuple[Slot, ...]
    writes: tuple[Slot, ...]
    halo: tuple[Slot, ...]


@dataclass(frozen=True)
class OperatorStage:
    """One-sided derivatives (`nodes.OneSided`) of one field along one axis, each an equation of its own, computed
    between passes in one sweep of the backends' axis-operator kernels. They read no ghost cell (`halo` is empty);
    split over ranks, a block's operand is extended along the axis by its neighbours' values."""

    equations: tuple[Eq, ...]
    derivatives: tuple[OneSided, ...]  # each equation's right-hand side
    reads: tuple[Slot, ...]
    writes: tuple[Slot, ...]
    halo: tuple[Slot, ...] = ()

    @property
    def operand(self) -> Access:
        return self.derivatives[0].operand

    @property
    def axis(self) -> int:
        return self.derivatives[0].axis


Stage = Pass | SolveStage | OperatorStage


@dataclass(frozen=True)
class Loop:
    """Stages [start, stop) of a step, run `count` times in a row (an sf.Iterate); between two runs the levels of
    `rotated` (the two-level fields the group writes) swap, so the new iterate becomes the current level."""

    count: int
    start: int
    stop: int
    rotated: tuple[str, ...]


@dataclass(frozen=True)
class Analysis:
    grid: Grid
    fields: tuple[Field, ...]
    constants: tuple[Constant, ...]
    passes: tuple[Pass, ...]  # the generated kernels' passes
    reach: dict[str, tuple[int, ...]]  # per field, per axis
    stages: tuple[Stage, ...]  # what a step runs, in order: the passes and the solves between them
    loops: tuple[Loop, ...] = ()  # the stages run several times in a row (sf.Iterate)

    @property
    def solves(self) -> tuple[SolveStage, ...]:
        return tuple(s for s in self.stages if isinstance(s, SolveStage))

    @property
    def operators(self) -> tuple[OperatorStage, ...]:
        return tuple(s for s in self.stages if isinstance(s, OperatorStage))

    @property
    def ghost(self) -> int:
        return max([1] + [r for reach in self.reach.values() for r in reach])

    @property
    def written(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s[0] for p in self.stages for s in p.writes))

    def bytes_per_cell(self) -> int:
        """Compulsory traffic of a step's passes and one-sided derivatives: each array read from outside the step
        once, each written once, in the dtype its field is stored in (a solve's cycles are not counted)."""
        stages = self.passes + self.operators
        written = {s for p in stages for s in p.writes}
        read = {s for p in stages for s in p.reads} - written
        storage = {f.name: f.storage.itemsize for f in self.fields}
        return sum(storage[name] for name, _ in read | written)

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)

    @property
    def half(self) -> tuple[str, ...]:
        """The fields stored in float16."""
        return tuple(f.name for f in self.fields if f.half)

    def flops_per_cell(self) -> int:
        """Per step: an iterated stage's flops count once per iteration; a one-sided derivative's a multiply and an add
        per weight of an interior row, and its scale."""
        repeats = {i: loop.count for loop in self.loops for i in range(loop.start, loop.stop)}
        total = 0
        for i, s in enumerate(self.stages):
            if isinstance(s, Pass):
                total += repeats.get(i, 1) * sum(flops(eq.expr) for eq in s.equations)
            elif isinstance(s, OperatorStage):
                total += repeats.get(i, 1) * sum(2 * len(d.derivative.interior) + 1 for d in s.derivatives)
        return total


def accesses(expr) -> list[Access]:
    return [n for n in walk(expr) if isinstance(n, Access)]


def reads_time(expr) -> bool:
    return any(isinstance(n, Time) for n in walk(expr))


def flops(expr) -> int:
    count = 0
    for n in walk(expr):
        if isinstance(n, (Binary, Negate, Call, Compare, Where)):
            count += 1
        elif isinstance(n, Power):
            count += max(abs(n.n) - 1, 0) + (n.n < 0)
    return count


def constants_of(exprs: Sequence) -> tuple[Constant, ...]:
    """Constants by name, refusing two different values under one name."""
    found: dict[str, Constant] = {}
    for expr in exprs:
        for n in walk(expr):
            if isinstance(n, Constant):
                old = found.setdefault(n.name, n)
                if old.value != n.value:
                    raise StencilforgeError(f"constant {n.name} is declared twice, with values {old.value} and {n.value}")
    return tuple(found[k] for k in sorted(found))


def analyse(steps: Sequence[Eq | Solve | Iterate]) -> Analysis:
    """Validate one step's equations (and solves, and iterated groups) and split them into passes."""
    if not steps:
        raise StencilforgeError("a problem needs at least one equation")
    for eq in steps:
        if not isinstance(eq, (Eq, Solve, Iterate)):
            raise StencilforgeError(f"expected sf.Eq(target, expression), sf.Solve(target, rhs) or sf.Iterate(n, [equations]), "
                                    f"got {eq!r}")
    equations = [e for eq in steps for e in (eq.equations if isinstance(eq, Iterate) else (eq,))]
    grid = equations[0].target.field.grid
    fields = _fields_of(equations, grid)
    _check_iterates(steps)
    targets = _targets_of(equations, fields)
    _check_in_place_reads(equations, {name for name, eq in targets.items() if eq.target.level == 0 and isinstance(eq, Eq)})
    _check_solves(equations, grid, set(targets))
    _check_one_sided(equations)
    stages, loops = _stages(steps)
    reach = _reach(equations, fields, grid)
    consts = constants_of([e for eq in equations for e in expressions(eq)])
    passes = tuple(s for s in stages if isinstance(s, Pass))
    return Analysis(grid, tuple(fields.values()), consts, passes, reach, stages, loops)


def expressions(eq: Eq | Solve | Iterate) -> tuple:
    """The expressions an equation, a solve or an iterated group evaluates."""
    return eq.expressions if isinstance(eq, (Solve, Iterate)) else (eq.expr,)


def _check_iterates(steps: Sequence[Eq | Solve | Iterate]) -> None:
    """What a group can iterate: fields of one or two levels that only the group writes. After it, a two-level field
    it writes is read as its last iterate (`p.next`): its current level holds an earlier one."""
    inner = [eq for g in steps if isinstance(g, Iterate) for eq in g.equations]
    for eq in inner:
        if eq.target.field.levels == 3:
            raise StencilforgeError(f"equation for {eq.label} in sf.Iterate: {eq.target.field.name} keeps three time levels; "
                                    "an iterated field keeps two (levels=2) or one")
    inside = {eq.target.field.name for eq in inner}
    for step in steps:
        if not isinstance(step, Iterate) and step.target.field.name in inside:
            raise StencilforgeError(f"field {step.target.field.name} is written inside sf.Iterate and outside it")
    iterated: set[str] = set()
    for step in steps:
        for one in step.equations if isinstance(step, Iterate) else (step,):
            for a in (a for e in expressions(one) for a in accesses(e)):
                if a.level == 0 and a.field.name in iterated:
                    name, kind = a.field.name, "solve" if isinstance(one, Solve) else "equation"
                    raise StencilforgeError(f"{kind} for {one.label} reads {name} after sf.Iterate computed it: read {name}.next, "
                                            f"its last iterate ({name} holds an earlier one)")
        if isinstance(step, Iterate):
            iterated.update(eq.target.field.name for eq in step.equations if eq.target.field.levels == 2)


def _stages(steps: Sequence[Eq | Solve | Iterate]) -> tuple[tuple[Stage, ...], tuple[Loop, ...]]:
    """The step's stages, and its loops: each group's equations split into passes of their own."""
    stages: list[Stage] = []
    loops: list[Loop] = []
    written: set[Slot] = set()
    plain: list[Eq | Solve] = []
    for step in steps:
        if not isinstance(step, Iterate):
            plain.append(step)
            continue
        stages += _split_passes(plain, written)
        plain = []
        start = len(stages)
        stages += _split_passes(step.equations, written)
        rotated = tuple(dict.fromkeys(eq.target.field.name for eq in step.equations if eq.target.field.levels == 2))
        loops.append(Loop(step.count, start, len(stages), rotated))
    stages += _split_passes(plain, written)
    return tuple(stages), tuple(loops)


def _check_solves(equations: Sequence[Eq | Solve], grid: Grid, written: set[str]) -> None:
    """What multigrid can take: a 2D or 3D grid, a field stored in the grid's dtype, scalar a and b, and k fixed for the run."""
    for s in equations:
        if not isinstance(s, Solve):
            continue
        what = f"solve for {s.label}"
        if grid.ndim not in (2, 3) or min(grid.shape) < 3:
            raise StencilforgeError(f"{what}: multigrid needs a 2D or 3D grid of at least 3 points per axis, got {grid.shape}")
        if s.target.field.half:
            raise StencilforgeError(f"{what}: a solved field is stored in the grid's dtype, not float16")
        for name, e in (("a", s.a), ("b", s.b)):
            if any(isinstance(n, (Access, Coordinate, Time)) for n in walk(e)):
                raise StencilforgeError(f"{what}: {name} must be a number or an expression of constants")
        if s.k is not None:
            for n in walk(s.k):
                if isinstance(n, Time) or (isinstance(n, Access) and (n.field.name in written or any(n.offset) or n.level)):
                    raise StencilforgeError(f"{what}: k is fixed for the run: use coordinates, constants or a field no "
                                            "equation writes, read at the cell")


def _check_one_sided(equations: Sequence[Eq | Solve]) -> None:
    """A one-sided derivative is the whole right-hand side of an equation (it runs as a kernel of its own)."""
    for eq in equations:
        for e in expressions(eq):
            for node in walk(e):
                if isinstance(node, OneSided) and not (isinstance(eq, Eq) and node is eq.expr):
                    raise StencilforgeError(f"{'equation' if isinstance(eq, Eq) else 'solve'} for {eq.label}: a one-sided "
                                            "derivative is an equation of its own: sf.Eq(ux, sf.d(u, 'x', closure='one-sided'))")


def _fields_of(equations: Sequence[Eq | Solve], grid: Grid) -> dict[str, Field]:
    """Every field the equations write or read, by name: one grid, one field per name."""
    fields: dict[str, Field] = {}
    for eq in equations:
        for a in [eq.target] + [a for e in expressions(eq) for a in accesses(e)]:
            f = a.field
            if f.grid is not grid:
                raise StencilforgeError(f"equation for {eq.label}: field {f.name} lives on a different grid")
            if fields.setdefault(f.name, f) is not f:
                raise StencilforgeError(f"equation for {eq.label}: two different fields are named {f.name}")
    return fields


def _targets_of(equations: Sequence[Eq | Solve], fields: dict[str, Field]) -> dict[str, Eq | Solve]:
    """The equation (or solve) computing each field: one per field, and one for every field with time levels."""
    targets: dict[str, Eq | Solve] = {}
    for eq in equations:
        f, level = eq.target.field, eq.target.level
        if f.levels > 1 and level != 1:
            raise StencilforgeError(f"equation for {eq.label}: field {f.name} has time levels, so write {f.name}.next")
        if eq.target.field.name in targets:
            raise StencilforgeError(f"field {f.name} is written by two equations")
        targets[f.name] = eq
    for f in fields.values():
        if f.levels > 1 and f.name not in targets:
            raise StencilforgeError(f"field {f.name} has {f.levels} time levels but no equation computes {f.name}.next")
    return targets


def _check_in_place_reads(equations: Sequence[Eq | Solve], in_place: set[str]) -> None:
    """A field an equation overwrites in place is read only at the cell being updated by equations (a solve's
    right-hand side is evaluated between passes; a field a solve writes in place may be read anywhere)."""
    for eq in equations:
        if not isinstance(eq, Eq):
            continue
        for a in accesses(eq.expr):
            if a.field.name in in_place and any(a.offset):
                raise StencilforgeError(
                    f"equation for {eq.label} reads {a.label} at a neighbouring cell, but {a.label} is overwritten "
                    f"in the same step: give {a.field.name} levels=2 and write {a.field.name}.next"
                )


def _split_passes(equations: Sequence[Eq | Solve], written_so_far: set[Slot]) -> tuple[Stage, ...]:
    """A new pass starts where an equation reads a neighbour of a value the current pass writes, and after a solve.
    `written_so_far`: the slots the step's earlier equations compute, to which these equations' are added."""
    passes: list[Stage] = []
    current: list[Eq] = []
    for eq in equations:
        reads = [a for e in expressions(eq) for a in accesses(e)]
        for a in reads:
            if a.level == 1 and (a.field.name, 1) not in written_so_far:
                kind = "equation" if isinstance(eq, Eq) else "solve"
                raise StencilforgeError(f"{kind} for {eq.label} reads {a.label} before an equation of the step computes it")
        if isinstance(eq, Solve):
            if current:
                passes.append(_make_pass(current))
                current = []
            passes.append(_make_solve(eq))
            written_so_far.add((eq.target.field.name, eq.target.level))
            continue
        if isinstance(eq.expr, OneSided):
            if current:
                passes.append(_make_pass(current))
                current = []
            last = passes[-1] if passes else None
            if isinstance(last, OperatorStage) and _same_operand(last.derivatives[0], eq.expr):
                passes[-1] = _make_operator(last.equations + (eq,))
            else:
                passes.append(_make_operator((eq,)))
            written_so_far.add((eq.target.field.name, eq.target.level))
            continue
        pass_writes = {(e.target.field.name, e.target.level) for e in current}
        if any((a.field.name, a.level) in pass_writes and any(a.offset) for a in reads):
            passes.append(_make_pass(current))
            current = []
        current.append(eq)
        written_so_far.add((eq.target.field.name, eq.target.level))
    if current:
        passes.append(_make_pass(current))
    return tuple(passes)


def _reach(equations: Sequence[Eq | Solve], fields: dict[str, Field], grid: Grid) -> dict[str, tuple[int, ...]]:
    """How far each field is read along each axis; no farther than the grid is long."""
    reach = {name: [0] * grid.ndim for name in fields}
    for eq in equations:
        for a in [a for e in expressions(eq) for a in accesses(e)]:
            for axis, o in enumerate(a.offset):
                reach[a.field.name][axis] = max(reach[a.field.name][axis], abs(o))
    for name, r in reach.items():
        for axis, (w, n) in enumerate(zip(r, grid.shape)):
            if w > n:
                raise StencilforgeError(
                    f"field {name} is read {w} cells away along {grid.axis_names[axis]}, "
                    f"but the grid has only {n} points on that axis"
                )
    return {k: tuple(v) for k, v in reach.items()}


def pass_of(eq: Eq) -> Pass:
    """The pass of one equation on its own, outside a step's checks: what a solve computes its right-hand side with
    (its reads are the solve's, checked with the step)."""
    return _make_pass([eq])


def _make_pass(equations: list[Eq]) -> Pass:
    reads: dict[tuple[str, int], None] = {}
    halo: dict[tuple[str, int], None] = {}
    writes: dict[tuple[str, int], None] = {}
    reach = 0
    for eq in equations:
        for a in accesses(eq.expr):
            slot = (a.field.name, a.level)
            reads.setdefault(slot, None)
            if any(a.offset):
                halo.setdefault(slot, None)
                reach = max(reach, max(abs(o) for o in a.offset))
        writes.setdefault((eq.target.field.name, eq.target.level), None)
    return Pass(tuple(equations), tuple(reads), tuple(writes), tuple(halo), reach)


def _same_operand(a: OneSided, b: OneSided) -> bool:
    return (a.operand.field.name, a.operand.level, a.axis) == (b.operand.field.name, b.operand.level, b.axis)


def _make_operator(equations: tuple[Eq, ...]) -> OperatorStage:
    derivatives = tuple(eq.expr for eq in equations if isinstance(eq.expr, OneSided))
    operand = derivatives[0].operand
    writes = tuple(dict.fromkeys((eq.target.field.name, eq.target.level) for eq in equations))
    return OperatorStage(equations, derivatives, ((operand.field.name, operand.level),), writes)


def _make_solve(s: Solve) -> SolveStage:
    reads: dict[Slot, None] = {}
    halo: dict[Slot, None] = {}
    for a in accesses(s.rhs):
        reads.setdefault((a.field.name, a.level), None)
        if any(a.offset):
            halo.setdefault((a.field.name, a.level), None)
    return SolveStage(s, tuple(reads), ((s.target.field.name, s.target.level),), tuple(halo))
