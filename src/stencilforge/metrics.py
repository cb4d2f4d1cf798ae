"""Throughput figures every run and benchmark reports, from compulsory traffic only."""

from __future__ import annotations

import math

import numpy as np


def throughput(cells: int, steps: int, seconds: float, bytes_per_cell: int, flops_per_cell: int) -> dict:
    """GCell/s, T_eff (GB/s of compulsory traffic) and GFLOP/s for `steps` sweeps of `cells`."""
    if seconds <= 0 or steps <= 0:
        return {"gcells_per_s": None, "teff_gbps": None, "gflops": None}
    rate = cells * steps / seconds
    return {
        "gcells_per_s": rate / 1e9,
        "teff_gbps": rate * bytes_per_cell / 1e9,
        "gflops": rate * flops_per_cell / 1e9,
    }


def error_norms(numeric, exact, xp=np) -> dict:
    """Max and relative L2 errors in float64, reduced with `xp` where both arrays live."""
    diff = xp.subtract(numeric, exact, dtype=np.float64)  # the one temporary of the grid's size
    flat = xp.ravel(exact)
    ref = math.sqrt(float(xp.vdot(flat, flat)))
    l2 = math.sqrt(float(xp.vdot(diff.ravel(), diff.ravel())))
    return {"max_abs": float(xp.max(xp.abs(diff, out=diff))), "rel_l2": l2 / ref if ref > 0 else l2}
