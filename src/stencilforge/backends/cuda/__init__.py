"""The cuda backend: CUDA C generated from the plan, compiled with NVRTC, run on CuPy arrays.

`choose` and the kernels' source need neither a GPU nor CuPy (show-kernel, CI).
"""

from __future__ import annotations

from .backend import CudaBackend, check_fits
from .tune import choose

__all__ = ["CudaBackend", "check_fits", "choose"]
