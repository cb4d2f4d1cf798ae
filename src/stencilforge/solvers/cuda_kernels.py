"""The multigrid kernels as CUDA C, for the cuda backend (solvers.operator is the oracle).

One thread per node; the operations and their order are those of the numba
kernels (compiled without FMA contraction), so each kernel gives the numba
kernel's bits; whole solves differ in the last bits through the coarse solve's
and the norms' order of summation. Face
coefficients are read through per-axis element strides, 0 where a constant
coefficient is broadcast, so a constant k costs no memory traffic. The residual
is written and then restricted (unlike the numba kernels, which fuse the two:
on the GPU the fused form recomputes residuals and measured slower). Residual
norms are reduced per block in float64 and the block sums added by CuPy in a
fixed order, so a norm (and with it the cycle count) does not vary run to run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..backends.cuda.compile import load_module
from .multigrid import Level, Traffic

OPTIONS = ("--fmad=false",)
BLOCK_2D = (128, 2, 1)
BLOCK_3D = (32, 8, 1)
REDUCE_THREADS = 256  # the threads of BLOCK_2D and BLOCK_3D
NORM_ROWS = 8  # rows (planes) each thread of a residual norm adds before the block's reduction
MAX_DOWN, MAX_UP = 5, 2  # the widest restriction and interpolation rows geometry.transfers makes
WIDE = 2**31  # arrays of this many elements or more need 64-bit offsets

# U2/U3 read the ghosted iterate at interior node (i, j[, l]); F2/F3 an array without ghosts; KF2/KF3 a face
# array through its strides. `idx` is 32-bit unless an array reaches 2^31 elements.
_SOURCE = r"""
typedef REAL real;
typedef INDEX idx;

#define U2(a, i, j) a[(idx)((i) + 1) * (n1 + 2) + ((j) + 1)]
#define F2(a, i, j) a[(idx)(i) * n1 + (j)]
#define U3(a, i, j, l) a[((idx)((i) + 1) * (n1 + 2) + ((j) + 1)) * (n2 + 2) + ((l) + 1)]
#define F3(a, i, j, l) a[((idx)(i) * n1 + (j)) * n2 + (l)]
#define KF2(k, s, i, j) k[(idx)(i) * s##0 + (idx)(j) * s##1]
#define KF3(k, s, i, j, l) k[(idx)(i) * s##0 + (idx)(j) * s##1 + (idx)(l) * s##2]

#define FACES2 const real* __restrict__ k0, idx a0, idx a1, const real* __restrict__ k1, idx b0, idx b1
#define FACES3 const real* __restrict__ k0, idx a0, idx a1, idx a2, \
               const real* __restrict__ k1, idx b0, idx b1, idx b2, \
               const real* __restrict__ k2, idx c0, idx c1, idx c2

__device__ __forceinline__ real residual_point2(const real* __restrict__ u, const real* __restrict__ f, FACES2,
                                                int n0, int n1, int i, int j) {
    real c = U2(u, i, j);
    real lap = KF2(k0, a, i + 1, j) * (U2(u, i + 1, j) - c) - KF2(k0, a, i, j) * (c - U2(u, i - 1, j));
    lap = lap + (KF2(k1, b, i, j + 1) * (U2(u, i, j + 1) - c) - KF2(k1, b, i, j) * (c - U2(u, i, j - 1)));
    return F2(f, i, j) - lap;
}

__device__ __forceinline__ real residual_point3(const real* __restrict__ u, const real* __restrict__ f, FACES3,
                                                int n0, int n1, int n2, int i, int j, int l) {
    real c = U3(u, i, j, l);
    real lap = KF3(k0, a, i + 1, j, l) * (U3(u, i + 1, j, l) - c) - KF3(k0, a, i, j, l) * (c - U3(u, i - 1, j, l));
    lap = lap + (KF3(k1, b, i, j + 1, l) * (U3(u, i, j + 1, l) - c) - KF3(k1, b, i, j, l) * (c - U3(u, i, j - 1, l)));
    lap = lap + (KF3(k2, c, i, j, l + 1) * (U3(u, i, j, l + 1) - c) - KF3(k2, c, i, j, l) * (c - U3(u, i, j, l - 1)));
    return F3(f, i, j, l) - lap;
}

