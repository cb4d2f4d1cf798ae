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

        exact = device_bins(values, cupy, square=False)
        return exact if exact is not None else float(cupy.sum(values, dtype=cupy.float64))
    total = _host_integer_sum(values, square=False)
    return total if total is not None else float(np.sum(np.asarray(values, dtype=np.float64)))


def squares_part(values) -> int | float:
    """`local_part` of the squares of `values` (widened to float64 first), with no array of them."""
    if hasattr(values, "__cuda_array_interface__"):
        import cupy

        exact = device_bins(values, cupy, square=True)
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
LIMBS = 6  # 32-bit limbs of a thread's fixed-point accumulator: 192 bits below the largest value's top bit
CHUNK = 4096  # values of one row a block takes at a time: a long row (a 1D array) spreads over every block
BLOCK = 512


def window_source(ctype: str) -> str:
    """CUDA source of `sf_exact_window` for values of `ctype` (float or double).

    Exact sums in one pass over the values, in any row layout, with no atomic per value. A first pass finds the
    largest magnitude; every value then lies on a common fixed-point scale whose 192 bits (`LIMBS` limbs of 32
    bits, each held in an int64 so that no carry is propagated) reach from the largest value's top bit down to the
    window's `bottom` bit. A thread adds each value's mantissa, split over the limbs, into its registers; a block
    adds its threads' limbs by shuffles and writes them out, and the host adds the blocks' limbs as Python
    integers. Values below the window (a range wider than 2**139) go to per-exponent bins by global atomics, as
    the host's bins split them: rare, and exact too. A limb gains less than 2**32 per value, so a block's limbs
    cannot overflow below 2**31 values."""
    mask = (1 << LOW_BITS) - 1
    limbs = "\n".join(f"""                {{
                    const int pos = {32 * k} - shift;  /* the mantissa bit at this limb's bit 0 */
                    const unsigned long long piece =
                        (pos >= 0 ? (pos < 64 ? um >> pos : 0ULL) : (-pos < 64 ? um << -pos : 0ULL)) & 0xFFFFFFFFULL;
                    acc{k} += neg ? -(long long)piece : (long long)piece;
                }}""" for k in range(LIMBS))
    sums = "\n".join(f"    acc{k} = sf_block_sum(acc{k}, part, {k});" for k in range(LIMBS))
    stores = "\n".join(f"        out[blockIdx.x * {LIMBS} + {k}] = acc{k};" for k in range(LIMBS))
    return f"""
    #define SF_ROWS_LOOP \\
        const long long chunks = (n2 + {CHUNK} - 1) / {CHUNK}; \\
        for (long long item = blockIdx.x; item < items; item += gridDim.x) {{ \\
            const long long r = item / chunks, start = (item % chunks) * {CHUNK}; \\
            const long long stop = min(start + {CHUNK}, n2); \\
            const {ctype}* row = v + (r / n1) * s0 + (r % n1) * s1; \\
            for (long long j = start + threadIdx.x; j < stop; j += blockDim.x)

    extern "C" __global__ void sf_abs_max(const {ctype}* __restrict__ v, const long long n1, const long long n2,
                                          const long long s0, const long long s1, const long long items,
                                          unsigned long long* __restrict__ top) {{
        /* the bits of |x| order as |x| does (NaN above Inf), so an integer max finds the largest magnitude */
        unsigned long long m = 0;
        SF_ROWS_LOOP {{
            m = max(m, (unsigned long long)__double_as_longlong(fabs((double)row[j])));
        }}}}
        for (int off = 16; off > 0; off >>= 1) m = max(m, __shfl_down_sync(0xFFFFFFFFu, m, off));
        if ((threadIdx.x & 31) == 0) atomicMax(top, m);
    }}

    __device__ __forceinline__ long long sf_block_sum(long long x, long long (*part)[32], int k) {{
        for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xFFFFFFFFu, x, off);
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        if (lane == 0) part[k][warp] = x;
        __syncthreads();
        x = 0;
        if (warp == 0) {{
            x = lane < (int)(blockDim.x >> 5) ? part[k][lane] : 0;
            for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xFFFFFFFFu, x, off);
        }}
        return x;
    }}

    extern "C" __global__ void sf_exact_window(const {ctype}* __restrict__ v, const long long n1, const long long n2,
                                               const long long s0, const long long s1, const long long items,
                                               const int square, const int bottom, long long* __restrict__ out,
                                               unsigned long long* __restrict__ bins, int* __restrict__ nonfinite) {{
        __shared__ long long part[{LIMBS}][32];
        {" ".join(f"long long acc{k} = 0;" for k in range(LIMBS))}
        int bad = 0;
        SF_ROWS_LOOP {{
                double x = (double)row[j];
                if (square) x = __dmul_rn(x, x);
                const unsigned long long b = (unsigned long long)__double_as_longlong(x);
                const int biased = (int)((b >> 52) & 0x7FF);
                if (biased == 0x7FF) {{ bad = 1; continue; }}
                unsigned long long um = b & 0xFFFFFFFFFFFFFULL;
                int q;  /* x = +-um * 2**q */
                if (biased == 0) {{
                    if (um == 0) continue;
                    q = -1074;
                }} else {{
                    um += 1ULL << 52;
                    q = biased - 1075;
                }}
                const bool neg = (b >> 63) != 0;
                if (q < bottom) {{  /* below the window: the bins of its exponent */
                    const long long m = neg ? -(long long)um : (long long)um;
                    const int k = q + 53 - ({MIN_EXPONENT});
                    atomicAdd(&bins[k], (unsigned long long)(m >> {LOW_BITS}));
                    atomicAdd(&bins[{EXPONENT_BINS} + k], (unsigned long long)(m & {mask}LL));
                    continue;
                }}
                const int shift = q - bottom;
{limbs}
            }}
        }}
        if (bad) nonfinite[0] = 1;
{sums}
        if (threadIdx.x == 0) {{
{stores}
        }}
    }}
    """


