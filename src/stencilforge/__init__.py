"""stencilforge: structured-grid finite-difference solvers at the memory-bandwidth limit."""

from .api import PoissonResult, apply, derivatives, poisson, solve
from .errors import StencilforgeError
from .stencil import Stencil

__version__ = "0.1.0"
__all__ = ["PoissonResult", "Stencil", "StencilforgeError", "apply", "derivatives", "poisson", "solve", "__version__"]