extern "C" __global__ void colour2(real* __restrict__ u, const real* __restrict__ f, FACES2,
                                   int n0, int n1, int colour, real omega) {
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = 2 * (blockIdx.x * blockDim.x + threadIdx.x) + ((colour + i) & 1);
    if (i >= n0 || j >= n1) return;
    real lo0 = KF2(k0, a, i, j), hi0 = KF2(k0, a, i + 1, j), lo1 = KF2(k1, b, i, j), hi1 = KF2(k1, b, i, j + 1);
    real num = -F2(f, i, j) + lo0 * U2(u, i - 1, j) + hi0 * U2(u, i + 1, j) + lo1 * U2(u, i, j - 1) + hi1 * U2(u, i, j + 1);
    real den = (lo0 + hi0) + (lo1 + hi1);
    U2(u, i, j) = ((real)1 - omega) * U2(u, i, j) + omega * (num / den);
}

extern "C" __global__ void colour3(real* __restrict__ u, const real* __restrict__ f, FACES3,
                                   int n0, int n1, int n2, int colour, real omega) {
    int i = blockIdx.z;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int l = 2 * (blockIdx.x * blockDim.x + threadIdx.x) + ((colour + i + j) & 1);
    if (j >= n1 || l >= n2) return;
    real lo0 = KF3(k0, a, i, j, l), hi0 = KF3(k0, a, i + 1, j, l);
    real lo1 = KF3(k1, b, i, j, l), hi1 = KF3(k1, b, i, j + 1, l);
    real lo2 = KF3(k2, c, i, j, l), hi2 = KF3(k2, c, i, j, l + 1);
    real num = -F3(f, i, j, l) + lo0 * U3(u, i - 1, j, l) + hi0 * U3(u, i + 1, j, l);
    num = num + lo1 * U3(u, i, j - 1, l) + hi1 * U3(u, i, j + 1, l);
    num = num + lo2 * U3(u, i, j, l - 1) + hi2 * U3(u, i, j, l + 1);
    real den = ((lo0 + hi0) + (lo1 + hi1)) + (lo2 + hi2);
    U3(u, i, j, l) = ((real)1 - omega) * U3(u, i, j, l) + omega * (num / den);
}

extern "C" __global__ void jacobi2(const real* __restrict__ u, const real* __restrict__ f, FACES2,
                                   int n0, int n1, real omega, real* __restrict__ out) {
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n0 || j >= n1) return;
    real den = (KF2(k0, a, i, j) + KF2(k0, a, i + 1, j)) + (KF2(k1, b, i, j) + KF2(k1, b, i, j + 1));
    U2(out, i, j) = U2(u, i, j) - omega * residual_point2(u, f, k0, a0, a1, k1, b0, b1, n0, n1, i, j) / den;
}

extern "C" __global__ void jacobi3(const real* __restrict__ u, const real* __restrict__ f, FACES3,
                                   int n0, int n1, int n2, real omega, real* __restrict__ out) {
    int i = blockIdx.z;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n1 || l >= n2) return;
    real den = ((KF3(k0, a, i, j, l) + KF3(k0, a, i + 1, j, l)) + (KF3(k1, b, i, j, l) + KF3(k1, b, i, j + 1, l)))
               + (KF3(k2, c, i, j, l) + KF3(k2, c, i, j, l + 1));
    U3(out, i, j, l) = U3(u, i, j, l)
        - omega * residual_point3(u, f, k0, a0, a1, a2, k1, b0, b1, b2, k2, c0, c1, c2, n0, n1, n2, i, j, l) / den;
}

extern "C" __global__ void residual2(const real* __restrict__ u, const real* __restrict__ f, FACES2,
                                     int n0, int n1, real* __restrict__ r) {
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n0 || j >= n1) return;
    F2(r, i, j) = residual_point2(u, f, k0, a0, a1, k1, b0, b1, n0, n1, i, j);
}

extern "C" __global__ void residual3(const real* __restrict__ u, const real* __restrict__ f, FACES3,
                                     int n0, int n1, int n2, real* __restrict__ r) {
    int i = blockIdx.z;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n1 || l >= n2) return;
    F3(r, i, j, l) = residual_point3(u, f, k0, a0, a1, a2, k1, b0, b1, b2, k2, c0, c1, c2, n0, n1, n2, i, j, l);
}

