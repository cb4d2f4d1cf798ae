"""Stop rules of your own: a run ends at the first check where a comparison of norms of its fields holds.

`until=sf.norm(p.next - p, 1) / sf.norm(p, 1) < 1e-4` is read in the frame of the step it follows, as that step's
equations are: `p` is the level the step started from, `p.next` the one it computed, `p.prev` (three levels) the
one before `p`, t the step's start; a field of one level is its value now. The loop never ends a pass of several
steps at a check, so at a check these levels hold exactly those states. Norms reduce as the residual does
(`Simulation._sum`, `_max`): each cell's value in the grid's dtype, widened to float64, summed exactly and rounded
once, so a rule's value, and the step it stops at, are the same bits on any process grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Mapping

import numpy as np

from .errors import StencilforgeError
from .fingerprint import _Text as CanonicalText
from .ir.analysis import slot_name
from .ir.nodes import Access, Binary, Compare, Coordinate, Expr, Field, Literal, Reduce, Time, Where, norm, total, walk
from .printers.numpy import OPERATORS, coordinates, evaluate, widened

EXAMPLE = "sf.norm(p.next - p, 1) / sf.norm(p, 1) < 1e-4"
ORDS = {"l1": "1", "l2": "2", "max": "inf"}  # sf.norm's ord of each reduction kind


@dataclass(frozen=True)
class StopRule:
    """A checked rule: a comparison of norms, or a Python function of the step's levels; `text` names it in the summary."""

    rule: Compare | Callable[[dict], Any]
    text: str

    @property
    def function(self) -> bool:
        return not isinstance(self.rule, Compare)


class _Text(CanonicalText):
    """The rule as it was written, near enough: sf.norm(...) as norm(...), levels as p.next."""

    def __call__(self, node: Expr) -> str:
        if isinstance(node, Reduce):
            inner = self.bare(node.arg)
            return f"total({inner})" if node.kind == "sum" else f"norm({inner}, {ORDS[node.kind]})"
        return super().__call__(node)

    def bare(self, node: Expr) -> str:
        """Without the parentheses around a whole operation."""
        text = self(node)
        return text[1:-1] if isinstance(node, (Binary, Compare)) else text


def rule_from_text(text: str, fields: Mapping[str, Field]) -> Expr:
    """A stop rule written on the command line (`--until`): a Python expression of the problem's fields by name,
    `norm` and `total` (also as `sf.norm`, `sf.total`), `abs` and numbers, such as EXAMPLE; anything else is a one-line
    error (the comparison itself is checked by `stop_rule`)."""
    names = {"norm": norm, "total": total, "sf": SimpleNamespace(norm=norm, total=total), **fields}
    try:
        return eval(compile(text, "--until", "eval"), {"__builtins__": {"abs": abs}}, names)
    except SyntaxError as exc:
        raise StencilforgeError(f"--until {text!r} is not an expression: {exc.msg}") from None
    except Exception as exc:  # a name that is not a field, a call of something else: the user's text, in one line
        raise StencilforgeError(f"--until {text!r}: {type(exc).__name__}: {exc} (it may use the fields "
                                f"{', '.join(fields)}, norm, total and abs)") from None


def stop_rule(rule, fields: Mapping[str, Field]) -> StopRule:
    """`rule` checked against a problem's fields: a comparison whose sides are numbers, constants and norms
    (sf.norm, sf.total) of fields of the problem read at the cell, or a Python function. Fields are matched by
    name, so a rule may be built from another build of the same problem."""
    if callable(rule) and not isinstance(rule, Expr):
        return StopRule(rule, f"<function {getattr(rule, '__qualname__', type(rule).__name__)}>")
    if not isinstance(rule, Compare):
        raise StencilforgeError(f"until takes a comparison of norms, such as {EXAMPLE}, or a function of the fields; got {rule!r}")
    reductions = [n for side in (rule.left, rule.right) for n in _outside(side)]
    if not reductions:
        raise StencilforgeError(f"until compares no norm: use sf.norm or sf.total of the fields, as in {EXAMPLE}")
    for node in (n for r in reductions for n in walk(r.arg)):
        if isinstance(node, Reduce):
            raise StencilforgeError("until: a norm inside a norm; a norm's argument is a value per cell, such as p.next - p")
        if isinstance(node, Access):
            field = fields.get(node.field.name)
            if field is None:
                raise StencilforgeError(f"until reads field {node.field.name}, which is not in the problem "
                                        f"(its fields: {', '.join(fields)})")
            if field.levels < {-1: 3, 0: 1, 1: 2}[node.level]:
                raise StencilforgeError(f"until reads {node.label}, but the problem's {field.name} has {field.levels} time level(s)")
            if any(node.offset):
                raise StencilforgeError(f"until reads {node.label} at a neighbouring cell {node.offset}: a rule reads fields at "
                                        "the cell (the problem's residual= may read neighbours)")
    text = _Text(next(iter(fields.values())).grid.ndim)
    return StopRule(rule, f"{text.bare(rule.left)} {rule.op} {text.bare(rule.right)}")


