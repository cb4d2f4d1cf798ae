"""The problem registry: name -> builder taking (shape, dtype, **params)."""

from __future__ import annotations

from functools import partial
from typing import Callable

from ..errors import StencilforgeError
from . import derivatives, heat, poisson2d, poisson3d, wave3d
from .base import PointSource, Setup

BUILDERS: dict[str, tuple[Callable[..., Setup], tuple[str, ...]]] = {
    "poisson2d": (poisson2d.build, poisson2d.PARAMS),
    "poisson3d": (poisson3d.build, poisson3d.PARAMS),
    "heat2d": (partial(heat.build, 2), heat.PARAMS),
    "heat3d": (partial(heat.build, 3), heat.PARAMS),
    "wave3d": (wave3d.build, wave3d.PARAMS),
    "derivatives": (derivatives.build, derivatives.PARAMS),
}
NAMES = tuple(BUILDERS)
POISSON = ("poisson2d", "poisson3d")  # the problems `run --method multigrid` solves


ON_DEVICE = ("heat2d", "heat3d", "poisson2d", "wave3d")  # written with the API: fields can start where they live


def build(name: str, shape=None, dtype=None, xp=None, **params) -> Setup:
    """Instantiate a problem; parameters that do not apply to it are refused. With `xp` (CuPy) a
    problem written with the equation API evaluates its initial fields on the device."""
    if name not in BUILDERS:
        raise StencilforgeError(f"unknown problem {name!r}: choose one of {', '.join(NAMES)}")
    builder, allowed = BUILDERS[name]
    extra = sorted(k for k, v in params.items() if v is not None and k not in allowed)
    if extra:
        raise StencilforgeError(f"{name} does not take {', '.join('--' + k for k in extra)}")
    given = {k: v for k, v in params.items() if v is not None}
    if dtype is not None:
        given["dtype"] = dtype
    if shape is not None:
        given["shape"] = tuple(int(n) for n in shape)
    if xp is not None and name in ON_DEVICE:
        given["xp"] = xp
    return builder(**given)


__all__ = ["BUILDERS", "NAMES", "PointSource", "Setup", "build"]
