"""Throughput figures every run and benchmark reports, from compulsory traffic only."""

from __future__ import annotations

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


def error_norms(numeric: np.ndarray, exact: np.ndarray) -> dict:
    diff = np.asarray(numeric, dtype=np.float64) - exact
    ref = float(np.linalg.norm(exact))
    return {
        "max_abs": float(np.max(np.abs(diff))),
        "rel_l2": float(np.linalg.norm(diff) / ref) if ref > 0 else float(np.linalg.norm(diff)),
    }