// Sum of squared residuals in float64: each thread adds NORM_ROWS rows (planes in 3D) of its column, each
// block reduces its threads in a fixed tree and writes partial[block]; the caller adds the partial sums.
__device__ __forceinline__ void block_sum(double v, double* __restrict__ partial) {
    __shared__ double acc[REDUCE_THREADS];
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    acc[t] = v;
    __syncthreads();
    for (int s = REDUCE_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) acc[t] += acc[t + s];
        __syncthreads();
    }
    if (t == 0) partial[((idx)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x] = acc[0];
}

extern "C" __global__ void sum_squares2(const real* __restrict__ u, const real* __restrict__ f, FACES2,
                                        int n0, int n1, double* __restrict__ partial) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    double total = 0.0;
    #pragma unroll
    for (int r = 0; r < NORM_ROWS; ++r) {
        int i = (blockIdx.y * NORM_ROWS + r) * blockDim.y + threadIdx.y;
        if (i < n0 && j < n1) {
            double v = (double)residual_point2(u, f, k0, a0, a1, k1, b0, b1, n0, n1, i, j);
            total += v * v;
        }
    }
    block_sum(total, partial);
}

extern "C" __global__ void sum_squares3(const real* __restrict__ u, const real* __restrict__ f, FACES3,
                                        int n0, int n1, int n2, double* __restrict__ partial) {
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    double total = 0.0;
    #pragma unroll
    for (int r = 0; r < NORM_ROWS; ++r) {
        int i = blockIdx.z * NORM_ROWS + r;
        if (i < n0 && j < n1 && l < n2) {
            double v = (double)residual_point3(u, f, k0, a0, a1, a2, k1, b0, b1, b2, k2, c0, c1, c2, n0, n1, n2, i, j, l);
            total += v * v;
        }
    }
    block_sum(total, partial);
}

// Restriction of the residual r (written by residual2/3): out[J, K] = sum_b w1[K, b] * (sum_a w0[J, a] *
// r[i0[J, a], i1[K, b]]), the numba kernel's order. Short rows are padded with zero weights (at index 0), which
// the numba kernel skips; here they add w * r = 0, the same bits for finite r, and the loops unroll to MAX_DOWN
// so that every load of a node is issued at once.
extern "C" __global__ void restrict2(const real* __restrict__ r, int n0, int n1,
                                     const int* __restrict__ i0, const real* __restrict__ w0, int band0,
                                     const int* __restrict__ i1, const real* __restrict__ w1, int band1,
                                     int m0, int m1, real* __restrict__ out) {
    int J = blockIdx.y * blockDim.y + threadIdx.y;
    int K = blockIdx.x * blockDim.x + threadIdx.x;
    if (J >= m0 || K >= m1) return;
    real s = 0;
    #pragma unroll
    for (int b = 0; b < MAX_DOWN; ++b) {
        if (b < band1) {
            int j = i1[K * band1 + b];
            real acc = 0;
            #pragma unroll
            for (int a = 0; a < MAX_DOWN; ++a)
                if (a < band0) acc += w0[J * band0 + a] * F2(r, i0[J * band0 + a], j);
            if (b == 0) s = w1[K * band1] * acc; else s += w1[K * band1 + b] * acc;
        }
    }
    out[(idx)J * m1 + K] = s;
}

extern "C" __global__ void restrict3(const real* __restrict__ r, int n0, int n1, int n2,
                                     const int* __restrict__ i0, const real* __restrict__ w0, int band0,
                                     const int* __restrict__ i1, const real* __restrict__ w1, int band1,
                                     const int* __restrict__ i2, const real* __restrict__ w2, int band2,
                                     int m0, int m1, int m2, real* __restrict__ out) {
    int J = blockIdx.z;
    int K = blockIdx.y * blockDim.y + threadIdx.y;
    int L = blockIdx.x * blockDim.x + threadIdx.x;
    if (K >= m1 || L >= m2) return;
    real s = 0;
    #pragma unroll
    for (int c = 0; c < MAX_DOWN; ++c) {
        if (c < band2) {
            int l = i2[L * band2 + c];
            real mid = 0;
            #pragma unroll
            for (int b = 0; b < MAX_DOWN; ++b) {
                if (b < band1) {
                    int j = i1[K * band1 + b];
                    real acc = 0;
                    #pragma unroll
                    for (int a = 0; a < MAX_DOWN; ++a)
                        if (a < band0) acc += w0[J * band0 + a] * F3(r, i0[J * band0 + a], j, l);
                    mid += w1[K * band1 + b] * acc;
                }
            }
            if (c == 0) s = w2[L * band2] * mid; else s += w2[L * band2 + c] * mid;
        }
    }
    out[((idx)J * m1 + K) * m2 + L] = s;
}

