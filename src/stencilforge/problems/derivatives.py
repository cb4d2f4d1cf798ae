"""Matrix-free first and second derivatives along one axis of a 2D field, with one-sided closures.

accuracy=2 is the classic operator: central interior, one-sided first-order
closures on the end rows. accuracy=4 uses radius-2 central interior weights and
closures derived by Fornberg on one-sided nodes wide enough to keep 4th order
at the boundary (`ir.operators.closed`). Both derivatives come out of one pass
over the input.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import StencilforgeError
from ..grid import Grid as Lattice, check_shape, parse_dtype
from ..ir.nodes import Eq, Field, Grid, cos, sin
from ..ir.operators import CLOSED_ACCURACIES, closed, d
from ..plan import AxisOperator
from ..problem import Problem

DEFAULT_SHAPE = (1000, 1000)
PARAMS = ("axis", "accuracy")
ACCURACIES = CLOSED_ACCURACIES


def operator(axis: int, h: float, accuracy: int = 2, orders=(1, 2)) -> AxisOperator:
    """The kernel-level operator (what `sf.derivatives` and the bench apply to arrays): d1, d2 of u in one pass."""
    if axis not in (0, 1):
        raise StencilforgeError(f"axis must be 0 (y) or 1 (x), got {axis}")
    return AxisOperator("u", axis, 2, tuple(closed(o, accuracy, h, f"d{o}") for o in orders))


def test_function(x, y):
    return np.sin(2 * np.pi * x + 0.3) * np.cos(np.pi * y - 0.2)


def exact_derivatives(x, y, axis: int) -> dict[str, np.ndarray]:
    if axis == 1:
        d1 = 2 * np.pi * np.cos(2 * np.pi * x + 0.3) * np.cos(np.pi * y - 0.2)
        d2 = -4 * np.pi**2 * test_function(x, y)
    else:
        d1 = -np.pi * np.sin(2 * np.pi * x + 0.3) * np.sin(np.pi * y - 0.2)
        d2 = -np.pi**2 * test_function(x, y)
    return {"d1": d1, "d2": d2}


def problem(shape=DEFAULT_SHAPE, dtype="float64", axis: int = 1, accuracy: int = 2) -> tuple[Problem, dict]:
    """d1 and d2 of the test function along `axis`, one-sided derivatives with closures on the unit square's nodes
    (walls included); each step computes them again from u (what a run times)."""
    shape = tuple(shape)
    if len(shape) != 2:
        raise StencilforgeError(f"derivatives needs a 2D shape, got {shape}")
    if axis not in (0, 1):
        raise StencilforgeError(f"axis must be 0 (y) or 1 (x), got {axis}")
    check_shape(shape, accuracy // 2 + 1)
    spacing = tuple(1.0 / (n - 1) for n in shape)
    need = operator(axis, spacing[axis], accuracy).min_length
    if any(n < need for n in shape):
        raise StencilforgeError(f"shape {shape} is too small for accuracy {accuracy}: each axis needs {need} points")
    grid = Grid(shape, spacing=spacing, origin=(0.0, 0.0), dtype=dtype)
    y, x = Lattice(shape, spacing, parse_dtype(dtype), 0, (0.0, 0.0)).mesh()
    u, d1, d2 = (Field(name, grid, levels=1) for name in ("u", "d1", "d2"))
    along = grid.axis_names[axis]
    gx, gy = grid.x, grid.y
    if axis == 1:
        e1 = 2 * math.pi * cos(2 * math.pi * gx + 0.3) * cos(math.pi * gy - 0.2)
        e2 = -4 * math.pi**2 * sin(2 * math.pi * gx + 0.3) * cos(math.pi * gy - 0.2)
    else:
        e1 = -math.pi * sin(2 * math.pi * gx + 0.3) * sin(math.pi * gy - 0.2)
        e2 = -math.pi**2 * sin(2 * math.pi * gx + 0.3) * cos(math.pi * gy - 0.2)
    made = Problem(
        [Eq(d1, d(u, along, 1, accuracy, closure="one-sided")), Eq(d2, d(u, along, 2, accuracy, closure="one-sided"))],
        initial={u: test_function(x, y)}, exact={d1: e1, d2: e2}, steps=10, name="derivatives",
    )
    return made, {"axis": axis, "accuracy": accuracy}
