"""A problem: the equations of one step, initial values, walls, sources, receivers and an exact solution.

Everything is checked when the problem is built, so a mistake is reported
with the equation or field it concerns before anything is compiled or run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .boundary import Dirichlet, Neumann, Periodic, Sides, conditions
from .errors import StencilforgeError
from .interop import module_of, native
from .ir.analysis import Analysis, analyse, constants_of, expressions
from .ir.nodes import Access, Compare, Constant, Expr, Field, Literal, Reduce, as_expr, walk
from .points import INTERPOLATIONS, KAISER_B, point_cells
from .rules import StopRule, stop_rule

Boundary = Dirichlet | Neumann | Periodic


@dataclass(frozen=True)
class Source:
    """Adds signal(t) to `field`'s newly computed level at the point `at` after each step (t: the time at the
    start of the step); `at` is in physical coordinates, x last as the axes are, anywhere from the grid's
    first node to its last along each axis. The signal is an expression of t and constants, or a Python
    function of t.

    interpolation="linear" spreads signal(t) over the nodes of the cell around `at` with (bi/tri)linear
    weights that sum to one: the amount a step injects is signal(t), wherever the point lies, and a
    point on a node puts all of it there. "nearest" adds all of it at the node nearest `at`, as
    stencilforge did before linear injection: between nodes that moves the source by up to half a cell.
    "sinc" spreads it over the 2 sinc_radius nodes per axis around `at` (sinc_radius 1 to 10) with Hicks'
    (2002) Kaiser-windowed sinc weights: the point's delta band-limited to half the Nyquist wavenumber,
    where a high-order stencil is accurate (see Receiver for its error). Along each axis where the point
    lies between nodes, it must lie sinc_radius - 1 cells or more inside the first and last nodes: Hicks'
    reflection of the sinc at a free surface, which lifts that, is not built."""

    field: Field
    at: tuple[float, ...]
    signal: Expr | Callable[[float], float]
    interpolation: str = "linear"
    sinc_radius: int = 4


@dataclass(frozen=True)
class Receiver:
    """Records `field`'s value at the point `at` (physical coordinates, x last) after the steps the problem
    records (`record_every`), after their sources: the (bi/tri)linear interpolation of the nodes of the
    cell around `at`, in float64, or with interpolation="nearest" the nearest node's value. A run returns
    the recordings as `Result.traces`.

    interpolation="sinc" weighs the 2 sinc_radius nodes per axis around `at` (on a node: that node alone) with
    Hicks' Kaiser-windowed sinc, as a sinc Source does: waves of up to half the Nyquist wavenumber are read far
    closer than linear weights read them, and the closer the larger the radius; a radius's error does not shrink
    as the grid is refined, so a small radius stops a high-order scheme's convergence where a larger one does not
    (the errors measured are in tests/test_points.py)."""

    field: Field
    at: tuple[float, ...]
    interpolation: str = "linear"
    sinc_radius: int = 4


def _point(p, kind: str, grid) -> tuple[float, ...]:
    """A source's or receiver's `at` as a tuple of floats, checked against the grid."""
    at = tuple(p.at) if isinstance(p.at, (tuple, list)) else (p.at,)
    if len(at) != grid.ndim or not all(isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(v) for v in at):
        raise StencilforgeError(f"{kind} on {p.field.name}: `at` needs {grid.ndim} finite coordinates, got {p.at!r}")
    if p.interpolation not in INTERPOLATIONS:
        raise StencilforgeError(f"{kind} on {p.field.name}: interpolation is {', '.join(map(repr, INTERPOLATIONS[:-1]))} "
                                f"or {INTERPOLATIONS[-1]!r}, got {p.interpolation!r}")
    if isinstance(p.sinc_radius, bool) or not isinstance(p.sinc_radius, (int, np.integer)) or p.sinc_radius not in KAISER_B:
        raise StencilforgeError(f"{kind} on {p.field.name}: sinc_radius is an integer from 1 to {max(KAISER_B)}, "
                                f"got {p.sinc_radius!r}")
    point_cells(at, grid.origin, grid.spacing, grid.shape, p.interpolation, f"{kind} on {p.field.name}", int(p.sinc_radius))
    return tuple(float(v) for v in at)


def _sources(sources: Sequence[Source], written, grid) -> tuple[Source, ...]:
    """The sources with their points checked and their signals as expressions or Python functions."""
    checked = []
    for s in sources:
        if not isinstance(s, Source) or not isinstance(s.field, Field) or s.field.name not in written:
            raise StencilforgeError(f"a source must be sf.Source(field, at, signal) on a field an equation writes, got {s!r}")
        at = _point(s, "source", grid)
        signal = (
            s.signal
            if callable(s.signal) and not isinstance(s.signal, Expr)
            else _pure(s.signal, f"the signal of the source on {s.field.name}")
        )
        checked.append(replace(s, at=at, signal=signal))
    return tuple(checked)


def _key(problem_fields: Mapping[str, Field], key, what: str) -> tuple[str, int]:
    """(field name, level) of an initial-value or boundary key: a field, u.prev, or their names."""
    if isinstance(key, Access):
        if any(key.offset):
            raise StencilforgeError(f"{what} key {key.label} must not carry an offset")
        name, level = key.field.name, key.level
    elif isinstance(key, str):
        name, _, suffix = key.partition(".")
        named = {"": 0, "prev": -1}.get(suffix)
        if named is None:
            raise StencilforgeError(f"{what} key {key!r}: use a field name or NAME.prev")
        level = named
    else:
        raise StencilforgeError(f"{what} keys must be fields or field names, got {key!r}")
    if name not in problem_fields:
        raise StencilforgeError(f"{what} names {name!r}, which no equation uses (fields: {', '.join(problem_fields)})")
    if level == -1 and problem_fields[name].levels < 3:
        raise StencilforgeError(f"{what} for {name}.prev: {name} has no previous level")
    return name, level


def _pure(expr: object, what: str) -> Expr:
    """`expr` (an Expr or a number) as an Expr that reads no field."""
    expr = as_expr(expr)
    for n in walk(expr):
        if isinstance(n, Access):
            raise StencilforgeError(f"{what} may use coordinates, t and constants, not the field {n.label}")
    return expr


def _until(until, fields: Mapping[str, Field], exprs: list) -> StopRule | None:
    """The stop rule, checked against the fields; its expressions join `exprs` (its constants are the problem's),
    which, being per cell (equations, walls, the residual), refuse norms."""
    if any(isinstance(n, Reduce) for e in exprs for n in walk(e)):
        raise StencilforgeError("sf.norm and sf.total reduce over the grid: they belong in a stop rule (until=), not in "
                                "an equation, an initial value, a wall, a source or the residual")
    if until is None:
        return None
    rule = stop_rule(until, fields)
    if isinstance(rule.rule, Compare):
        exprs.append(rule.rule)
    return rule


def _conditions(name: str, cond, ndim: int) -> tuple[Boundary | Sides, ...]:
    """One boundary condition for every axis, or one per axis in array order, each a condition or a (low, high)
    pair of the two ends' (in 1D a pair of conditions is the two ends')."""
    pair = isinstance(cond, (tuple, list))
    if pair and ndim == 1 and len(cond) == 2 and not any(isinstance(c, (tuple, list)) for c in cond):
        cond = (tuple(cond),)
    conds = tuple(cond) if pair else (cond,) * ndim
    if len(conds) != ndim:
        raise StencilforgeError(f"boundary of {name}: give one condition, or one per axis ({ndim}) in array order, where an "
                                "axis may take a (low, high) pair of conditions")
    checked: list[Boundary | Sides] = []
    for c in conds:
        if isinstance(c, (tuple, list)):
            if len(c) != 2 or not all(isinstance(end, (Dirichlet, Neumann)) for end in c):
                raise StencilforgeError(f"boundary of {name}: an axis's (low, high) pair takes two of sf.Dirichlet and "
                                        f"sf.Neumann (a periodic axis is periodic at both ends), got {tuple(c)!r}")
            c = Sides(*c)
        elif not isinstance(c, (Dirichlet, Neumann, Periodic)):
            raise StencilforgeError(f"boundary of {name}: {c!r} is not sf.Dirichlet, sf.Neumann or sf.Periodic")
        checked.append(c)
    for c in conditions(checked):
        if isinstance(c, Dirichlet) and isinstance(c.value, Expr):
            _pure(c.value, f"the Dirichlet value of {name}")
    return tuple(checked)


def _value(value, what: str, shape: tuple[int, ...]):
    if isinstance(value, (Expr, int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return _pure(value, what)
    arr = native(value)
    if arr.dtype.kind not in "iuf":
        raise StencilforgeError(f"{what} must be real numbers, got an array of {arr.dtype}")
    if arr.shape != shape:
        raise StencilforgeError(f"{what} has shape {arr.shape}; the grid's interior is {shape}")
    if not module_of(arr).isfinite(arr).all():
        raise StencilforgeError(f"{what} holds NaN or infinite values")
    return arr


def switch(value, name: str) -> bool:
    """`value`, refused in one line unless it is True or False (a string such as "no" would read as True)."""
    if not isinstance(value, bool):
        raise StencilforgeError(f"{name} must be True or False, got {value!r}")
    return value


class Problem:
    """Equations (sf.Eq) and solves (sf.Solve), run in order each step, plus what a run needs to start and to check itself.

    initial:  {field or u.prev: number | expression of x, y, z, constants | array of the interior shape}
              (arrays of any library with __dlpack__, NumPy, PyTorch, JAX or CuPy, are read without a copy)
              (fields not named start at zero; u.prev defaults to u's initial value)
    boundary: {field: condition, or one condition per axis in array order, an axis's two ends taking a
              (low, high) pair where they differ: (sf.Periodic(), (sf.Dirichlet(1.0), sf.Neumann()))}; every field read at a
              neighbouring cell needs one, except a field no equation writes whose initial value is an
              expression (its ghost layers are that expression)
    exact:    {field: expression of coordinates and t}: errors are reported against it
    sources:  sf.Source points, each adding its signal after every step (in this order where they share a node)
    receivers: sf.Receiver points, recorded after every `record_every`-th step (`Result.traces`)
    dt:       the time step (number or sf.Constant); t advances by it each step
    residual: an expression a run with `tol` drives below tol, measured as ||residual||_2 / ||residual_scale||_2
              over the interior (without a scale: its RMS)
    until:    a stop rule the problem carries (a problem file's runs stop on it too): a comparison of norms such as
              sf.norm(p.next - p, 1) / sf.norm(p, 1) < 1e-4, or a function of the fields (`sf.run`'s until=)
    strict_solves: a solve that misses its tolerance stops the problem's runs (`sf.run`'s strict_solves=, the CLI's
              --strict-solves), where otherwise they count it and go on
    Expressions for initial values, walls and exact solutions are evaluated in float64 and rounded to
    the grid's dtype once; u.prev's initial expression is evaluated at t = -dt.
    """

    def __init__(
        self,
        equations: Sequence,
        *,
        initial: Mapping | None = None,
        boundary: Mapping | None = None,
        exact: Mapping | None = None,
        sources: Sequence[Source] = (),
        receivers: Sequence[Receiver] = (),
        record_every: int = 1,
        dt: float | Constant = 1.0,
        residual: Expr | None = None,
        residual_scale: Expr | None = None,
        until=None,
        strict_solves: bool = False,
        name: str = "problem",
        steps: int = 100,
        description: str = "",
    ):
        self.equations = tuple(equations)
        self.analysis: Analysis = analyse(self.equations)
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
            raise StencilforgeError(f"steps must be a non-negative integer, got {steps!r}")
        self.name, self.description, self.default_steps = name, description, int(steps)
        grid = self.analysis.grid
        fields = {f.name: f for f in self.analysis.fields}
        self.fields = fields
        dt_expr = dt if isinstance(dt, Constant) else as_expr(dt)
        if not isinstance(dt_expr, (Constant, Literal)):
            raise StencilforgeError(f"dt must be a number or an sf.Constant, got {dt!r}")
        self.dt: Constant | Literal = dt_expr
        if isinstance(self.dt, Literal) and not (self.dt.value > 0):
            raise StencilforgeError(f"dt must be positive, got {self.dt.value}")

        self.initial: dict[tuple[str, int], Any] = {}  # an Expr, or an array of initial values
        for key, value in (initial or {}).items():
            name_level = _key(fields, key, "initial value")
            self.initial[name_level] = _value(
                value, f"initial value of {'.'.join([name_level[0]] + (['prev'] if name_level[1] < 0 else []))}", grid.shape
            )

        self.boundary: dict[str, tuple[Boundary | Sides, ...]] = {}
        for key, cond in (boundary or {}).items():
            name, _ = _key(fields, key, "boundary condition")
            self.boundary[name] = _conditions(name, cond, grid.ndim)
        halo = {s[0] for p in self.analysis.stages for s in p.halo}
        written = set(self.analysis.written)
        for name in sorted(halo):
            if name in self.boundary:
                continue
            if name not in written and isinstance(self.initial.get((name, 0)), Expr):
                continue
            raise StencilforgeError(f"field {name} is read at neighbouring cells: give it a boundary condition")
        for stage in self.analysis.solves:
            if stage.solve.target.field.name not in self.boundary:
                name = stage.solve.target.field.name
                raise StencilforgeError(f"solve for {stage.solve.label}: give {name} a boundary condition (the solve's walls)")

        self.exact = {}
        for key, expr in (exact or {}).items():
            name, _ = _key(fields, key, "exact solution")
            self.exact[name] = _pure(expr, f"the exact solution of {name}")

        self.sources = _sources(sources, written, grid)
        for r in receivers:
            if not isinstance(r, Receiver) or not isinstance(r.field, Field) or r.field.name not in fields:
                raise StencilforgeError(f"a receiver must be sf.Receiver(field, at) on a field of the problem, got {r!r}")
        self.receivers = tuple(replace(r, at=_point(r, "receiver", grid)) for r in receivers)
        if isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1:
            raise StencilforgeError(f"record_every must be a positive integer, got {record_every!r}")
        self.record_every = int(record_every)
        self.residual = None if residual is None else as_expr(residual)
        self.residual_scale = None if residual_scale is None else as_expr(residual_scale)

        exprs = [e for eq in self.equations for e in expressions(eq)] + [v for v in self.initial.values() if isinstance(v, Expr)]
        exprs += list(self.exact.values()) + [s.signal for s in self.sources if isinstance(s.signal, Expr)]
        walls = [c for conds in self.boundary.values() for c in conditions(conds) if isinstance(c, Dirichlet)]
        exprs += [c.value for c in walls if isinstance(c.value, Expr)]
        exprs += [self.dt] + [e for e in (self.residual, self.residual_scale) if e is not None]
        self.until = _until(until, fields, exprs)
        self.strict_solves = switch(strict_solves, "strict_solves")
        self.constants: tuple[Constant, ...] = constants_of(exprs)

    def values(self, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
        """Each constant's value, with `overrides` (checked against the problem's own constants)."""
        values = {c.name: c.value for c in self.constants}
        for name, value in (overrides or {}).items():
            if name not in values:
                raise StencilforgeError(f"{self.name} has no parameter {name!r} (its parameters: {', '.join(values) or 'none'})")
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
                raise StencilforgeError(f"parameter {name} must be a finite number, got {value!r}")
            values[name] = float(value)
        return values

    @property
    def grid(self):
        return self.analysis.grid

    def __repr__(self):
        eqs = ", ".join(eq.label for eq in self.equations)
        return f"Problem({self.name!r}: {eqs} on {self.grid})"