// The coarsest level's direct solve: x = inverse @ f, one thread per row, columns in order.
extern "C" __global__ void dense_solve(const real* __restrict__ inverse, const real* __restrict__ f, int size,
                                       real* __restrict__ x) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= size) return;
    const real* row = inverse + (idx)r * size;
    real s = row[0] * f[0];
    for (int c = 1; c < size; ++c) s += row[c] * f[c];
    x[r] = s;
}

// Interpolation of the coarse correction e (ghosted, m0 x m1 interior; the tables index it ghosts included) added
// to u, in the numba kernel's order (zero weights, which it skips, add w * s = 0 here), loops unrolled to MAX_UP.
extern "C" __global__ void prolong_add2(real* __restrict__ u, const real* __restrict__ e, int n0, int n1, int m1,
                                        const int* __restrict__ i0, const real* __restrict__ w0, int band0,
                                        const int* __restrict__ i1, const real* __restrict__ w1, int band1) {
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n0 || j >= n1) return;
    real value = U2(u, i, j);
    #pragma unroll
    for (int a = 0; a < MAX_UP; ++a) {
        if (a < band0) {
            idx row = (idx)i0[i * band0 + a] * (m1 + 2);
            real s = w1[j * band1] * e[row + i1[j * band1]];
            #pragma unroll
            for (int b = 1; b < MAX_UP; ++b)
                if (b < band1) s += w1[j * band1 + b] * e[row + i1[j * band1 + b]];
            value += w0[i * band0 + a] * s;
        }
    }
    U2(u, i, j) = value;
}

