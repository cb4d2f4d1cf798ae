"""Matrix-free first and second derivatives along one axis of a 2D field.

accuracy=2 is the classic operator: central interior, one-sided first-order
closures on the end rows. accuracy=4 uses radius-2 central interior weights and
closures derived by Fornberg on one-sided nodes wide enough to keep 4th order
at the boundary. `fused` returns both derivatives from one pass over the input.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..errors import StencilforgeError
from ..grid import Grid, check_shape, parse_dtype
from ..plan import AxisOperator, Derivative1D, Setup
from ..stencil import central_weights, fornberg_weights

DEFAULT_SHAPE = (1000, 1000)
PARAMS = ("axis", "accuracy")
ACCURACIES = (2, 4)
SEED_CLOSURES = {  # accuracy 2, first order at the ends: (left row 0, right row n-1) for each derivative order
    1: (((0, Fraction(-1)), (1, Fraction(1))), ((-1, Fraction(-1)), (0, Fraction(1)))),
    2: (((0, Fraction(1)), (1, Fraction(-2)), (2, Fraction(1))), ((-2, Fraction(1)), (-1, Fraction(-2)), (0, Fraction(1)))),
}


def one_sided_rows(order: int, accuracy: int, rows: int, side: str) -> tuple:
    """Closure rows k = 0..rows-1 on `order + accuracy` nodes at the end of the axis."""
    width = order + accuracy
    out = []
    for k in range(rows):
        offsets = [j - k for j in range(width)]
        if side == "right":
            offsets = [-o for o in offsets]
        weights = fornberg_weights(order, 0, offsets)
        out.append(tuple(sorted((o, w) for o, w in zip(offsets, weights) if w != 0)))
    return tuple(out)


def derivative(order: int, accuracy: int, h: float, name: str) -> Derivative1D:
    if accuracy not in ACCURACIES:
        raise StencilforgeError(f"accuracy must be one of {ACCURACIES}, got {accuracy}")
    radius = accuracy // 2
    interior = tuple(sorted(central_weights(order, radius).items()))
    left: tuple
    right: tuple
    if accuracy == 2:
        left, right = ((row,) for row in SEED_CLOSURES[order])
    else:
        left = one_sided_rows(order, accuracy, radius, "left")
        right = one_sided_rows(order, accuracy, radius, "right")
    return Derivative1D(name, interior, left, right, 1.0 / h**order)


def operator(axis: int, h: float, accuracy: int = 2, orders=(1, 2)) -> AxisOperator:
    if axis not in (0, 1):
        raise StencilforgeError(f"axis must be 0 (y) or 1 (x), got {axis}")
    return AxisOperator("u", axis, 2, tuple(derivative(o, accuracy, h, f"d{o}") for o in orders))


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


def build(shape=DEFAULT_SHAPE, dtype="float64", axis: int = 1, accuracy: int = 2) -> Setup:
    shape = tuple(shape)
    if len(shape) != 2:
        raise StencilforgeError(f"derivatives needs a 2D shape, got {shape}")
    if axis not in (0, 1):
        raise StencilforgeError(f"axis must be 0 (y) or 1 (x), got {axis}")
    check_shape(shape, accuracy // 2 + 1)
    spacing = tuple(1.0 / (n - 1) for n in shape)
    grid = Grid(shape, spacing, parse_dtype(dtype), 0, (0.0, 0.0))
    op = operator(axis, spacing[axis], accuracy)
    if any(n < op.min_length for n in shape):
        raise StencilforgeError(f"shape {shape} is too small for accuracy {accuracy}: each axis needs {op.min_length} points")
    y, x = grid.mesh()
    u = test_function(x, y).astype(grid.dtype)
    return Setup(
        name="derivatives",
        grid=grid,
        fields={"u": u, "d1": np.full(shape, np.nan, grid.dtype), "d2": np.full(shape, np.nan, grid.dtype)},
        dt=0.0,
        default_steps=10,
        solution="d1",
        operator=op,
        exact=lambda t: exact_derivatives(x, y, axis),
        params={"axis": axis, "accuracy": accuracy},
    )
