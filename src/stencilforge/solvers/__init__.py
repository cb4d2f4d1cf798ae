"""Solvers that run to a tolerance rather than for a number of steps: multigrid for Poisson problems."""

from .poisson import PoissonResult, poisson

__all__ = ["PoissonResult", "poisson"]