extern "C" __global__ void prolong_add3(real* __restrict__ u, const real* __restrict__ e, int n0, int n1, int n2,
                                        int m1, int m2,
                                        const int* __restrict__ i0, const real* __restrict__ w0, int band0,
                                        const int* __restrict__ i1, const real* __restrict__ w1, int band1,
                                        const int* __restrict__ i2, const real* __restrict__ w2, int band2) {
    int i = blockIdx.z;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n1 || l >= n2) return;
    real value = U3(u, i, j, l);
    #pragma unroll
    for (int a = 0; a < MAX_UP; ++a) {
        if (a < band0) {
            real wa = w0[i * band0 + a];
            idx plane = (idx)i0[i * band0 + a] * (m1 + 2);
            #pragma unroll
            for (int c = 0; c < MAX_UP; ++c) {
                if (c < band1) {
                    real wb = wa * w1[j * band1 + c];
                    idx row = (plane + i1[j * band1 + c]) * (m2 + 2);
                    real s = w2[l * band2] * e[row + i2[l * band2]];
                    #pragma unroll
                    for (int b = 1; b < MAX_UP; ++b)
                        if (b < band2) s += w2[l * band2 + b] * e[row + i2[l * band2 + b]];
                    value += wb * s;
                }
            }
        }
    }
    U3(u, i, j, l) = value;
}
"""


def module_source(dtype, wide: bool = False) -> str:
    real = "double" if np.dtype(dtype) == np.float64 else "float"
    defines = {"REAL": real, "INDEX": "long long" if wide else "int", "REDUCE_THREADS": REDUCE_THREADS,
               "NORM_ROWS": NORM_ROWS, "MAX_DOWN": MAX_DOWN, "MAX_UP": MAX_UP}
    return "".join(f"#define {k} {v}\n" for k, v in defines.items()) + _SOURCE


@functools.lru_cache(maxsize=8)
def _module(dtype: str, arch: str, wide: bool):
    """The kernels for one dtype and offset width, compiled (or read from the disk cache) and loaded once per process."""
    import cupy as cp

    return load_module(cp, module_source(dtype, wide), arch, "the multigrid kernels", OPTIONS)


def _blocks(shape, block, halve_last: bool = False) -> tuple[int, int, int]:
    """Grid for one thread per node (per node of one colour along the last axis when `halve_last`)."""
    last = (shape[-1] + 1) // 2 if halve_last else shape[-1]
    if len(shape) == 2:
        return (-(-last // block[0]), -(-shape[0] // block[1]), 1)
    return (-(-last // block[0]), -(-shape[1] // block[1]), shape[0])


def _identity(cp, n: int, dtype):
    return cp.arange(n, dtype=cp.int32).reshape(n, 1), cp.ones((n, 1), dtype=dtype)


@dataclass
class _Bound:
    """A level's launch geometry and constant arguments, built once: a cycle launches over a hundred kernels,
    most on coarse levels where the host's cost of preparing a launch exceeds the kernel's."""

    geometry: tuple  # faces with their strides, then the interior shape
    block: tuple
    grid: tuple  # one thread per node
    half: tuple  # one thread per node of one colour
    norm: tuple  # the norms' grid, NORM_ROWS rows per thread
    down: tuple  # restriction tables, then the coarse shape (empty on the coarsest level)
    up: tuple  # interpolation tables, after the coarse interior's trailing sizes


class CudaKernels:
    """Kernels bound per level to face strides and per-axis tables (identity where an axis is not coarsened)."""

    def __init__(self, traffic: Traffic, arch: str):
        import cupy

        self.xp = cupy
        self.traffic = traffic
        self.arch = arch
        self.bound: dict[int, _Bound] = {}
        self.scratch: dict[tuple, object] = {}
        self.functions: dict[tuple, object] = {}
        self.levels: list[Level] = []
        self.wide = False

    def _function(self, name: str, dtype):
        key = (name, np.dtype(dtype).str)
        fn = self.functions.get(key)
        if fn is None:
            fn = self.functions[key] = _module(key[1], self.arch, self.wide).get_function(name)
        return fn

    def bind(self, level: Level) -> None:
        """Levels are bound finest first, so the first one decides the offsets' width for all."""
        cp = self.xp
        if not self.levels:
            self.wide = int(np.prod([n + 2 for n in level.shape])) >= WIDE
        self.levels.append(level)
        integer = np.int64 if self.wide else np.int32
        shape = level.shape
        nd = len(shape)
        dtype = level.faces[0].dtype
        geometry = []
        for a, kf in enumerate(level.faces):
            view = cp.broadcast_to(kf, tuple(n + 1 if b == a else n for b, n in enumerate(shape)))
            geometry.append(view)
            geometry.extend(integer(s // view.itemsize) for s in view.strides)
        dims = tuple(np.int32(n) for n in shape)

        def tables(which):
            flat = []
            for a, t in enumerate(which):
                index, weight = t if t is not None else _identity(cp, shape[a], dtype)  # only restriction has None
                flat += [cp.ascontiguousarray(index, dtype=cp.int32), cp.ascontiguousarray(weight), np.int32(index.shape[1])]
            return tuple(flat)

        block = BLOCK_2D if nd == 2 else BLOCK_3D
        grid = _blocks(shape, block)
        norm = (grid[0], -(-grid[1] // NORM_ROWS), 1) if nd == 2 else (grid[0], grid[1], -(-grid[2] // NORM_ROWS))
        self.bound[id(level)] = _Bound(
            geometry=tuple(geometry) + dims, block=block, grid=grid, half=_blocks(shape, block, halve_last=True),
            norm=norm, down=() if level.down is None else tables(level.down), up=() if level.up is None else tables(level.up),
        )

    def smooth_colour(self, level: Level, colour: int, omega: float) -> None:
        level.refresh(level.u)
        b = self.bound[id(level)]
        self._function(f"colour{len(level.shape)}", level.f.dtype)(
            b.half, b.block, (level.u, level.f, *b.geometry, np.int32((colour + level.parity) % 2), level.f.dtype.type(omega)))
        self.traffic.add(level.u, level.f, level.u, *level.faces)

    def jacobi(self, level: Level, omega: float) -> None:
        level.refresh(level.u)
        b = self.bound[id(level)]
        self._function(f"jacobi{len(level.shape)}", level.f.dtype)(
            b.grid, b.block, (level.u, level.f, *b.geometry, level.f.dtype.type(omega), level.spare))
        level.u, level.spare = level.spare, level.u
        self.traffic.add(level.u, level.f, level.u, *level.faces)

    def residual(self, level: Level, u, f, out) -> None:
        """out = f - L u; `out` may be a view with gaps between its rows (a split level's residual inside its halo,
        `decomposed.Block`), which the kernel's dense writes then reach through a scratch array."""
        level.refresh(u)
        b = self.bound[id(level)]
        dense = out if out.flags.c_contiguous else self._scratch(("r", id(level)), level.shape, out.dtype)
        self._function(f"residual{len(level.shape)}", f.dtype)(b.grid, b.block, (u, f, *b.geometry, dense))
        if dense is not out:
            out[...] = dense
        self.traffic.add(u, f, out, *level.faces)

    def residual_norm2(self, level: Level, u, f) -> float:
        level.refresh(u)
        b = self.bound[id(level)]
        partial = self._scratch(("partial", id(level)), (b.norm[0] * b.norm[1] * b.norm[2],), np.float64)
        self._function(f"sum_squares{len(level.shape)}", f.dtype)(b.norm, b.block, (u, f, *b.geometry, partial))
        self.traffic.add(u, f, *level.faces)
        return float(partial.sum())

    def restrict_residual(self, level: Level, coarse: Level) -> None:
        """The residual written once, then restricted: fusing the two recomputes each fine residual for every
        coarse node whose weights reach it (27 times in 3D), which costs more time than the pass it saves
        (benchmarks/results/multigrid_kernels.txt)."""
        r = self._scratch(("r", id(level)), level.shape, level.f.dtype)
        self.residual(level, level.u, level.f, r)
        self.restrict(level, r, coarse)

    def restrict(self, level: Level, r, coarse: Level) -> None:
        """coarse.f from a dense residual array `r` that level.down indexes: the level's shape, or on a split level
        its block with the halo restriction reads (`decomposed.Block`)."""
        b, c = self.bound[id(level)], self.bound[id(coarse)]
        nd = len(level.shape)
        self._function(f"restrict{nd}", level.f.dtype)(
            c.grid, c.block, (r, *(np.int32(n) for n in r.shape), *b.down, *c.geometry[-nd:], coarse.f))
        self.traffic.add(r, coarse.f)

    def prolong_add(self, level: Level, coarse: Level) -> None:
        b, c = self.bound[id(level)], self.bound[id(coarse)]
        nd = len(level.shape)
        self._function(f"prolong_add{nd}", level.f.dtype)(
            b.grid, b.block, (level.u, coarse.u, *b.geometry[-nd:], *c.geometry[1 - nd:], *b.up))
        self.traffic.add(coarse.f, level.f, level.f)  # coarse correction read, fine iterate read and written

    def _scratch(self, key, shape, dtype):
        arr = self.scratch.get(key)
        if arr is None:
            arr = self.scratch[key] = self.xp.empty(shape, dtype=dtype)
        return arr

    def dense_solve(self, level: Level, inverse) -> None:
        size = int(np.prod(level.shape))
        x = self._scratch(("x", id(level)), (size,), level.f.dtype)
        self._function("dense_solve", level.f.dtype)((-(-size // 128),), (128,), (inverse, level.f, np.int32(size), x))
        level.u[level.interior] = x.reshape(level.shape)
        self.traffic.add(inverse, level.f, level.f)

    def recorded(self, fn):
        """fn (a cycle: kernel launches on fixed arrays) replayed as a CUDA graph, which removes the launch cost
        of the coarse levels' many small kernels. Captured at the first call; run directly instead when fn
        leaves a level's buffers swapped (Jacobi with an odd number of sweeps), since a replay would not."""
        cp = self.xp
        state = {}

        def buffers():
            return [(level.u, level.spare) for level in self.levels]

        def run():
            graph = state.get("graph")
            if graph is None and "eager" not in state:
                stream = state["stream"] = cp.cuda.Stream()
                before_buffers, before_bytes = buffers(), self.traffic.bytes
                cp.cuda.Device().synchronize()
                with stream:
                    stream.begin_capture()
                    try:
                        fn()
                    finally:
                        graph = stream.end_capture()
                state["bytes"] = self.traffic.bytes - before_bytes
                if any(a is not b for now, then in zip(buffers(), before_buffers) for a, b in zip(now, then)):
                    state["eager"] = True
                    self.traffic.bytes = before_bytes
                    for level, (u, spare) in zip(self.levels, before_buffers):
                        level.u, level.spare = u, spare
                    graph = None
                else:
                    state["graph"] = graph
            if graph is None:
                fn()
                return
            graph.launch(state["stream"])
            if state.get("launched"):
                self.traffic.bytes += state["bytes"]
            state["launched"] = True

        return run