@functools.lru_cache(maxsize=None)
def _window_kernels(cp, ctype: str):
    """(sf_abs_max, sf_exact_window) for values of `ctype`."""
    from .backends.cuda.compile import device_arch, load_module

    module = load_module(cp, window_source(ctype), device_arch(cp), f"the exact sums ({ctype})")
    return module.get_function("sf_abs_max"), module.get_function("sf_exact_window")


def _rows(values, cp):
    """(values, n1, n2, s0, s1): values as rows of n2 adjacent elements, row r at (r // n1) * s0 + (r % n1) * s1
    elements (a copy only where the layout is not such rows, or the dtype not float32/64)."""
    if values.dtype not in (cp.float32, cp.float64):
        values = values.astype(cp.float64)
    item = values.itemsize
    if values.ndim > 3 or (values.ndim and values.strides[-1] != item) or any(s % item for s in values.strides):
        values = cp.ascontiguousarray(values)
    shape = (1,) * (3 - values.ndim) + values.shape
    strides = (0,) * (3 - values.ndim) + tuple(s // item for s in values.strides)
    return values, shape[1], shape[2], strides[0], strides[1]


def device_bins(values, cp, square: bool) -> int | None:
    """sum(values) (or of their float64 squares) * 2**SCALE_BITS as an exact Python integer, on the device
    (`window_source`): only the blocks' limbs and the bins come to the host; None where a term is not finite."""
    if values.size == 0:
        return 0
    values, n1, n2, s0, s1 = _rows(values, cp)
    items = values.size // n2 * -(-n2 // CHUNK)
    blocks = min(items, 4 * cp.cuda.Device().attributes["MultiProcessorCount"])
    rows = (values, np.int64(n1), np.int64(n2), np.int64(s0), np.int64(s1), np.int64(items))
    abs_max, window_sum = _window_kernels(cp, "double" if values.dtype == cp.float64 else "float")
    top_bits = cp.zeros(1, dtype=cp.uint64)
    abs_max((blocks,), (BLOCK,), (*rows, top_bits))
    top = float(top_bits.get().view(np.float64)[0])
    with np.errstate(over="ignore"):
        top = top * top if square else top  # the largest square, rounded as the kernel rounds each one
    if not math.isfinite(top):
        return None
    q_top = math.frexp(top)[1] - MANTISSA_BITS if top > 0 else -1074  # the largest value < 2**(q_top + 53)
    bottom = max(q_top + MANTISSA_BITS - 32 * LIMBS, -1074)
    limbs = cp.empty((blocks, LIMBS), dtype=cp.int64)
    bins = cp.zeros(2 * EXPONENT_BINS, dtype=cp.uint64)
    nonfinite = cp.zeros(1, dtype=cp.int32)
    window_sum((blocks,), (BLOCK,), (*rows, np.int32(square), np.int32(bottom), limbs, bins, nonfinite))
    if int(nonfinite.get()[0]):
        return None
    per = limbs.get()  # each block's limbs: its halves summed over the blocks cannot overflow int64
    halves = [(per & 0xFFFFFFFF).sum(axis=0), (per >> 32).sum(axis=0)]
    window = sum((int(halves[0][k]) + (int(halves[1][k]) << 32)) << (32 * k) for k in range(LIMBS))
    below = bins.get().view(np.int64)
    return (window << (bottom + SCALE_BITS)) + fold_bins(below[:EXPONENT_BINS], below[EXPONENT_BINS:])