def _outside(side: Expr) -> list[Reduce]:
    """The reductions of one side of a rule, refusing what varies per cell outside them."""
    found = []
    stack = [side]
    while stack:
        node = stack.pop()
        if isinstance(node, Reduce):
            found.append(node)
            continue
        if isinstance(node, (Access, Coordinate, Time)):
            what = node.label if isinstance(node, Access) else "a coordinate" if isinstance(node, Coordinate) else "t"
            raise StencilforgeError(f"until reads {what} outside a norm: compare norms, such as {EXAMPLE}")
        if isinstance(node, (Compare, Where)):
            raise StencilforgeError(f"until takes one comparison of norms, such as {EXAMPLE}")
        stack.extend(node.children())
    return found


class RuleCheck:
    """A rule bound to a Simulation (one process's, or this rank's block): `text` and, at a check, (whether it
    holds, its left side's value, its right side's) for a comparison, (whether it holds, None, None) for a function."""

    def __init__(self, rule: StopRule, sim):
        self.rule, self.sim, self.text = rule, sim, rule.text
        self.written = set(sim.problem.analysis.written)
        self.coordinate = coordinates(sim.lattice, sim.xp)

    def levels(self) -> dict[tuple[str, int], Any]:
        """Each (field, level) of the step just taken, in the step's frame: a written field's levels as they were
        before the step rotated them, the others as they are."""
        out = {}
        for name, levels in self.sim.levels.items():
            before = levels[-1:] + levels[:-1] if name in self.written and len(levels) > 1 else levels
            kept = {1: (0,), 2: (0, 1), 3: (-1, 0, 1)}[len(levels)]
            out.update({(name, level): arr for level, arr in zip(kept, before)})
        return out

    def __call__(self) -> tuple[bool, float | None, float | None]:
        sim, rule = self.sim, self.rule.rule
        interior = sim.lattice.interior
        levels = self.levels()
        if not isinstance(rule, Compare):
            met = rule({slot_name(slot): arr[interior] for slot, arr in levels.items()})
            if not isinstance(met, (bool, np.bool_)):
                raise StencilforgeError(f"until: {self.text} returned {type(met).__name__} {met!r}, not True or False")
            return bool(met), None, None
        left, right = (self._side(side, levels) for side in (rule.left, rule.right))
        return bool(OPERATORS[rule.op](left, right)), left, right

    def _side(self, side: Expr, levels: dict) -> float:
        """One side of the comparison in float64, its reductions replaced by their values."""
        def substitute(node: Expr) -> Expr:
            if isinstance(node, Reduce):
                return Literal(self._reduce(node, levels))
            kids = node.children()
            return node.rebuild([substitute(k) for k in kids]) if kids else node

        return float(evaluate(substitute(side), dtype=np.float64, coordinate=self.coordinate, params=self.sim.params))

    def _reduce(self, node: Reduce, levels: dict) -> float:
        sim = self.sim
        lat, xp = sim.lattice, sim.xp

        def access(a: Access):
            return widened(levels[(a.field.name, a.level)][lat.interior], lat.dtype)

        t = (sim.step_count - 1) * sim.dt  # the step's start, as its equations see it
        value = evaluate(node.arg, dtype=lat.dtype, xp=xp, coordinate=self.coordinate, access=access, params=sim.params, t=t)
        value = xp.broadcast_to(xp.asarray(value, dtype=np.float64), lat.shape)
        if node.kind == "max":
            return sim._max(xp.max(xp.abs(value)))
        if node.kind == "l2":
            return math.sqrt(sim._sum_squares(value))
        return sim._sum(xp.abs(value) if node.kind == "l1" else value)
