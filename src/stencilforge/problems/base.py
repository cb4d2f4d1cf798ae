"""What a problem module hands the time loop: fields, the step plan, boundaries, exact solution."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..boundary import Boundary
from ..errors import StencilforgeError
from ..grid import Grid
from ..plan import AxisOperator, Sweep


@dataclass(frozen=True)
class PointSource:
    """Adds scale * wavelet(t) to one cell of a field after each sweep."""

    field: str
    index: tuple[int, ...]
    wavelet: Callable[[float], float]
    scale: float


@dataclass
class Setup:
    """One problem instantiated on one grid: everything a backend-agnostic time loop needs."""

    name: str
    grid: Grid
    fields: dict[str, np.ndarray]
    dt: float
    default_steps: int
    solution: str
    sweep: Sweep | None = None
    operator: AxisOperator | None = None
    swap: tuple[str, str] | None = None
    boundaries: dict[str, Boundary] = field(default_factory=dict)
    exact: Callable[[float], dict[str, np.ndarray]] | None = None
    residual: Sweep | None = None
    rhs_norm: float = 1.0
    default_tol: float | None = None
    sources: tuple[PointSource, ...] = ()
    params: dict = field(default_factory=dict)
    t0: float = 0.0

    @property
    def bytes_per_cell(self) -> int:
        plan = self.sweep or self.operator
        return plan.bytes_per_cell(self.grid.dtype.itemsize)

    @property
    def flops_per_cell(self) -> int:
        return (self.sweep or self.operator).flops_per_cell()


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
