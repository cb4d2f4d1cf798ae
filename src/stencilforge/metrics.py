"""Throughput figures every run and benchmark reports, from compulsory traffic only; where a field went non-finite."""

from __future__ import annotations

import math
from typing import Mapping

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


def error_summary(per_field: Mapping[str, dict]) -> dict:
    """A summary's error keys from each field's `error_norms`: `errors` (field -> max-norm error) and, where a
    field has an exact solution, `error` (the largest of each norm over the fields, and each field's where there
    are several)."""
    out: dict = {"errors": {name: e["max_abs"] for name, e in per_field.items()}}
    if per_field:
        out["error"] = {"max_abs": max(e["max_abs"] for e in per_field.values()),
                        "rel_l2": max(e["rel_l2"] for e in per_field.values())}
        if len(per_field) > 1:
            out["error"]["fields"] = dict(per_field)
    return out


def where_nonfinite(arrays: Mapping, interior: tuple, xp, dirichlet: set[str]) -> dict[str, str]:
    """name -> "interior", "walls" or "interior and walls" for each padded array holding NaN or Inf there; only the
    walls of fields in `dirichlet` count (other ghost cells copy the interior)."""
    out = {}
    for name, arr in arrays.items():
        inside = not bool(xp.isfinite(arr[interior]).all())
        outside = False
        if name in dirichlet:
            ok = xp.isfinite(arr)
            ok[interior] = True
            outside = not bool(ok.all())
        parts = [part for part, bad in (("interior", inside), ("walls", outside)) if bad]
        if parts:
            out[name] = " and ".join(parts)
    return out
