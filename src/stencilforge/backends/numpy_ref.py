"""The oracle: plain NumPy slicing, obviously right, float64-capable."""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..grid import Grid
from ..plan import AxisOperator, Sweep
from ..printers.numpy import pass_kernel
from .base import HostMemory, Launch


def shifted(interior: tuple[slice, ...], offset: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(s.start + o, s.stop + o) for s, o in zip(interior, offset))


@np.errstate(over="ignore", invalid="ignore")
def evaluate_sweep(sweep: Sweep, grid: Grid, fields: Mapping[str, np.ndarray]):
    """The sweep's right-hand side on the interior, in the grid's dtype.

    Overflow warnings are silenced: a blow-up is reported once, by the time loop's finite check.
    """
    dtype = grid.dtype.type
    interior = grid.interior
    total = None
    for term in sweep.terms:
        part = None
        for coeff, offsets in term.stencil.weight_groups():  # c * (a + b + ...), the CPU kernels' order
            values = None
            for offset in offsets:
                x = fields[term.field][shifted(interior, offset)]
                values = x if values is None else values + x
            value = dtype(float(coeff)) * values
            part = value if part is None else part + value
        if term.factor is not None:
            part = part * fields[term.factor][interior]
        total = part if total is None else total + part
    return total


def evaluate_axis_operator(op: AxisOperator, u, outs, xp=np) -> None:
    n = u.shape[op.axis]
    uu = xp.moveaxis(u, op.axis, -1)
    for d, out in zip(op.outputs, outs):
        dtype = u.dtype.type
        oo = xp.moveaxis(out, op.axis, -1)
        left, right = len(d.left), len(d.right)
        acc = None
        for o, w in d.interior:
            value = dtype(float(w)) * uu[..., left + o : n - right + o]
            acc = value if acc is None else acc + value
        oo[..., left : n - right] = acc * dtype(d.scale)
        rows = [(k, row) for k, row in enumerate(d.left)] + [(n - 1 - k, row) for k, row in enumerate(d.right)]
        for k, row in rows:
            acc = None
            for o, w in row:
                value = dtype(float(w)) * uu[..., k + o]
                acc = value if acc is None else acc + value
            oo[..., k] = acc * dtype(d.scale)


class NumpyBackend(HostMemory):
    name = "numpy"
    xp = np
    fuses_steps = False
    half_storage = True

    @staticmethod
    def available() -> bool:
        return True

    def sweep(self, sweep: Sweep, grid: Grid, background: bool = False) -> Launch:
        interior = grid.interior

        def run(fields):
            fields[sweep.out][interior] = evaluate_sweep(sweep, grid, fields)

        return Launch(run)

    def sweep_fused(self, sweep: Sweep, grid: Grid, *, window: int | None = None) -> None:
        """The oracle steps one at a time."""
        return None

    def axis_operator(self, op: AxisOperator, dtype, shape=None, background: bool = False) -> Launch:
        def run(u, *outs):
            evaluate_axis_operator(op, u, outs)

        return Launch(run)

    def equation_pass(self, p, lattice: Grid, constants, background: bool = False) -> Callable:
        """run(arrays, params, t) for one pass of a problem's equations (see `ir.analysis.Pass`); nothing to
        compile, so nothing for `background` to do."""
        return pass_kernel(p, lattice, np)

    @staticmethod
    def copy_cells(arrays, dst, src) -> None:
        """a.flat[dst] = a.flat[src] for each C-contiguous array (ghost cells from their interior images)."""
        for arr in arrays:
            flat = arr.reshape(-1)
            flat[dst] = flat[src]

    def asarray(self, a, dtype=None):
        return np.ascontiguousarray(a, dtype=dtype)

    def field(self, a, ghost: int):
        """A C-contiguous copy of the ghosted field (the layout choice matters on the GPU)."""
        return np.array(a, order="C")

    def to_host(self, a) -> np.ndarray:
        return np.asarray(a)

    def synchronize(self) -> None:
        pass
