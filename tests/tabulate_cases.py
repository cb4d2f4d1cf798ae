"""Expressions of coordinates, t and constants that initial values and exact solutions are made of, on
1D-3D lattices (some of them a rank's block, whose coordinates start past the global origin)."""

from __future__ import annotations

import functools
import operator

import numpy as np

import stencilforge as sf
from stencilforge.distributed.decomposition import BlockGrid
from stencilforge.grid import Grid


def expressions(grid: sf.Grid):
    """(label, expression) covering every node an expression of coordinates can hold."""
    c = grid.coordinates
    x = c[-1]
    k = sf.Constant("k", 3.0)
    r2 = sum((ci - 0.5) ** 2 for ci in c)
    return [
        ("product of sines", functools.reduce(operator.mul, [sf.sin(np.pi * ci) for ci in c])),
        ("gaussian at t", sf.exp(-r2 / (0.01 + grid.t)) * sf.cos(k * x)),
        ("powers and division", (x ** 3 - 2 * x ** -2) / (1 + r2)),
        ("where, min, max, abs", sf.where(x < 0.3, sf.minimum(x, 0.2), sf.maximum(sf.absolute(x - 0.7), k * 0.01))),
        ("sqrt, log, tanh, negation", -sf.sqrt(r2 + 1) + sf.log(1 + x * x) * sf.tanh(k * (x - 0.5))),
        ("a constant alone", k * 1.0),
    ]


def lattices(dtype):
    """Lattices of 1-3 dimensions with awkward shapes and ghost widths, one of them a rank's block."""
    return [
        Grid((37,), (1 / 38,), np.dtype(dtype), 1, (1 / 38,)),
        Grid((13, 29), (0.07, 1 / 30), np.dtype(dtype), 2, (0.1, -0.3)),
        Grid((5, 7, 11), (0.2, 0.125, 0.09), np.dtype(dtype), 3, (0.0, 0.1, 0.2)),
        BlockGrid((6, 5, 9), (0.05, 0.06, 0.07), np.dtype(dtype), 2, (0.05, 0.06, 0.07), start=(12, 0, 27)),
    ]


def problem_grid(lattice: Grid) -> sf.Grid:
    """A public grid of the lattice's dimension, to build expressions with."""
    return sf.Grid(lattice.shape, spacing=lattice.spacing, dtype=lattice.dtype.name)
