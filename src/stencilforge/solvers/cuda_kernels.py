"""The multigrid kernels as CUDA C, for the cuda backend (solvers.operator is the oracle).

One thread per node; the operations and their order are those of the numba
kernels (compiled without FMA contraction), so the three backends differ only
by rounding in library functions, of which there are none here. Face
coefficients are read through per-axis element strides, 0 where a constant
coefficient is broadcast, so a constant k costs no memory traffic. Residual
and restriction are fused: each coarse node computes the fine residuals its
restriction weights touch, so the fine residual is never written. Residual
norms are reduced per block in float64 and the block sums added by CuPy in a
fixed order, so a norm (and with it the cycle count) does not vary run to run.
"""

from __future__ import annotations

import functools

import numpy as np

from ..backends.cuda.compile import cached_cubin, options
from .multigrid import Level, Traffic

OPTIONS = ("--fmad=false",)
BLOCK_2D = (128, 2, 1)
BLOCK_3D = (32, 8, 1)
REDUCE_THREADS = 256
REDUCE_BLOCKS = 1024

# Index helpers: U(i, j) reads the ghosted iterate at interior node (i, j); K0/K1 read face arrays by strides.
_SOURCE = r"""
typedef REAL real;

#define U2(a, i, j) a[(long long)((i) + 1) * (n1 + 2) + ((j) + 1)]
#define F2(a, i, j) a[(long long)(i) * n1 + (j)]
#define U3(a, i, j, l) a[((long long)((i) + 1) * (n1 + 2) + ((j) + 1)) * (n2 + 2) + ((l) + 1)]
#define F3(a, i, j, l) a[((long long)(i) * n1 + (j)) * n2 + (l)]
#define KF2(k, s, i, j) k[(long long)(i) * s##0 + (long long)(j) * s##1]
#define KF3(k, s, i, j, l) k[(long long)(i) * s##0 + (long long)(j) * s##1 + (long long)(l) * s##2]

#define FACES2 const real* __restrict__ k0, long long a0, long long a1, const real* __restrict__ k1, long long b0, long long b1
#define FACES3 const real* __restrict__ k0, long long a0, long long a1, long long a2, \
               const real* __restrict__ k1, long long b0, long long b1, long long b2, \
               const real* __restrict__ k2, long long c0, long long c1, long long c2

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

// Sum of squared residuals in float64: block b takes the nodes b, b + gridDim.x, ... (a fixed assignment)
// and writes its sum to partial[b]; the caller adds the partial sums.
extern "C" __global__ void sum_squares2(const real* __restrict__ u, const real* __restrict__ f, FACES2,
                                        int n0, int n1, double* __restrict__ partial) {
    __shared__ double acc[REDUCE_THREADS];
    double total = 0.0;
    long long count = (long long)n0 * n1;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < count; p += (long long)gridDim.x * blockDim.x) {
        double v = (double)residual_point2(u, f, k0, a0, a1, k1, b0, b1, n0, n1, (int)(p / n1), (int)(p % n1));
        total += v * v;
    }
    acc[threadIdx.x] = total;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) acc[threadIdx.x] += acc[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = acc[0];
}

extern "C" __global__ void sum_squares3(const real* __restrict__ u, const real* __restrict__ f, FACES3,
                                        int n0, int n1, int n2, double* __restrict__ partial) {
    __shared__ double acc[REDUCE_THREADS];
    double total = 0.0;
    long long plane = (long long)n1 * n2, count = plane * n0;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < count; p += (long long)gridDim.x * blockDim.x) {
        int i = (int)(p / plane), rest = (int)(p % plane);
        double v = (double)residual_point3(u, f, k0, a0, a1, a2, k1, b0, b1, b2, k2, c0, c1, c2, n0, n1, n2,
                                           i, rest / n2, rest % n2);
        total += v * v;
    }
    acc[threadIdx.x] = total;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) acc[threadIdx.x] += acc[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = acc[0];
}

// Restriction of the residual: out[J, K] = sum_b w1[K, b] * (sum_a w0[J, a] * r(i0[J, a], i1[K, b])),
// the numba kernel's order of operations; zero weights pad short rows and are skipped as there.
extern "C" __global__ void restrict_residual2(const real* __restrict__ u, const real* __restrict__ f, FACES2,
                                              int n0, int n1,
                                              const long long* __restrict__ i0, const real* __restrict__ w0, int band0,
                                              const long long* __restrict__ i1, const real* __restrict__ w1, int band1,
                                              int m0, int m1, real* __restrict__ out) {
    int J = blockIdx.y * blockDim.y + threadIdx.y;
    int K = blockIdx.x * blockDim.x + threadIdx.x;
    if (J >= m0 || K >= m1) return;
    real s = 0;
    for (int b = 0; b < band1; ++b) {
        int j = (int)i1[K * band1 + b];
        real acc = 0;
        for (int a = 0; a < band0; ++a) {
            real w = w0[J * band0 + a];
            if (w == 0) continue;
            acc += w * residual_point2(u, f, k0, a0, a1, k1, b0, b1, n0, n1, (int)i0[J * band0 + a], j);
        }
        if (b == 0) s = w1[K * band1] * acc; else s += w1[K * band1 + b] * acc;
    }
    out[(long long)J * m1 + K] = s;
}

extern "C" __global__ void restrict_residual3(const real* __restrict__ u, const real* __restrict__ f, FACES3,
                                              int n0, int n1, int n2,
                                              const long long* __restrict__ i0, const real* __restrict__ w0, int band0,
                                              const long long* __restrict__ i1, const real* __restrict__ w1, int band1,
                                              const long long* __restrict__ i2, const real* __restrict__ w2, int band2,
                                              int m0, int m1, int m2, real* __restrict__ out) {
    int J = blockIdx.z;
    int K = blockIdx.y * blockDim.y + threadIdx.y;
    int L = blockIdx.x * blockDim.x + threadIdx.x;
    if (K >= m1 || L >= m2) return;
    real s = 0;
    for (int c = 0; c < band2; ++c) {
        int l = (int)i2[L * band2 + c];
        real mid = 0;
        for (int b = 0; b < band1; ++b) {
            real wb = w1[K * band1 + b];
            if (wb == 0) continue;
            int j = (int)i1[K * band1 + b];
            real acc = 0;
            for (int a = 0; a < band0; ++a) {
                real w = w0[J * band0 + a];
                if (w == 0) continue;
                acc += w * residual_point3(u, f, k0, a0, a1, a2, k1, b0, b1, b2, k2, c0, c1, c2, n0, n1, n2,
                                           (int)i0[J * band0 + a], j, l);
            }
            mid += wb * acc;
        }
        if (c == 0) s = w2[L * band2] * mid; else s += w2[L * band2 + c] * mid;
    }
    out[((long long)J * m1 + K) * m2 + L] = s;
}

// The coarsest level's direct solve: x = inverse @ f, one thread per row, columns in order.
extern "C" __global__ void dense_solve(const real* __restrict__ inverse, const real* __restrict__ f, int size,
                                       real* __restrict__ x) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= size) return;
    const real* row = inverse + (long long)r * size;
    real s = row[0] * f[0];
    for (int c = 1; c < size; ++c) s += row[c] * f[c];
    x[r] = s;
}

// Interpolation of the coarse correction e (ghosted, m0 x m1 interior) added to u, in the numba kernel's order.
extern "C" __global__ void prolong_add2(real* __restrict__ u, const real* __restrict__ e, int n0, int n1, int m1,
                                        const long long* __restrict__ i0, const real* __restrict__ w0, int band0,
                                        const long long* __restrict__ i1, const real* __restrict__ w1, int band1) {
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n0 || j >= n1) return;
    real value = U2(u, i, j);
    for (int a = 0; a < band0; ++a) {
        real wa = w0[i * band0 + a];
        if (wa == 0) continue;
        long long row = (i0[i * band0 + a] + 1) * (long long)(m1 + 2);
        real s = w1[j * band1] * e[row + i1[j * band1] + 1];
        for (int b = 1; b < band1; ++b) s += w1[j * band1 + b] * e[row + i1[j * band1 + b] + 1];
        value += wa * s;
    }
    U2(u, i, j) = value;
}

extern "C" __global__ void prolong_add3(real* __restrict__ u, const real* __restrict__ e, int n0, int n1, int n2,
                                        int m1, int m2,
                                        const long long* __restrict__ i0, const real* __restrict__ w0, int band0,
                                        const long long* __restrict__ i1, const real* __restrict__ w1, int band1,
                                        const long long* __restrict__ i2, const real* __restrict__ w2, int band2) {
    int i = blockIdx.z;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int l = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n1 || l >= n2) return;
    real value = U3(u, i, j, l);
    for (int a = 0; a < band0; ++a) {
        real wa = w0[i * band0 + a];
        if (wa == 0) continue;
        long long plane = (i0[i * band0 + a] + 1) * (long long)(m1 + 2);
        for (int c = 0; c < band1; ++c) {
            real wb = wa * w1[j * band1 + c];
            if (wb == 0) continue;
            long long row = (plane + i1[j * band1 + c] + 1) * (long long)(m2 + 2);
            real s = w2[l * band2] * e[row + i2[l * band2] + 1];
            for (int b = 1; b < band2; ++b) s += w2[l * band2 + b] * e[row + i2[l * band2 + b] + 1];
            value += wb * s;
        }
    }
    U3(u, i, j, l) = value;
}
"""


