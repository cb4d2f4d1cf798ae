"""The problem registry: name -> the module whose build(*args, shape, dtype, **params) makes it.

A problem's module is imported when it is built: a run of one problem does not import the
others, and a run of a user's own equations imports none.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ..errors import StencilforgeError
from ..grid import Grid as Lattice
from ..plan import Sweep
from ..problem import Problem

if TYPE_CHECKING:
    from ..solvers.poisson import PoissonResult

MODULES: dict[str, tuple[str, tuple[int, ...]]] = {  # name -> (module, leading arguments of its build)
    "poisson2d": ("poisson2d", ()),
    "poisson3d": ("poisson3d", ()),
    "heat2d": ("heat", (2,)),
    "heat3d": ("heat", (3,)),
    "wave3d": ("wave3d", ()),
    "derivatives": ("derivatives", ()),
}
NAMES = tuple(MODULES)
POISSON = ("poisson2d", "poisson3d")  # the problems `run --method multigrid` solves
JACOBI_TOL = 1e-6  # where a Poisson problem's Jacobi run is given neither steps nor a tolerance


def _module(name: str) -> ModuleType:
    if name not in MODULES:
        raise StencilforgeError(f"unknown problem {name!r}: choose one of {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{MODULES[name][0]}")


def parameters(name: str) -> tuple[str, ...]:
    """The parameters a named problem takes besides shape and dtype."""
    return _module(name).PARAMS


def problem(name: str, shape=None, dtype=None, **params) -> tuple[Problem, dict]:
    """(the named problem as an `sf.Problem`, what `sf.run` steps, and the parameters that built it, which its files
    record); parameters that do not apply to it are refused."""
    module = _module(name)
    given = _given(name, module, shape, dtype, params)
    made = module.problem(*MODULES[name][1], **given)
    return made if isinstance(made, tuple) else (made, made.values())


def _given(name: str, module: ModuleType, shape, dtype, params: dict) -> dict:
    """The keyword arguments of a module's builder: the parameters it takes, given (not None), shape and dtype."""
    extra = sorted(k for k, v in params.items() if v is not None and k not in module.PARAMS)
    if extra:
        raise StencilforgeError(f"{name} does not take {', '.join('--' + k for k in extra)}")
    given = {k: v for k, v in params.items() if v is not None}
    if dtype is not None:
        given["dtype"] = dtype
    if shape is not None:
        given["shape"] = tuple(int(n) for n in shape)
    return given


def multigrid(made: Problem, built: dict, backend: str = "auto", tol: float | None = None, max_cycles: int | None = None,
              **options) -> "PoissonResult":
    """poisson2d or poisson3d (`made`, `built`: what `problem` returns) solved by multigrid (`sf.poisson`): f, the
    Dirichlet walls and the exact solution are the Jacobi problem's, to `tol` (default JACOBI_TOL) within `max_cycles`
    (default 50) V-cycles; the summary has the keys every run's has, a cycle counting as a step, and the error against
    the exact solution."""
    from ..backends import get_backend
    from ..boundary import Dirichlet
    from ..ir.nodes import Expr
    from ..metrics import error_norms
    from ..simulation import initial_array, tabulated
    from ..solvers import PoissonResult, poisson

    if made.name not in POISSON:
        raise StencilforgeError(f"multigrid solves {', '.join(POISSON)}, not {made.name}")
    grid, values = made.grid, made.values()
    lattice = Lattice(grid.shape, grid.spacing, grid.dtype, 1, grid.origin)
    f = initial_array(made, lattice, "f", 0, values, 1.0)[lattice.interior]
    (wall,) = set(made.boundary["u"])
    assert isinstance(wall, Dirichlet) and isinstance(wall.value, Expr), "the Poisson problems' walls are the exact solution"
    u = tabulated(wall.value, lattice, grid.dtype, values, 0.0, ghosts=True)  # the ghost faces hold the walls
    result = poisson(f, grid.spacing, value=u, dtype=grid.dtype, backend=backend, tol=JACOBI_TOL if tol is None else tol,
                     max_cycles=50 if max_cycles is None else max_cycles, **options)
    s = result.summary
    summary = {"problem": made.name, **s, "steps": s["cycles"], "step": s["cycles"], "iterations": s["cycles"], "params": built,
               "gcells_per_s": math.prod(grid.shape) / s["cycle_s"] / 1e9 if s["cycle_s"] else None}
    exact = tabulated(made.exact["u"], lattice, np.float64, values, 0.0)
    summary["error"] = error_norms(get_backend(backend).to_host(result.u), exact)
    summary["errors"] = {"u": summary["error"]["max_abs"]}
    return PoissonResult(result.u, summary)


@dataclass(frozen=True)
class LinearStep:
    """A named problem whose step is one linear equation, as the hand-scheduled kernels take it (the bench, the
    kernel tests): the equation's sweep (`ir.lowering`), output named as checkpoints name it (u_new; a leapfrog
    writes u_prev's buffer, which it reads only at the cell), on the problem's lattice."""

    problem: Problem
    values: dict  # the constants' values
    lattice: Lattice
    sweep: Sweep
    swap: tuple[str, str]  # (the iterated field, the output): the newest values are in swap[0] after a swap
    params: dict  # what built it


def linear_step(name: str, shape=None, dtype=None, **params) -> LinearStep:
    """The `LinearStep` of a named problem (heat2d, heat3d, poisson2d, poisson3d, wave3d)."""
    from ..ir.lowering import sweep_of

    made, built = problem(name, shape, dtype, **params)
    values = made.values()
    passes = made.analysis.passes
    sweep = None
    if len(made.analysis.stages) == 1 and len(passes) == 1 and len(passes[0].equations) == 1:
        eq = passes[0].equations[0]
        target = eq.target.field
        out = f"{target.name}_new" if target.levels == 2 else f"{target.name}_prev"
        sweep = sweep_of(eq, values, out)
    if sweep is None:
        raise StencilforgeError(f"{name}'s step is not one linear equation")
    grid = made.grid
    lattice = Lattice(grid.shape, grid.spacing, grid.dtype, made.analysis.ghost, grid.origin)
    return LinearStep(made, values, lattice, sweep, (target.name, out), dict(built))


__all__ = ["MODULES", "NAMES", "LinearStep", "linear_step", "multigrid", "parameters", "problem"]
