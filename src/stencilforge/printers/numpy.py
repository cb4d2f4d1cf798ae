"""The oracle: evaluates an expression with whole-array operations of numpy (or CuPy: same code).

Every operation is done in the grid's dtype, in the order the tree gives;
integer powers are products, as in the other printers.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Callable, Mapping

import numpy as np

from ..boundary import Dirichlet
from ..errors import StencilforgeError
from ..ir.analysis import reads_time, slot_name
from ..ir.nodes import AXIS_NAMES, Access, Binary, Call, Compare, Constant, Coordinate, Expr, Literal, Negate, Power, Time, Where, walk

UNARY = {"sqrt": "sqrt", "exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tanh": "tanh", "abs": "abs"}
BINARY = {"min": "minimum", "max": "maximum"}
OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
             "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def evaluate(
    expr: Expr,
    *,
    dtype,
    xp=np,
    coordinate: Callable[[int, int], object],
    access: Callable[[Access], object] | None = None,
    params: Mapping[str, float] | None = None,
    t: float = 0.0,
):
    """The expression's value: `coordinate(axis, shift)` and `access(node)` give the leaves' arrays."""
    T = np.dtype(dtype).type
    params = params or {}

    def ev(node):
        if isinstance(node, Literal):
            return T(node.value)
        if isinstance(node, Constant):
            return T(params.get(node.name, node.value))
        if isinstance(node, Time):
            return T(t)
        if isinstance(node, Coordinate):
            return coordinate(node.axis, node.shift)
        if isinstance(node, Access):
            if access is None:
                raise StencilforgeError(f"{node.label} cannot appear here: only coordinates, t and constants can")
            return access(node)
        if isinstance(node, (Binary, Compare)):
            return OPERATORS[node.op](ev(node.left), ev(node.right))
        if isinstance(node, Negate):
            return -ev(node.arg)
        if isinstance(node, Power):
            return T(1) if node.n == 0 else _power(ev(node.base), node.n, T)
        if isinstance(node, Call):
            args = [ev(a) for a in node.args]
            if node.fn in UNARY:
                return getattr(xp, UNARY[node.fn])(args[0])
            return getattr(xp, BINARY[node.fn])(*args)
        if isinstance(node, Where):
            return xp.where(ev(node.cond), ev(node.a), ev(node.b))
        raise StencilforgeError(f"cannot evaluate {type(node).__name__}")

    with np.errstate(all="ignore"):
        value = ev(expr)
    return value


def _power(base, n: int, T):
    """base**n for n != 0, by repeated multiplication."""
    value = base
    for _ in range(abs(n) - 1):
        value = value * base
    return T(1) / value if n < 0 else value


def coordinates(lattice, xp=np, ghosts: bool = False):
    """coordinate(axis, shift) for `evaluate`: the dtype's coordinates of the interior (or the whole
    ghosted lattice), formed in float64 as lower + (i + shift) * spacing, shaped to broadcast."""
    g = lattice.ghost if ghosts else 0
    cache = {}

    def coordinate(axis: int, shift: int):
        if (axis, shift) not in cache:
            idx = np.arange(-g, lattice.shape[axis] + g, dtype=np.float64) + (lattice.first_index(axis) + shift)
            values = (lattice.lower[axis] + idx * lattice.spacing[axis]).astype(lattice.dtype)
            shape = [1] * lattice.ndim
            shape[axis] = values.size
            cache[axis, shift] = xp.asarray(values.reshape(shape))
        return cache[axis, shift]

    return coordinate


def float64_coordinates(lattice, xp=np, ghosts: bool = False):
    """coordinate(axis, shift) in float64, for values evaluated in float64 and rounded once."""
    g = lattice.ghost if ghosts else 0
    cache = {}

    def coordinate(axis: int, shift: int):
        if (axis, shift) not in cache:
            idx = np.arange(-g, lattice.shape[axis] + g, dtype=np.float64) + (lattice.first_index(axis) + shift)
            shape = [1] * lattice.ndim
            shape[axis] = idx.size
            cache[axis, shift] = xp.asarray((lattice.lower[axis] + idx * lattice.spacing[axis]).reshape(shape))
        return cache[axis, shift]

    return coordinate


def widened(values, dtype):
    """A field's values in the arithmetic's dtype: float16 storage widens (exactly) to float32."""
    return values if values.dtype == dtype else values.astype(dtype)


def pass_kernel(p, lattice, xp=np):
    """run(arrays, params, t) computing the pass's equations over the interior with whole-array operations.

    Reads of a field stored in float16 widen to the grid's dtype; the store rounds to the nearest float16."""
    g, shape = lattice.ghost, lattice.shape
    coordinate = coordinates(lattice, xp)

    def run(arrays, params, t):
        def access(node):
            arr = arrays[slot_name((node.field.name, node.level))]
            return widened(arr[tuple(slice(g + o, g + o + n) for o, n in zip(node.offset, shape))], lattice.dtype)

        for eq in p.equations:
            value = evaluate(eq.expr, dtype=lattice.dtype, xp=xp, coordinate=coordinate, access=access, params=params, t=t)
            arrays[slot_name((eq.target.field.name, eq.target.level))][lattice.interior] = value

    return run


def _reads_space(expr: Expr) -> bool:
    return any(isinstance(n, Coordinate) for n in walk(expr))


def wall_values(expr: Expr, params: Mapping[str, float], xp=np):
    """A boundary.Dirichlet evaluating `expr` in float64 at the ghost points' coordinates.

    An expression of the form f(t) * g(x) (either order) is evaluated once, at t = 0, and
    scaled by f(t) / f(0) each step, so a time-dependent wall costs one multiply per step.
    """

    def function(e, host: bool = False):
        def value(t, **named):
            xs = [named[name] for name in AXIS_NAMES[len(named)]] if named else []  # by name, as Dirichlet calls: x is the last axis
            # Dirichlet hands host coordinates to a separable wall's one evaluation, device ones otherwise
            module = np if host or (xs and isinstance(xs[0], np.ndarray)) else xp
            return evaluate(e, dtype=np.float64, xp=module, coordinate=lambda a, s: xs[a], params=params, t=t)

        return value

    if not reads_time(expr):
        return Dirichlet(function(expr))
    if isinstance(expr, Binary) and expr.op == "*":
        for f, g in ((expr.left, expr.right), (expr.right, expr.left)):
            if not _reads_space(f) and not reads_time(g):
                factor = function(f, host=True)
                start = float(factor(0.0))
                if start != 0.0 and math.isfinite(start):
                    return Dirichlet(function(expr), time_factor=functools.partial(_relative, factor, start))
    return Dirichlet(function(expr), time_dependent=True)


def _relative(factor: Callable, start: float, t: float) -> float:
    """f(t) / f(0) for a wall f(t) * g(x) evaluated once at t = 0 (exactly f(t) where f(0) is 1)."""
    return float(factor(t)) / start


def source_signal(signal, params: Mapping[str, float]) -> Callable[[float], float]:
    """A source's signal as a function of t: a Python callable as given, an expression evaluated in float64."""
    if callable(signal) and not isinstance(signal, Expr):
        return signal
    return lambda t: float(evaluate(signal, dtype=np.float64, coordinate=lambda a, s: 0.0, params=params, t=t))
