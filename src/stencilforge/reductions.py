"""Global reductions whose results do not depend on how the grid is split.

Floating-point addition is not associative, so summing per-rank partial sums
(in any fixed rank order) changes the last bits with the rank count, and a
stopping test such as `residual < tol` could then stop at a different
iteration. Sums here are exact instead: every float64 value is an integer
mantissa times a power of two, so each rank adds its values into Python
integers on a common scale, the integers are allgathered and added exactly,
and the total is rounded once. The result equals math.fsum of all values on
one process, for any split. Maxima and logical ands are exact by nature.
"""

from __future__ import annotations

import functools
import math

import numpy as np

MANTISSA_BITS = 53
MIN_EXPONENT = -1073  # np.frexp exponent of the smallest subnormal, 2**-1074
SCALE_BITS = MANTISSA_BITS - MIN_EXPONENT  # value = integer / 2**SCALE_BITS
LOW_BITS = 26  # mantissas split in two so int64 bin sums cannot overflow (2**36 values per bin)


def exact_integer_sum(values) -> int:
    """sum(values) * 2**SCALE_BITS as an exact Python integer (values finite, any float dtype)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        return 0
    mant, exp = np.frexp(v)
    m = np.ldexp(mant, MANTISSA_BITS).astype(np.int64)
    shift = (exp - MIN_EXPONENT).astype(np.intp)
    nbins = int(shift.max()) + 1
    high = np.zeros(nbins, dtype=np.int64)
    low = np.zeros(nbins, dtype=np.int64)
    np.add.at(high, shift, m >> LOW_BITS)
    np.add.at(low, shift, m & ((1 << LOW_BITS) - 1))
    return fold_bins(high, low)


def fold_bins(high, low) -> int:
    """The exact integer held by per-exponent bins of mantissa halves (bin k weighs 2**k)."""
    total = 0
    for k in np.flatnonzero(high | low):
        total += ((int(high[k]) << LOW_BITS) + int(low[k])) << int(k)
    return total


def integer_to_float(total: int) -> float:
    """total / 2**SCALE_BITS, correctly rounded (Python's int true division rounds once)."""
    try:
        return total / (1 << SCALE_BITS)
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def local_part(values) -> int | float:
    """A rank's contribution: its exact integer sum, or its plain sum when it holds NaN or Inf.

    Device (CuPy) values are binned on the device: only the bin totals come to the host.
    """
    if hasattr(values, "__cuda_array_interface__"):
        import cupy

        if bool(cupy.isfinite(values).all()):
            return device_integer_sum(values, cupy)
        return float(cupy.sum(values, dtype=cupy.float64))
    v = np.asarray(values, dtype=np.float64)
    if bool(np.isfinite(v).all()):
        return exact_integer_sum(v)
    return float(np.sum(v))


def combine(parts) -> float:
    """The correctly rounded total of the parts of every rank; non-finite parts propagate."""
    non_finite = [p for p in parts if isinstance(p, float)]
    if non_finite:
        return float(sum(non_finite))
    return integer_to_float(sum(parts))


def global_sum(comm, values) -> float:
    """Correctly rounded sum of every rank's values: the same bits for any decomposition."""
    return combine(comm.allgather(local_part(values)))


def global_max(comm, value: float) -> float:
    from mpi4py import MPI

    return comm.allreduce(value, op=MPI.MAX)


def all_true(comm, flag: bool) -> bool:
    from mpi4py import MPI

    return bool(comm.allreduce(bool(flag), op=MPI.LAND))


# ------------------------------------------------------------------ exact sums on the device

EXPONENT_BINS = 1024 + 1 - MIN_EXPONENT + 1  # frexp exponents run up to 1024
SUM_LANES = 256  # copies of the bins, so atomics on one exponent are spread out


@functools.lru_cache(maxsize=None)
def _bins_kernel(cp):
    """Adds |mantissa| halves of every float64 into per-(lane, sign, half, exponent) unsigned bins."""
    return cp.ElementwiseKernel(
        "float64 v",
        "raw uint64 bins",
        f"""
        if (v != 0.0) {{
            int e;
            double frac = frexp(fabs(v), &e);
            unsigned long long m = (unsigned long long)ldexp(frac, 53);
            long long lane = (long long)(i % {SUM_LANES});
            long long base = ((lane * 2 + (v < 0.0)) * 2) * {EXPONENT_BINS} + (e - ({MIN_EXPONENT}));
            atomicAdd(&bins[base], m >> {LOW_BITS});
            atomicAdd(&bins[base + {EXPONENT_BINS}], m & ((1ULL << {LOW_BITS}) - 1ULL));
        }}
        """,
        "stencilforge_exact_sum_bins",
    )


def device_integer_sum(values, cp) -> int:
    """sum(values) * 2**SCALE_BITS as an exact Python integer, binned on the device (values finite).

    Only the bin totals (4 x EXPONENT_BINS integers) come to the host; the
    result is the same integer exact_integer_sum gives on the host.
    """
    v = cp.ascontiguousarray(values, dtype=cp.float64).ravel()
    if v.size == 0:
        return 0
    bins = cp.zeros(SUM_LANES * 2 * 2 * EXPONENT_BINS, dtype=cp.uint64)
    _bins_kernel(cp)(v, bins)
    per = bins.reshape(SUM_LANES, 2, 2, EXPONENT_BINS).sum(axis=0, dtype=cp.uint64).get()
    return fold_bins(per[0, 0], per[0, 1]) - fold_bins(per[1, 0], per[1, 1])
