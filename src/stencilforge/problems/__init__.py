"""The problem registry: name -> the module whose build(*args, shape, dtype, **params) makes it.

A problem's module is imported when it is built: a run of one problem does not import the
others, and a run of a user's own equations imports none.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import StencilforgeError
from ..plan import PointSource, Setup
from ..problem import Problem

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
OPERATORS = ("derivatives",)  # named, but operators applied to an array, not problems of equations
JACOBI_TOL = 1e-6  # where a Poisson problem's Jacobi run is given neither steps nor a tolerance


ON_DEVICE = ("heat2d", "heat3d", "poisson2d", "wave3d")  # written with the API: fields can start where they live


def _module(name: str) -> ModuleType:
    if name not in MODULES:
        raise StencilforgeError(f"unknown problem {name!r}: choose one of {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{MODULES[name][0]}")


def parameters(name: str) -> tuple[str, ...]:
    """The parameters a named problem takes besides shape and dtype."""
    return _module(name).PARAMS


def problem(name: str, shape=None, dtype=None, **params) -> tuple[Problem, dict]:
    """(the named problem as an `sf.Problem`, what `sf.run` steps, and the parameters that built it, which its files
    record); parameters that do not apply to it are refused. The derivative operators are not one (`build`)."""
    module = _module(name)
    if name in OPERATORS:
        raise StencilforgeError(f"{name} is an operator, not a problem of equations")
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


def build(name: str, shape=None, dtype=None, xp=None, **params) -> Setup:
    """Instantiate a problem; parameters that do not apply to it are refused. With `xp` (CuPy) a
    problem written with the equation API evaluates its initial fields on the device."""
    module = _module(name)
    given = _given(name, module, shape, dtype, params)
    if xp is not None and name in ON_DEVICE:
        given["xp"] = xp
    return module.build(*MODULES[name][1], **given)


__all__ = ["MODULES", "NAMES", "PointSource", "Setup", "build", "parameters", "problem"]
