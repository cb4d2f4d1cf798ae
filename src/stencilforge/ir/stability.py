"""A von Neumann estimate of an explicit step's stability, for a warning before a run.

Each equation u.next = F(u, ...) is linearised about zero: terms of no evolving field
and terms of degree two or more in them drop out, and what is left of u's current level
is a stencil whose coefficients are numbers and constants. A Fourier mode e^(i theta.x)
is multiplied each step by G(theta) = sum_o c_o e^(i theta.o); where |G| > 1 for some
theta the step amplifies that mode: certain on a periodic grid (where the run is refused),
nearly so with walls (where it is warned of).
Equations whose linear part has coefficients that vary in space or time, that reads a
coefficient field or u.prev, or that applies a function to an evolving field, are not
estimated: no warning is better than a wrong one.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from .analysis import accesses
from .nodes import Access, Binary, Call, Compare, Constant, Eq, Expr, Literal, Negate, Power, Where, walk

Form = dict  # (field name, level) -> {offset: coefficient}: the part linear in evolving fields
SAMPLES = {1: 257, 2: 65, 3: 33}  # wavenumbers per axis in [-pi, pi]


class _Unknown(Exception):
    """The equation's linear part is not a constant-coefficient stencil."""


def _scale(form: Form, s: float) -> Form:
    return {k: {o: c * s for o, c in w.items()} for k, w in form.items()}


def _merge(a: Form, b: Form, sign: float = 1.0) -> Form:
    out = {k: dict(w) for k, w in a.items()}
    for k, w in b.items():
        target = out.setdefault(k, {})
        for o, c in w.items():
            target[o] = target.get(o, 0.0) + sign * c
    return out


def _compare(op: str, a: float, b: float) -> bool:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


def _evolves(node: Expr, evolving: set[str]) -> bool:
    return any(isinstance(n, Access) and n.field.name in evolving for n in walk(node))


def _linear(node: Expr, evolving: set[str], values: Mapping[str, float]) -> float | Form:
    """A number (no evolving field in it), or the Form of its part linear in the evolving fields."""
    if not _evolves(node, evolving):
        return _number(node, values)
    if isinstance(node, Access):
        if node.level < 0:
            raise _Unknown  # a three-level scheme: its amplification is a root of a quadratic, not estimated here
        return {(node.field.name, node.level): {node.offset: 1.0}}
    if isinstance(node, Negate):
        return _scale(_form(_linear(node.arg, evolving, values)), -1.0)
    if isinstance(node, Power):
        return _linear(node.base, evolving, values) if node.n == 1 else {}
    if isinstance(node, Where):
        if _evolves(node.cond, evolving):
            raise _Unknown
        return _linear(node.a if _truth(node.cond, values) else node.b, evolving, values)
    if not isinstance(node, Binary):
        raise _Unknown  # a function of an evolving field: its slope at zero is not read here
    if node.op in "+-":  # a term of no evolving field (a source, a forcing) does not change G, whatever it is
        terms = [_form(_linear(n, evolving, values)) if _evolves(n, evolving) else {} for n in (node.left, node.right)]
        return _merge(terms[0], terms[1], 1.0 if node.op == "+" else -1.0)
    left, right = _linear(node.left, evolving, values), _linear(node.right, evolving, values)
    if node.op == "*":
        if isinstance(left, dict) and isinstance(right, dict):
            return {}  # degree two or more: nothing at zero
        if isinstance(left, dict):
            assert not isinstance(right, dict)
            return _scale(left, right)
        return _scale(_form(right), left)
    if node.op == "/" and isinstance(left, dict) and not isinstance(right, dict):
        return _scale(left, 1.0 / right)
    raise _Unknown


def _form(value: float | Form) -> Form:
    return value if isinstance(value, dict) else {}  # a term of no evolving field does not change G


def _number(node: Expr, values: Mapping[str, float]) -> float:
    """The value of an expression of numbers and constants; anything that varies (coordinates, t, fields) is unknown."""
    if isinstance(node, Literal):
        return float(node.value)
    if isinstance(node, Constant):
        return float(values[node.name])
    if isinstance(node, Negate):
        return -_number(node.arg, values)
    if isinstance(node, Power):
        return _number(node.base, values) ** node.n
    if isinstance(node, Binary):
        a, b = _number(node.left, values), _number(node.right, values)
        return {"+": a + b, "-": a - b, "*": a * b}.get(node.op, a / b if b else math.inf)
    if isinstance(node, Call) and node.fn in ("sqrt", "exp", "log", "sin", "cos", "tanh", "abs"):
        return float(getattr(np, {"abs": "absolute"}.get(node.fn, node.fn))(_number(node.args[0], values)))
    if isinstance(node, Where):
        return _number(node.a if _truth(node.cond, values) else node.b, values)
    raise _Unknown