def module_source(dtype) -> str:
    real = "double" if np.dtype(dtype) == np.float64 else "float"
    return f"#define REAL {real}\n#define REDUCE_THREADS {REDUCE_THREADS}\n" + _SOURCE


@functools.lru_cache(maxsize=8)
def _module(dtype: str, arch: str):
    """The kernels for one dtype, compiled (or read from the disk cache) and loaded once per process."""
    import cupy as cp

    source = module_source(dtype)
    path = cached_cubin(source, arch, "the multigrid kernels", OPTIONS)
    if path is not None:
        return cp.RawModule(path=str(path))
    return cp.RawModule(code=source, options=options(arch, OPTIONS)[1:])


def _blocks(shape, block, halve_last: bool = False) -> tuple[int, int, int]:
    """Grid for one thread per node (per node of one colour along the last axis when `halve_last`)."""
    last = (shape[-1] + 1) // 2 if halve_last else shape[-1]
    if len(shape) == 2:
        return (-(-last // block[0]), -(-shape[0] // block[1]), 1)
    return (-(-last // block[0]), -(-shape[1] // block[1]), shape[0])


def _identity(cp, n: int, dtype):
    return cp.arange(n, dtype=cp.int64).reshape(n, 1), cp.ones((n, 1), dtype=dtype)


class CudaKernels:
    """Kernels bound per level to face strides and per-axis tables (identity where an axis is not coarsened)."""

    def __init__(self, traffic: Traffic, arch: str):
        import cupy

        self.xp = cupy
        self.traffic = traffic
        self.arch = arch
        self.bound: dict[int, tuple] = {}
        self.scratch: dict[int, object] = {}
        self.levels: list[Level] = []
        self.partial = cupy.zeros(REDUCE_BLOCKS, dtype=np.float64)

    def _function(self, name: str, dtype):
        return _module(np.dtype(dtype).str, self.arch).get_function(name)

    def bind(self, level: Level) -> None:
        cp = self.xp
        self.levels.append(level)
        shape = level.shape
        dtype = level.faces[0].dtype
        faces = []
        for a, kf in enumerate(level.faces):
            full = tuple(n + 1 if b == a else n for b, n in enumerate(shape))
            view = cp.broadcast_to(kf, full)
            faces.append(view)
            faces.extend(np.int64(s // view.itemsize) for s in view.strides)

        def tables(which):
            if which is None:
                return None
            flat = []
            for a, t in enumerate(which):
                index, weight = t if t is not None else _identity(cp, shape[a], dtype)
                flat += [cp.ascontiguousarray(index), cp.ascontiguousarray(weight), np.int32(index.shape[1])]
            return flat

        self.bound[id(level)] = (faces, tables(level.down), tables(level.up))

    def _args(self, level: Level) -> list:
        return self.bound[id(level)][0]

    def _dims(self, level: Level) -> list:
        return [np.int32(n) for n in level.shape]

    def _block(self, level: Level):
        return BLOCK_2D if len(level.shape) == 2 else BLOCK_3D

    def smooth_colour(self, level: Level, colour: int, omega: float) -> None:
        level.refresh(level.u)
        nd = len(level.shape)
        block = self._block(level)
        kernel = self._function(f"colour{nd}", level.f.dtype)
        kernel(_blocks(level.shape, block, halve_last=True), block,
               (level.u, level.f, *self._args(level), *self._dims(level), np.int32(colour), level.f.dtype.type(omega)))
        self.traffic.add(level.u, level.f, level.u, *level.faces)

    def jacobi(self, level: Level, omega: float) -> None:
        level.refresh(level.u)
        nd = len(level.shape)
        block = self._block(level)
        kernel = self._function(f"jacobi{nd}", level.f.dtype)
        kernel(_blocks(level.shape, block), block,
               (level.u, level.f, *self._args(level), *self._dims(level), level.f.dtype.type(omega), level.spare))
        level.u, level.spare = level.spare, level.u
        self.traffic.add(level.u, level.f, level.u, *level.faces)

    def residual(self, level: Level, u, f, out) -> None:
        level.refresh(u)
        nd = len(level.shape)
        block = self._block(level)
        kernel = self._function(f"residual{nd}", f.dtype)
        kernel(_blocks(level.shape, block), block, (u, f, *self._args(level), *self._dims(level), out))
        self.traffic.add(u, f, out, *level.faces)

    def residual_norm2(self, level: Level, u, f) -> float:
        level.refresh(u)
        nd = len(level.shape)
        kernel = self._function(f"sum_squares{nd}", f.dtype)
        kernel((REDUCE_BLOCKS,), (REDUCE_THREADS,), (u, f, *self._args(level), *self._dims(level), self.partial))
        self.traffic.add(u, f, *level.faces)
        return float(self.partial.sum())

    def restrict_residual(self, level: Level, coarse: Level) -> None:
        level.refresh(level.u)
        nd = len(level.shape)
        block = self._block(level)
        kernel = self._function(f"restrict_residual{nd}", level.f.dtype)
        kernel(_blocks(coarse.shape, block), block,
               (level.u, level.f, *self._args(level), *self._dims(level), *self.bound[id(level)][1],
                *self._dims(coarse), coarse.f))
        self.traffic.add(level.u, level.f, coarse.f, *level.faces)

    def dense_solve(self, level: Level, inverse) -> None:
        size = int(np.prod(level.shape))
        x = self.scratch.get(id(level))
        if x is None:
            x = self.scratch[id(level)] = self.xp.empty(size, dtype=level.f.dtype)
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

    def prolong_add(self, level: Level, coarse: Level) -> None:
        nd = len(level.shape)
        block = self._block(level)
        kernel = self._function(f"prolong_add{nd}", level.f.dtype)
        kernel(_blocks(level.shape, block), block,
               (level.u, coarse.u, *self._dims(level), *self._dims(coarse)[1:], *self.bound[id(level)][2]))
        self.traffic.add(coarse.f, level.f, level.f)  # coarse correction read, fine iterate read and written
