"""The loop's finite test on the device: one read of each field's interior, no temporaries.

`isfinite(view).all()` on a strided interior makes a boolean array as large as
the field's cell count and reads it again to reduce it, with index arithmetic
per cell for the strided view; this kernel reads each value's bits once, in
rows, and sets one flag where an exponent is all ones (NaN or infinity).
"""

from __future__ import annotations

import functools

import numpy as np

from .compile import device_arch, load_module

THREADS = 256
PER_THREAD = 4  # values a thread reads from a row per block: a block covers 1024 of a row
MAX_ROW_BLOCKS = 65535  # the grid's y extent; more rows are strided over

_SOURCE = r"""
template <typename U>
__device__ void nonfinite(const U* __restrict__ a, long long rows, long long ny, long long sz, long long sy,
                          long long nx, U mask, int* flag) {
    bool bad = false;
    for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
        const U* row = a + (r / ny) * sz + (r % ny) * sy;
        long long x = (long long)blockIdx.x * (blockDim.x * PER_THREAD) + threadIdx.x;
        #pragma unroll
        for (int k = 0; k < PER_THREAD; ++k, x += blockDim.x)
            if (x < nx) bad |= (row[x] & mask) == mask;
    }
    if (bad) atomicOr(flag, 1);
}
extern "C" __global__ void sf_nonfinite_u16(const unsigned short* a, long long rows, long long ny, long long sz,
                                            long long sy, long long nx, int* flag) {
    nonfinite<unsigned short>(a, rows, ny, sz, sy, nx, 0x7c00u, flag);
}
extern "C" __global__ void sf_nonfinite_u32(const unsigned int* a, long long rows, long long ny, long long sz,
                                            long long sy, long long nx, int* flag) {
    nonfinite<unsigned int>(a, rows, ny, sz, sy, nx, 0x7f800000u, flag);
}
extern "C" __global__ void sf_nonfinite_u64(const unsigned long long* a, long long rows, long long ny, long long sz,
                                            long long sy, long long nx, int* flag) {
    nonfinite<unsigned long long>(a, rows, ny, sz, sy, nx, 0x7ff0000000000000ull, flag);
}
""".replace("PER_THREAD", str(PER_THREAD))


@functools.lru_cache(maxsize=1)
def _module():
    import cupy as cp

    return load_module(cp, _SOURCE, device_arch(cp), "the finite test")


def _rows(view) -> tuple[int, int, int, int, int] | None:
    """(rows, ny, plane stride, row stride, nx) in elements of a 1D, 2D or 3D view whose rows are contiguous, else None."""
    item = view.itemsize
    if view.ndim not in (1, 2, 3) or (view.shape[-1] > 1 and view.strides[-1] != item) or any(s % item for s in view.strides):
        return None
    shape = (1,) * (3 - view.ndim) + tuple(view.shape)
    strides = (0,) * (3 - view.ndim) + tuple(s // item for s in view.strides)
    return shape[0] * shape[1], shape[1], strides[0], strides[1], shape[2]


def all_finite(views) -> bool:
    """Whether every value of every CuPy array in `views` is finite: one launch per array, one wait for all."""
    import cupy as cp

    flag, ok = cp.zeros(1, dtype=np.int32), True
    for view in views:
        layout = _rows(view) if view.dtype.kind == "f" else None
        if view.size == 0:
            continue
        if layout is None:  # no rows to read (a strided or integer view): CuPy's test
            ok = ok and bool(cp.isfinite(view).all())
            continue
        rows, ny, sz, sy, nx = layout
        threads = min(THREADS, max(32, -(-nx // (32 * PER_THREAD)) * 32))  # short rows: smaller blocks, more of them
        grid = (-(-nx // (threads * PER_THREAD)), min(rows, MAX_ROW_BLOCKS))
        kernel = _module().get_function(f"sf_nonfinite_u{8 * view.itemsize}")
        kernel(grid, (threads,), (view, np.int64(rows), np.int64(ny), np.int64(sz), np.int64(sy), np.int64(nx), flag))
    return ok and not bool(flag.get()[0])
