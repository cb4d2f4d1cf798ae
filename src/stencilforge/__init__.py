"""stencilforge: structured-grid finite-difference solvers at the memory-bandwidth limit."""

from typing import TYPE_CHECKING

from .api import apply, derivatives, solve
from .boundary import Dirichlet, Neumann, Periodic
from .errors import StencilforgeError
from .ir.nodes import (
    Constant,
    Eq,
    Field,
    Grid,
    Iterate,
    Solve,
    absolute,
    cos,
    exp,
    log,
    maximum,
    minimum,
    norm,
    sin,
    sqrt,
    tanh,
    total,
    where,
)
from .ir.operators import apply_stencil as stencil, d, div_grad, laplacian, laplacian9, upwind
from .points import Traces
from .problem import Problem, Receiver, Source
from .runner import Result, run
from .simulation import Simulation
from .stencil import Stencil
from .timeloop import StopRequest
from .version import __version__

if TYPE_CHECKING:  # imported on first use, by __getattr__ below
    from .solvers import PoissonResult, poisson


__all__ = [
    "Constant", "Dirichlet", "Eq", "Field", "Grid", "Iterate", "Neumann", "Periodic", "PoissonResult", "Problem", "Receiver", "Result",
    "Simulation", "Solve", "Source", "Stencil", "StencilforgeError", "StopRequest", "Traces", "absolute", "apply", "cos", "d",
    "derivatives", "div_grad", "exp", "laplacian", "laplacian9", "log", "maximum", "minimum", "norm", "poisson", "run", "sin",
    "solve", "sqrt", "stencil", "tanh", "total", "upwind", "where", "__version__",
]


def __getattr__(name: str):
    """The multigrid Poisson solver is imported when first used: a run of equations does not need it."""
    if name in ("PoissonResult", "poisson"):
        from . import solvers

        return getattr(solvers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
