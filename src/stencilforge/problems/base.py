"""Building a problem's `plan.Setup`: a step of one linear equation lowered to a sweep, and the checks its builders share."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..boundary import Boundary, Dirichlet, Sides
from ..errors import StencilforgeError
from ..grid import Grid
from ..ir.analysis import accesses
from ..ir.lowering import sweep_of, sweep_terms
from ..ir.nodes import Constant, Expr
from ..plan import PointSource, Setup, Sweep
from ..points import point_cells
from ..printers.numpy import coordinates, evaluate, source_signal, wall_values
from ..problem import Problem
from ..simulation import initial_array, tabulated


def stable_dt(requested: float | None, limit: float, default_fraction: float, what: str) -> float:
    """The requested time step, refused above the stability limit, or a safe default."""
    if requested is None:
        return default_fraction * limit
    if not requested > 0:
        raise StencilforgeError(f"dt must be positive, got {requested}")
    if requested > limit:
        raise StencilforgeError(
            f"dt={requested:.6g} is unstable for {what}: the largest stable dt is {limit:.6g}"
        )
    return float(requested)


def padded(grid: Grid, values: np.ndarray | float) -> np.ndarray:
    """A ghosted array of the grid's dtype filled from float64 values defined on the padded lattice."""
    arr = np.empty(grid.padded_shape, dtype=grid.dtype)
    arr[...] = values
    return arr


def positive(name: str, value, allow_zero: bool = False):
    if value is None or not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise StencilforgeError(f"{name} must be a positive number, got {value}")
    return float(value)


def why_not_lowered(problem: Problem, values: dict | None = None) -> str | None:
    """Why `lowered` cannot take the problem, or None: one equation, linear in the fields, reading
    u.prev only at the cell, one wall per field, a linear residual."""
    an = problem.analysis
    if an.solves:
        return "a step with sf.Solve runs its passes and solves"
    if an.loops:
        return "a step with sf.Iterate runs its passes several times"
    if len(an.passes) != 1 or len(an.passes[0].equations) != 1:
        return "only a step of one equation lowers to a sweep"
    if an.half:
        return f"{', '.join(an.half)} stored in float16: the sweeps keep every field in the grid's dtype"
    eq = an.passes[0].equations[0]
    target = eq.target.field
    values = problem.values() if values is None else values
    if target.levels == 1:
        return f"{target.name} has no time levels to swap"
    if any(any(a.offset) for a in accesses(eq.expr) if a.field is target and a.level == -1):
        return f"{target.name}.prev is read at neighbouring cells, which a sweep cannot do"
    if any(any(c != conds[0] or isinstance(c, Sides) for c in conds) for conds in problem.boundary.values()):
        return "walls that differ per axis or per side do not lower to a sweep"
    if sweep_of(eq, values) is None:
        return f"the equation for {eq.label} is not a sum of stencils of fields"
    if problem.residual is not None and sweep_terms(problem.residual, values) is None:
        return "the residual is not a sum of stencils of fields"
    return None


def lowers(problem: Problem) -> bool:
    return why_not_lowered(problem) is None


def lowered(problem: Problem, params: dict | None = None, default_tol: float | None = None,
            overrides: dict | None = None, xp=np) -> Setup:
    """The Setup the time loop runs for a problem whose step is one linear equation (see `ir.lowering`).

    With `xp` (CuPy) fields, walls and the exact solution are evaluated on the device, so no
    full-size array is built on the host. Fields keep the names checkpoints have always used (u, u_new;
    a leapfrog's u.next reuses u_prev's buffer when the equation reads u.prev only at the cell); walls,
    sources and the exact solution carry over. Receivers do not: `Simulation` records them.
    """
    values = problem.values(overrides)
    why = why_not_lowered(problem, values)
    if why is not None:
        raise StencilforgeError(f"{problem.name}: {why}")
    an = problem.analysis
    eq = an.passes[0].equations[0]
    target = eq.target.field
    out = f"{target.name}_new" if target.levels == 2 else f"{target.name}_prev"
    swap = (target.name, out)
    sweep = sweep_of(eq, values, out)
    grid = problem.grid
    dt = values[problem.dt.name] if isinstance(problem.dt, Constant) else problem.dt.value
    lattice = Grid(grid.shape, grid.spacing, grid.dtype, an.ghost, grid.origin)
    boundaries: dict[str, Boundary] = {}
    for name, conds in problem.boundary.items():
        cond = conds[0]
        assert not isinstance(cond, Sides), "why_not_lowered refuses walls per side"
        boundaries[name] = wall_values(cond.value, values, xp) if isinstance(cond, Dirichlet) and isinstance(cond.value, Expr) else cond
    fields = {}
    for f in an.fields:
        fields[f.name] = initial_array(problem, lattice, f.name, 0, values, dt, xp)
        if f.name in boundaries:
            boundaries[f.name].bind(lattice, xp)(fields[f.name], 0.0)
        if f is target:
            fields[out] = initial_array(problem, lattice, f.name, -1, values, dt, xp) if target.levels == 3 else fields[f.name].copy()
    sources = []
    for s in problem.sources:  # a point between nodes: one PointSource per node it touches, scaled by the node's weight
        cells, weights = point_cells(s.at, lattice.lower, lattice.spacing, lattice.shape, s.interpolation, "source")
        signal = source_signal(s.signal, values)
        sources += [PointSource(out, tuple(int(i) + lattice.ghost for i in cell), signal, float(w)) for cell, w in zip(cells, weights)]
    residual, rhs_norm = None, math.sqrt(math.prod(grid.shape))  # without a scale the residual is an RMS
    if problem.residual is not None:
        terms = sweep_terms(problem.residual, values)
        assert terms is not None, "why_not_lowered checked that the residual is linear"
        residual = Sweep("r", terms)
        if problem.residual_scale is not None:
            scale = evaluate(problem.residual_scale, dtype=grid.dtype, xp=xp, coordinate=coordinates(lattice, xp), params=values,
                             access=lambda a: fields[a.field.name][lattice.interior])
            scale = xp.broadcast_to(xp.asarray(scale, dtype=np.float64), grid.shape)
            rhs_norm = float(xp.sqrt(xp.sum(scale * scale)))
    exact_of = problem.exact.get(target.name)
    exact: Callable | None = None
    if exact_of is not None:
        def exact_at(t):
            return {target.name: tabulated(exact_of, lattice, np.float64, values, t, xp)}

        exact = exact_at
    return Setup(
        name=problem.name, grid=lattice, fields=fields, dt=dt, default_steps=problem.default_steps, solution=target.name,
        sweep=sweep, swap=swap, boundaries=boundaries, exact=exact, residual=residual, rhs_norm=rhs_norm,
        default_tol=default_tol, sources=tuple(sources), params=dict(values if params is None else params),
    )
