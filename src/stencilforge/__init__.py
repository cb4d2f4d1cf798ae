"""stencilforge: structured-grid finite-difference solvers at the memory-bandwidth limit."""

from .api import apply, derivatives, solve
from .errors import StencilforgeError
from .stencil import Stencil

__version__ = "0.1.0"
__all__ = ["Stencil", "StencilforgeError", "apply", "derivatives", "solve", "__version__"]
