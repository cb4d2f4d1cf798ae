"""Multigrid inside a time step (`sf.Solve`): one hierarchy built for the run, one solve per step.

a u - b div(k grad u) = rhs is solved as div(k grad u) - (a / b) u = -rhs / b.
Each step moves the walls' Dirichlet values of that time into the right-hand
side (f - L g, as `poisson` does), starts the cycles from the field's previous
value (a field that changes little per step needs a cycle or two, or none) and
runs V(2,2) cycles until ||f - A u|| / ||f|| < tol. A solve that misses it
(max_cycles reached, or the residual stalled at the dtype's rounding floor)
hands back its last iterate (the residual falls each cycle until that floor)
and is recorded (`Miss`): the run decides whether to go on. With no Dirichlet wall and
a = 0 the constants are the operator's null space: the right-hand side's mean
is removed first (the discrete divergence of a velocity next to walls is
compatible only to truncation error) and the solution is the zero-mean one.
The Poisson form runs the backend's multigrid kernels (numba's loops, CUDA);
the screened form (a != 0) runs the array-module kernels (NumPy, or CuPy on
the GPU), which take the diagonal shift.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import StencilforgeError
from . import operator as op
from .multigrid import ArrayKernels, Multigrid, Traffic, Undivided
from .poisson import _kernels, stalled


@dataclass(frozen=True)
class Miss:
    """A solve that ended above its tolerance: which (`what`), in which step, its final relative residual and cycles,
    and why (the cycle budget spent, or the rounding floor reached)."""

    what: str
    step: int
    residual: float
    cycles: int
    why: str


class StepSolver:
    """The hierarchy of one sf.Solve on one backend; `solve` runs once per step."""

    def __init__(self, engine, shape, spacing, walls, k, a: float, b: float, dtype, tol: float, max_cycles: int, what: str,
                 layout=None, faces=None):
        """`shape`, `spacing`, `k`: the whole grid's. `layout`: where the levels live (`multigrid.Undivided`, or a
        rank's blocks, `decomposed.BlockLayout`); `faces`: the (axis, side) faces of the grid's boundary that the
        fine block touches (default: all of them), the only ones whose Dirichlet walls enter the right-hand side."""
        if b == 0:
            raise StencilforgeError(f"{what}: b = 0 leaves no derivative to solve for")
        shift = a / b if a else 0.0
        if shift < 0:
            raise StencilforgeError(f"{what}: a / b = {shift:.6g} < 0 makes an indefinite operator; multigrid needs a / b >= 0")
        if k is not None:
            k = np.broadcast_to(np.asarray(k, dtype=np.float64), shape)
            if not np.isfinite(k).all() or not (k > 0).all():
                raise StencilforgeError(f"{what}: k must be positive and finite everywhere, smallest value {k.min():.6g}")
        self.what, self.tol, self.max_cycles = what, tol, max_cycles
        self.walls = tuple(walls)
        self.dtype = np.dtype(dtype)
        self.scale = None if b == -1 else -1.0 / b
        traffic = Traffic()
        self.layout = Undivided() if layout is None else layout
        inner = ArrayKernels(engine.xp, traffic) if shift else _kernels(engine, traffic)
        self.kernels = self.layout.kernels(inner)
        self.xp = inner.xp
        self.mg = Multigrid(shape, walls, spacing, k, self.dtype, self.kernels, layout=self.layout, shift=shift)
        self.cycle = self.kernels.recorded(self.mg.cycle)
        fine = self.mg.finest.shape  # this rank's block
        self.ghosted = self.xp.zeros(tuple(n + 2 for n in fine), dtype=self.dtype)  # the Dirichlet walls, zero inside
        every = tuple((axis, side) for axis in range(len(shape)) for side in (0, 1))
        self.faces = tuple((axis, side) for axis, side in (every if faces is None else faces) if self.walls[axis] == "dirichlet")
        self.solves = self.cycles = self.missed = 0
        self.largest = 0.0  # the largest final relative residual
        self.first_miss: Miss | None = None

    def solve(self, start, rhs, walls, step: int):
        """The solution's interior (a view of the finest iterate) from the interior `start` and `rhs`;
        `walls`: a ghosted array (one ghost layer) whose Dirichlet faces hold the wall values, or None; `step`: the step it
        solves for, which a miss records. Every rank of a split solve takes the same decisions: its residuals are
        global exact sums, the same bits on every rank."""
        xp, mg = self.xp, self.mg
        fine = mg.finest
        f = rhs if self.scale is None else rhs * self.dtype.type(self.scale)
        if walls is not None:
            g = self.ghosted
            for a, side in self.faces:
                face = tuple(slice(-side, (1 - side) or None) if b == a else slice(1, -1) for b in range(g.ndim))
                g[face] = walls[face]
            f = f - op.apply(xp, g, fine.faces)
        fine.f[...] = f
        if mg.singular:
            fine.f -= mg.layout.mean(fine.f).astype(self.dtype)
        norm = math.sqrt(self.layout.norm2(xp, fine.f))
        fine.u[fine.interior] = start
        self.solves += 1
        if norm == 0.0:
            fine.u[...] = 0
            return fine.u[fine.interior]
        history = [self._residual(norm)]
        while history[-1] >= self.tol:
            cycles = len(history) - 1
            floor = stalled(history)
            if cycles == self.max_cycles or floor:
                why = (f"stopped falling above tol {self.tol:g} (the dtype's rounding floor: raise tol)" if floor
                       else f"did not reach tol {self.tol:g} (max_cycles {self.max_cycles})")
                self.missed += 1
                if self.first_miss is None:
                    self.first_miss = Miss(self.what, step, history[-1], cycles, why)
                break
            self.cycle()
            if mg.singular:
                mg.remove_mean(fine.u)
            history.append(self._residual(norm))
        self.cycles += len(history) - 1
        self.largest = max(self.largest, history[-1])
        return fine.u[fine.interior]

    def _residual(self, norm: float) -> float:
        fine = self.mg.finest
        return math.sqrt(self.kernels.residual_norm2(fine, fine.u, fine.f)) / norm

    def summary(self) -> dict:
        """`largest_residual`: the worst final residual, a missed solve's where one missed; `missed`: the solves that
        ended above tol; `first_miss`: the step of the first of them (None without)."""
        first = self.first_miss.step if self.first_miss is not None else None
        return {"solves": self.solves, "cycles": self.cycles, "cycles_per_solve": self.cycles / self.solves if self.solves else None,
                "largest_residual": self.largest, "tol": self.tol, "missed": self.missed, "first_miss": first,
                "walls": list(self.walls), **self.layout.summary()}
