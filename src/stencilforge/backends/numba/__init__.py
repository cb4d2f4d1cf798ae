"""The numba backend: multi-threaded CPU kernels generated from the plan and compiled by Numba."""

from __future__ import annotations

from .backend import NumbaBackend

__all__ = ["NumbaBackend"]
