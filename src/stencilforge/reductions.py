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
LOOP_VALUES = 1 << 22  # host sums of this many values on take the compiled loop (benchmarks/results/cpu-exact-sums-2026-12-02.json)
LOW_BITS = 26  # mantissas split in two so int64 bin sums cannot overflow (2**36 values per bin)


def exact_integer_sum(values) -> int:
    """sum(values) * 2**SCALE_BITS as an exact Python integer (values finite, any float dtype)."""
    total = _host_integer_sum(values, square=False)
    assert total is not None, "exact_integer_sum takes finite values"
    return total


@functools.lru_cache(maxsize=None)
def _host_bins():
    """A compiled loop adding each value's signed mantissa halves into per-exponent bins, read from its bits (one
    pass, where NumPy's frexp, shifts and add.at made seven over the array); float32 values widened to float64 and
    squared first with `square`. False at the first value (or square) that is not finite."""
    import numba

    half = np.int64((1 << LOW_BITS) - 1)

    @numba.njit(cache=True, nogil=True)
    def bins(v, square, high, low):
        word = np.empty(1, dtype=np.float64)
        bits = word.view(np.uint64)
        for i in range(v.size):
            x = np.float64(v[i])
            if square:
                x = x * x
            word[0] = x
            b = bits[0]
            biased = np.int64((b >> np.uint64(52)) & np.uint64(0x7FF))
            if biased == 0x7FF:
                return False
            m = np.int64(b & np.uint64(0xFFFFFFFFFFFFF))
            if biased == 0:  # zero, or subnormal: m * 2**-1074
                if m == 0:
                    continue
                e = np.int64(-1021)
            else:  # (2**52 + m) * 2**(biased - 1075)
                m += np.int64(1) << np.int64(52)
                e = biased - np.int64(1022)
            if b >> np.uint64(63):
                m = -m
            k = e - np.int64(MIN_EXPONENT)
            high[k] += m >> np.int64(LOW_BITS)
            low[k] += m & half
        return True

    return bins


def array_bins(v: np.ndarray, square: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """`_host_bins`' bins by NumPy's array operations (frexp, shifts, add.at), or None where a term is not finite."""
    if square:
        with np.errstate(over="ignore"):
            v = v * v
    if not np.isfinite(v).all():
        return None
    mant, exp = np.frexp(v)
    m = np.ldexp(mant, MANTISSA_BITS).astype(np.int64)
    shift = (exp - MIN_EXPONENT).astype(np.intp)
    high = np.zeros(EXPONENT_BINS, dtype=np.int64)
    low = np.zeros(EXPONENT_BINS, dtype=np.int64)
    np.add.at(high, shift, m >> LOW_BITS)
    np.add.at(low, shift, m & ((1 << LOW_BITS) - 1))
    return high, low


def loop_bins(v: np.ndarray, square: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """The same bins by the compiled loop, or None where a term is not finite."""
    high = np.zeros(EXPONENT_BINS, dtype=np.int64)
    low = np.zeros(EXPONENT_BINS, dtype=np.int64)
    return (high, low) if _host_bins()(v, square, high, low) else None


def _host_integer_sum(values, square: bool) -> int | None:
    """sum(values) (or of their squares in float64) * 2**SCALE_BITS, exactly; None where a term is not finite. Arrays
    of LOOP_VALUES values on take the compiled loop, which must first earn back its loading in a process (and
    Numba's import); smaller ones NumPy's array operations."""
    v = np.asarray(values)
    if v.dtype not in (np.float32, np.float64) or v.size < LOOP_VALUES:
        v = v.astype(np.float64, copy=False)
    v = np.ascontiguousarray(v).ravel()  # the loop reads float32 as it is, widening each value
    if v.size == 0:
        return 0
    bins = (loop_bins if v.size >= LOOP_VALUES else array_bins)(v, square)
    return fold_bins(*bins) if bins is not None else None


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
    total = _host_integer_sum(values, square=False)
    return total if total is not None else float(np.sum(np.asarray(values, dtype=np.float64)))


def squares_part(values) -> int | float:
    """`local_part` of the squares of `values` (widened to float64 first), with no array of them."""
    if hasattr(values, "__cuda_array_interface__"):
        import cupy

        exact = device_squares_sum(values, cupy)
        if exact is not None:
            return exact
        v = values.astype(cupy.float64)
        return float(cupy.sum(v * v))
    total = _host_integer_sum(values, square=True)
    if total is not None:
        return total
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):  # a square past float64's range is not finite: summed plainly
        return float(np.sum(v * v))


def combine(parts) -> float:
    """The correctly rounded total of the parts of every rank; non-finite parts propagate."""
    non_finite = [p for p in parts if isinstance(p, float)]
    if non_finite:
        return float(sum(non_finite))
    return integer_to_float(sum(parts))


def global_sum(comm, values) -> float:
    """Correctly rounded sum of every rank's values: the same bits for any decomposition."""
    return combine(comm.allgather(local_part(values)))


def global_squares_sum(comm, values) -> float:
    """`global_sum` of the squares of `values` in float64."""
    return combine(comm.allgather(squares_part(values)))


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


@functools.lru_cache(maxsize=None)
def _squares_bins_kernel(cp):
    """`_bins_kernel` of x * x, x widened to float64 (any layout: a field's interior view), and a flag set by a
    square that is not finite."""
    return cp.ElementwiseKernel(
        "T x",
        "raw uint64 bins, raw int32 nonfinite",
        f"""
        const double v = __dmul_rn((double)x, (double)x);
        if (!isfinite(v)) {{
            nonfinite[0] = 1;
        }} else if (v != 0.0) {{
            int e;
            double frac = frexp(v, &e);
            unsigned long long m = (unsigned long long)ldexp(frac, 53);
            long long lane = (long long)(i % {SUM_LANES});
            long long base = lane * 4 * {EXPONENT_BINS} + (e - ({MIN_EXPONENT}));
            atomicAdd(&bins[base], m >> {LOW_BITS});
            atomicAdd(&bins[base + {EXPONENT_BINS}], m & ((1ULL << {LOW_BITS}) - 1ULL));
        }}
        """,
        "stencilforge_exact_squares_bins",
    )


def device_squares_sum(values, cp) -> int | None:
    """sum(float64(values)**2) * 2**SCALE_BITS as an exact Python integer, binned on the device in one pass over
    `values`; None where a square is not finite."""
    if values.size == 0:
        return 0
    bins = cp.zeros(SUM_LANES * 2 * 2 * EXPONENT_BINS, dtype=cp.uint64)
    nonfinite = cp.zeros(1, dtype=cp.int32)
    _squares_bins_kernel(cp)(values, bins, nonfinite)
    per = bins.reshape(SUM_LANES, 2, 2, EXPONENT_BINS).sum(axis=0, dtype=cp.uint64)
    if int(nonfinite.get()[0]):
        return None
    per = per.get()
    return fold_bins(per[0, 0], per[0, 1])


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
