"""The checks the named problems' builders share: a stable time step, positive parameters."""

from __future__ import annotations

import numpy as np

from ..errors import StencilforgeError


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


def positive(name: str, value, allow_zero: bool = False):
    if value is None or not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise StencilforgeError(f"{name} must be a positive number, got {value}")
    return float(value)
