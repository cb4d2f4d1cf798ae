"""Equations whose right-hand side is a sum of stencils of fields, lowered to the plan's `Sweep`.

A `Sweep` is what the hand-scheduled kernels (the CUDA strategies, the numba
row kernels, two steps per pass) consume. An equation lowers when its
expression is linear in the fields' accesses, with coefficients made of
numbers and constants, each term optionally multiplied by one field read at
the cell. Coefficients are folded the way `Stencil` arithmetic folds them
(exact weights times floats, merged per offset in order), so a problem
written as expressions gets the sweep its hand-written plan had, bit for bit.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Mapping

from ..plan import Sweep, Term
from ..stencil import Stencil
from .analysis import Pass, slot_name
from .nodes import Access, Binary, Constant, Eq, Expr, Literal, Negate

Form = dict  # (field slot, factor slot or None) -> {offset: coefficient}


class _NotLinear(Exception):
    pass


def _scale(form: Form, s) -> Form:
    return {k: {o: c * s for o, c in w.items()} for k, w in form.items()}


def _merge(a: Form, b: Form) -> Form:
    out = {k: dict(w) for k, w in a.items()}
    for k, w in b.items():
        target = out.setdefault(k, {})
        for o, c in w.items():
            target[o] = target.get(o, 0) + c
    return out


def _pointwise(form: Form) -> str | None:
    """The slot of a form that is one field read at the cell with weight 1, else None."""
    if len(form) != 1:
        return None
    (slot, factor), weights = next(iter(form.items()))
    if factor is not None or len(weights) != 1:
        return None
    (offset, c), = weights.items()
    return slot if not any(offset) and c == 1 else None


def _linear(node: Expr, values: Mapping[str, float]):
    """A number, or a Form; raises _NotLinear for anything else."""
    if isinstance(node, Literal):
        return node.value
    if isinstance(node, Constant):
        return values[node.name]
    if isinstance(node, Access):
        return {(slot_name((node.field.name, node.level)), None): {node.offset: Fraction(1)}}
    if isinstance(node, Negate):
        value = _linear(node.arg, values)
        return -value if not isinstance(value, dict) else _scale(value, -1)
    if not isinstance(node, Binary):
        raise _NotLinear
    a, b = _linear(node.left, values), _linear(node.right, values)
    scalar_a, scalar_b = not isinstance(a, dict), not isinstance(b, dict)
    if node.op in "+-":
        if scalar_a and scalar_b:
            return a + b if node.op == "+" else a - b
        if scalar_a or scalar_b:
            raise _NotLinear  # a constant term: not a stencil
        return _merge(a, b if node.op == "+" else _scale(b, -1))
    if node.op == "*":
        if scalar_a and scalar_b:
            return a * b
        if scalar_a or scalar_b:
            return _scale(b, a) if scalar_a else _scale(a, b)
        for form, other in ((a, b), (b, a)):
            factor = _pointwise(other)
            if factor is not None and all(f is None for _, f in form):
                return {(slot, factor): w for (slot, _), w in form.items()}
        raise _NotLinear
    if node.op == "/" and scalar_a and scalar_b:
        return a / b
    raise _NotLinear


def sweep_terms(expr: Expr, values: Mapping[str, float]) -> tuple[Term, ...] | None:
    """The expression as plan terms (in order of first appearance), or None if it is not linear."""
    try:
        form = _linear(expr, values)
    except _NotLinear:
        return None
    if not isinstance(form, dict):
        return None
    terms = []
    for (slot, factor), weights in form.items():
        weights = {o: c for o, c in weights.items() if c != 0}
        if weights:
            terms.append(Term(slot, Stencil.from_dict(weights), factor))
    return tuple(terms) or None


def sweep_of(eq: Eq, values: Mapping[str, float], out: str | None = None) -> Sweep | None:
    """The equation as a Sweep writing `out` (default: its target's slot), or None."""
    terms = sweep_terms(eq.expr, values)
    if terms is None:
        return None
    return Sweep(out or slot_name((eq.target.field.name, eq.target.level)), terms)


def linear_passes(stages, values: Mapping[str, float]) -> dict[int, Sweep]:
    """Stage index -> the linear form of each pass of one equation that is a sum of stencils of fields, each
    optionally times a field at the cell: what the hand-scheduled sweep kernels can run (`Simulation.sweeps`,
    `stencilforge tune FILE.py`)."""
    linear = {i: sweep_of(p.equations[0], values) for i, p in enumerate(stages) if isinstance(p, Pass) and len(p.equations) == 1}
    return {i: sweep for i, sweep in linear.items() if sweep is not None}