def _truth(cond: Compare, values: Mapping[str, float]) -> bool:
    return _compare(cond.op, _number(cond.left, values), _number(cond.right, values))


def linear_part(eq: Eq, evolving: set[str], values: Mapping[str, float]) -> Form | None:
    """The Form of the equation's part linear in the evolving fields, or None where it is not estimated."""
    target = eq.target.field.name
    if any(a.field.name == target and a.level < 0 for a in accesses(eq.expr)):
        return None
    try:
        return _form(_linear(eq.expr, evolving, values))
    except (_Unknown, KeyError, ZeroDivisionError, OverflowError):
        return None


def amplification(weights: Mapping[tuple[int, ...], float], thetas: list[np.ndarray] | None = None) -> np.ndarray:
    """G(theta) of a stencil on the grid of wavenumbers `thetas` (one array per axis; default: sampled over
    [-pi, pi])."""
    ndim = len(next(iter(weights)))
    grids = np.meshgrid(*(thetas or [np.linspace(-math.pi, math.pi, SAMPLES[ndim])] * ndim), indexing="ij")
    g = np.zeros(grids[0].shape, dtype=complex)
    for offset, c in weights.items():
        g += c * np.exp(1j * sum(o * t for o, t in zip(offset, grids)))
    return g


def grows_on(weights: Mapping[tuple[int, ...], float], g: np.ndarray, shape: tuple[int, ...]) -> bool:
    """Whether a Fourier mode of a periodic grid of `shape` grows: the sampled wavenumber where |G| is largest,
    moved to the nearest of the grid's own (2 pi k / n per axis), and G evaluated there, one mode, not the grid's
    n^d of them."""
    worst = np.unravel_index(int(np.argmax(np.abs(g))), g.shape)
    sampled = np.linspace(-math.pi, math.pi, g.shape[0])
    mode = [np.array([2 * math.pi * round(sampled[i] * n / (2 * math.pi)) / n]) for i, n in zip(worst, shape)]
    return float(np.abs(amplification(weights, mode)).max()) > 1 + 1e-9


def stable_fraction(g: np.ndarray) -> float:
    """The largest s in [0, 1] for which 1 + s (G - 1) stays within the unit circle: the share of dt that would be
    stable if the step is u + dt * L(u) (forward Euler). 0 where some mode grows at any dt."""
    lam = (g - 1).ravel()
    lam = lam[np.abs(lam) > 1e-14]
    if lam.size == 0:
        return 1.0
    if (lam.real > 1e-14 * np.abs(lam)).any():
        return 0.0
    return float(min(1.0, np.min(-2 * lam.real / np.abs(lam) ** 2)))


def unstable(problem, values: Mapping[str, float], periodic: bool) -> tuple[list[str], bool]:
    """(one line per equation whose step amplifies some Fourier mode, with the dt its linear part is stable at;
    whether the growth is certain). It is certain for one equation, linear in its own field alone, on a grid
    `periodic` along every axis: then the grid's own Fourier modes grow, from the rounding errors if nothing else."""
    evolving = set(problem.analysis.written)
    dt = _number(problem.dt, values)
    lines, certain = [], False
    for eq in problem.equations:
        if not isinstance(eq, Eq):  # a solve is implicit: nothing to estimate
            continue
        form = linear_part(eq, evolving, values)
        weights = (form or {}).get((eq.target.field.name, 0))
        if not weights:
            continue
        g = amplification(weights)
        worst = float(np.abs(g).max())
        if worst <= 1 + 1e-9:
            continue
        share = stable_fraction(g)
        hint = (f"dt at or below about {share * dt:.3g} keeps its linear part stable (dt is {dt:.3g})" if share > 0
                else "no smaller dt makes its linear part stable (forward Euler with centred advection does this)")
        lines.append(f"{problem.name}: the step for {eq.label} multiplies some Fourier modes by up to {worst:.4g} per "
                     f"step, so the run will probably blow up; {hint}")
        alone = len(problem.equations) == 1 and set(form or {}) == {(eq.target.field.name, 0)}
        certain = certain or (periodic and alone and grows_on(weights, g, problem.grid.shape))
    return lines, certain


__all__ = ["amplification", "grows_on", "linear_part", "stable_fraction", "unstable"]
