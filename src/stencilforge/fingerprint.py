"""A problem's equations as canonical text and its hash: what output files record, so a resume
refuses a checkpoint whose equations were edited since it was written.

The text covers what decides the steps after a checkpoint: the fields (time levels, storage), the
equations and solves in their order, the walls, the sources and dt. Initial values and exact solutions are left
out (a checkpoint replaces the one, the other only measures errors); parameter values, shape and dtype
are checked apart. Each line is `key: text`, so two texts can be compared key by key. An sf.Iterate group
is a line of its count before the lines of its equations.
"""

from __future__ import annotations

import hashlib

from .boundary import Dirichlet, Sides
from .ir.nodes import AXIS_NAMES, Access, Coordinate, Eq, Expr, Iterate, OneSided
from .points import point_cells
from .printers.source import InfixPrinter

SHOWN = 60  # characters of each form an error shows: the difference with CONTEXT characters either side
CONTEXT = 16


class _Text(InfixPrinter):
    """Infix text of an expression with every operation parenthesised and every literal exact (repr)."""

    def __init__(self, ndim: int):
        self.axes = AXIS_NAMES[ndim]

    def literal(self, value: float) -> str:
        return repr(value)

    def constant(self, node) -> str:
        return node.name

    def coordinate(self, node: Coordinate) -> str:
        return self.axes[node.axis] + (f"[{node.shift:+d}]" if node.shift else "")

    def access(self, node: Access) -> str:
        return node.label + (f"[{', '.join(map(str, node.offset))}]" if any(node.offset) else "")

    def call(self, fn: str, args: list[str]) -> str:
        return f"{fn}({', '.join(args)})"

    def select(self, cond: str, a: str, b: str) -> str:
        return f"where({cond}, {a}, {b})"

    def __call__(self, node: Expr) -> str:
        if isinstance(node, OneSided):  # its weights, closures and scale, exactly
            d = node.derivative
            return f"one_sided({self(node.operand)}, {self.axes[node.axis]}, {d.interior!r}, {d.left!r}, {d.right!r}, {d.scale!r})"
        return super().__call__(node)


def _value(value, text: _Text) -> str:
    """An expression, a number, or a Python function (named: its body cannot be compared)."""
    if isinstance(value, Expr):
        return text(value)
    if callable(value):
        return f"<function {getattr(value, '__qualname__', type(value).__name__)}>"
    return repr(float(value))


def _wall(cond, text: _Text) -> str:
    if isinstance(cond, Sides):
        return f"({_wall(cond.low, text)}, {_wall(cond.high, text)})"
    if not isinstance(cond, Dirichlet):
        return type(cond).__name__
    extra = [", time_dependent=True"] if cond.time_dependent else []
    extra += [f", time_factor={_value(cond.time_factor, text)}"] if cond.time_factor is not None else []
    return f"Dirichlet({_value(cond.value, text)}{''.join(extra)})"


def _solve(s, text: _Text) -> str:
    """A solve's line: its operator's a, b and k, its right-hand side and what it stops at (all decide the steps)."""
    k = "1" if s.k is None else text(s.k)
    return (f"solve {s.label}: a={text(s.a)}, b={text(s.b)}, k={k}, rhs={text(s.rhs)}, tol={s.tol!r}, "
            f"max_cycles={s.max_cycles}")


def _spread(source, grid) -> str:
    """How a source spreads over several nodes; nothing for one that adds at one node, as every source did before
    linear injection, which keeps the text it had then (its checkpoints resume)."""
    cells, _ = point_cells(source.at, grid.origin, grid.spacing, grid.shape, source.interpolation, "source",
                           source.sinc_radius)
    if len(cells) == 1:
        return ""
    return ", linear" if source.interpolation == "linear" else f", sinc of radius {source.sinc_radius}"


def canonical(problem) -> str:
    """The problem's fields, equations, walls, sources and dt, one `key: text` line each."""
    text = _Text(problem.grid.ndim)
    lines = [f"field {f.name}: levels={f.levels}, storage={f.storage.name}" for f in problem.analysis.fields]
    for step in problem.equations:
        if isinstance(step, Iterate):
            lines.append(f"iterate {', '.join(eq.label for eq in step.equations)}: {step.count} times")
        lines += [f"equation {eq.label}: {text(eq.expr)}" if isinstance(eq, Eq) else _solve(eq, text)
                  for eq in (step.equations if isinstance(step, Iterate) else (step,))]
    lines += [f"walls of {name}: {', '.join(_wall(c, text) for c in problem.boundary[name])}" for name in sorted(problem.boundary)]
    lines += [f"source {i}: on {s.field.name} at {tuple(float(v) for v in s.at)!r}, {_value(s.signal, text)}"
              + _spread(s, problem.grid) for i, s in enumerate(problem.sources, 1)]
    lines.append(f"dt: {text(problem.dt)}")
    return "\n".join(lines)


def fingerprint(text: str) -> str:
    """The SHA-256 of a canonical text, in hex; empty for no text (a named problem, or an older file)."""
    return hashlib.sha256(text.encode()).hexdigest() if text else ""


def _shorten(a: str, b: str) -> tuple[str, str]:
    """`a` and `b` cut to where they differ, with a little context either side, marked with ...."""
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    lo = max(0, start - CONTEXT)

    def cut(s: str) -> str:
        hi = min(len(s), len(s) - end + CONTEXT, lo + SHOWN)
        return ("..." if lo else "") + s[lo:hi] + ("..." if hi < len(s) else "")

    return cut(a), cut(b)


def difference(stored: str, current: str) -> str:
    """The first difference between two canonical texts, in words: which line, and both its forms, shortened."""
    def lines(text: str) -> dict[str, str]:
        return dict(line.partition(": ")[::2] for line in text.splitlines())

    old, new = lines(stored), lines(current)
    for key in (*new, *old):
        if key not in old:
            return f"{key} {_shorten(new[key], '')[0]!r} is new here"
        if key not in new:
            return f"{key} {_shorten(old[key], '')[0]!r} is gone here"
        if old[key] != new[key]:
            was, now = _shorten(old[key], new[key])
            return f"{key} was {was!r}, here it is {now!r}"
    return "the same lines are in another order"
