"""The multigrid kernels as Numba parallel loops, for the numba backend (solvers.operator is the oracle).

Face coefficients arrive as full-shape arrays; a constant coefficient is a
stride-0 broadcast view, so it costs no memory traffic. Residual and
restriction are fused: each parallel task computes the residual rows its
coarse row needs into a private buffer and restricts them at once, so the
fine residual is never written to memory (one pass over u and f instead of
three passes over u, f and r). Axes a level does not coarsen get identity
tables, so one kernel serves full and semi-coarsening.
"""

from __future__ import annotations

import numba
import numpy as np

from .multigrid import HostCalls, Level, Traffic

JIT = numba.njit(parallel=True, cache=True, nogil=True)


@numba.njit(cache=True, nogil=True)
def _residual_point2(u, f, k0, k1, i, j):
    c = u[i + 1, j + 1]
    lap = k0[i + 1, j] * (u[i + 2, j + 1] - c) - k0[i, j] * (c - u[i, j + 1])
    lap = lap + (k1[i, j + 1] * (u[i + 1, j + 2] - c) - k1[i, j] * (c - u[i + 1, j]))
    return f[i, j] - lap


@numba.njit(cache=True, nogil=True)
def _residual_point3(u, f, k0, k1, k2, i, j, k):
    c = u[i + 1, j + 1, k + 1]
    lap = k0[i + 1, j, k] * (u[i + 2, j + 1, k + 1] - c) - k0[i, j, k] * (c - u[i, j + 1, k + 1])
    lap = lap + (k1[i, j + 1, k] * (u[i + 1, j + 2, k + 1] - c) - k1[i, j, k] * (c - u[i + 1, j, k + 1]))
    lap = lap + (k2[i, j, k + 1] * (u[i + 1, j + 1, k + 2] - c) - k2[i, j, k] * (c - u[i + 1, j + 1, k]))
    return f[i, j, k] - lap


@JIT
def residual2(u, f, k0, k1, r):
    n0, n1 = f.shape
    for i in numba.prange(n0):
        for j in range(n1):
            r[i, j] = _residual_point2(u, f, k0, k1, i, j)


@JIT
def residual3(u, f, k0, k1, k2, r):
    n0, n1, n2 = f.shape
    for i in numba.prange(n0):
        for j in range(n1):
            for k in range(n2):
                r[i, j, k] = _residual_point3(u, f, k0, k1, k2, i, j, k)


@JIT
def sum_squares2(u, f, k0, k1):
    n0, n1 = f.shape
    total = 0.0
    for i in numba.prange(n0):
        for j in range(n1):
            v = np.float64(_residual_point2(u, f, k0, k1, i, j))
            total += v * v
    return total


@JIT
def sum_squares3(u, f, k0, k1, k2):
    n0, n1, n2 = f.shape
    total = 0.0
    for i in numba.prange(n0):
        for j in range(n1):
            for k in range(n2):
                v = np.float64(_residual_point3(u, f, k0, k1, k2, i, j, k))
                total += v * v
    return total


@JIT
def colour2(u, f, k0, k1, colour, omega):
    n0, n1 = f.shape
    for i in numba.prange(n0):
        for j in range((colour + i) % 2, n1, 2):
            lo0, hi0, lo1, hi1 = k0[i, j], k0[i + 1, j], k1[i, j], k1[i, j + 1]
            num = -f[i, j] + lo0 * u[i, j + 1] + hi0 * u[i + 2, j + 1] + lo1 * u[i + 1, j] + hi1 * u[i + 1, j + 2]
            den = (lo0 + hi0) + (lo1 + hi1)
            u[i + 1, j + 1] = (1 - omega) * u[i + 1, j + 1] + omega * (num / den)


@JIT
def colour3(u, f, k0, k1, k2, colour, omega):
    n0, n1, n2 = f.shape
    for i in numba.prange(n0):
        for j in range(n1):
            for k in range((colour + i + j) % 2, n2, 2):
                lo0, hi0 = k0[i, j, k], k0[i + 1, j, k]
                lo1, hi1 = k1[i, j, k], k1[i, j + 1, k]
                lo2, hi2 = k2[i, j, k], k2[i, j, k + 1]
                num = -f[i, j, k] + lo0 * u[i, j + 1, k + 1] + hi0 * u[i + 2, j + 1, k + 1]
                num = num + lo1 * u[i + 1, j, k + 1] + hi1 * u[i + 1, j + 2, k + 1]
                num = num + lo2 * u[i + 1, j + 1, k] + hi2 * u[i + 1, j + 1, k + 2]
                den = ((lo0 + hi0) + (lo1 + hi1)) + (lo2 + hi2)
                u[i + 1, j + 1, k + 1] = (1 - omega) * u[i + 1, j + 1, k + 1] + omega * (num / den)


@JIT
def jacobi2(u, f, k0, k1, omega, out):
    n0, n1 = f.shape
    for i in numba.prange(n0):
        for j in range(n1):
            den = (k0[i, j] + k0[i + 1, j]) + (k1[i, j] + k1[i, j + 1])
            out[i + 1, j + 1] = u[i + 1, j + 1] - omega * _residual_point2(u, f, k0, k1, i, j) / den


@JIT
def jacobi3(u, f, k0, k1, k2, omega, out):
    n0, n1, n2 = f.shape
    for i in numba.prange(n0):
        for j in range(n1):
            for k in range(n2):
                den = ((k0[i, j, k] + k0[i + 1, j, k]) + (k1[i, j, k] + k1[i, j + 1, k])) + (k2[i, j, k] + k2[i, j, k + 1])
                out[i + 1, j + 1, k + 1] = u[i + 1, j + 1, k + 1] - omega * _residual_point3(u, f, k0, k1, k2, i, j, k) / den


@numba.njit(cache=True, nogil=True)
def _restrict_rows2(acc, i1, w1, out, J):
    """out[J] from a row already restricted along axis 0: the restriction along axis 1 (the fused residual
    restriction and the restriction of a residual held in memory share it)."""
    for K in range(out.shape[1]):
        s = w1[K, 0] * acc[i1[K, 0]]
        for b in range(1, i1.shape[1]):
            s += w1[K, b] * acc[i1[K, b]]
        out[J, K] = s


@numba.njit(cache=True, nogil=True)
def _restrict_planes3(acc, i1, w1, i2, w2, out, J):
    """out[J] from a plane already restricted along axis 0: along axis 1, then axis 2 (shared as in 2D)."""
    m1, m2, n2 = out.shape[1], out.shape[2], acc.shape[1]
    mid = np.zeros((m1, n2), dtype=out.dtype)
    for K in range(m1):
        for b in range(i1.shape[1]):
            w = w1[K, b]
            if w == 0:
                continue
            row = i1[K, b]
            for k in range(n2):
                mid[K, k] += w * acc[row, k]
    for K in range(m1):
        for L in range(m2):
            s = w2[L, 0] * mid[K, i2[L, 0]]
            for b in range(1, i2.shape[1]):
                s += w2[L, b] * mid[K, i2[L, b]]
            out[J, K, L] = s


@JIT
def restrict_residual2(u, f, k0, k1, i0, w0, i1, w1, out):
    n1 = f.shape[1]
    m0 = out.shape[0]
    for J in numba.prange(m0):
        acc = np.zeros(n1, dtype=out.dtype)
        for b in range(i0.shape[1]):
            w = w0[J, b]
            if w == 0:
                continue
            i = i0[J, b]
            for j in range(n1):
                acc[j] += w * _residual_point2(u, f, k0, k1, i, j)
        _restrict_rows2(acc, i1, w1, out, J)


@JIT
def restrict_residual3(u, f, k0, k1, k2, i0, w0, i1, w1, i2, w2, out):
    n1, n2 = f.shape[1], f.shape[2]
    m0 = out.shape[0]
    for J in numba.prange(m0):
        acc = np.zeros((n1, n2), dtype=out.dtype)
        for b in range(i0.shape[1]):
            w = w0[J, b]
            if w == 0:
                continue
            i = i0[J, b]
            for j in range(n1):
                for k in range(n2):
                    acc[j, k] += w * _residual_point3(u, f, k0, k1, k2, i, j, k)
        _restrict_planes3(acc, i1, w1, i2, w2, out, J)


@JIT
def restrict2(r, i0, w0, i1, w1, out):
    """restrict_residual2's arithmetic on a residual held in memory (a rank's block with its halo)."""
    n1 = r.shape[1]
    m0 = out.shape[0]
    for J in numba.prange(m0):
        acc = np.zeros(n1, dtype=out.dtype)
        for b in range(i0.shape[1]):
            w = w0[J, b]
            if w == 0:
                continue
            i = i0[J, b]
            for j in range(n1):
                acc[j] += w * r[i, j]
        _restrict_rows2(acc, i1, w1, out, J)


@JIT
def restrict3(r, i0, w0, i1, w1, i2, w2, out):
    """restrict_residual3's arithmetic on a residual held in memory."""
    n1, n2 = r.shape[1], r.shape[2]
    m0 = out.shape[0]
    for J in numba.prange(m0):
        acc = np.zeros((n1, n2), dtype=out.dtype)
        for b in range(i0.shape[1]):
            w = w0[J, b]
            if w == 0:
                continue
            i = i0[J, b]
            for j in range(n1):
                for k in range(n2):
                    acc[j, k] += w * r[i, j, k]
        _restrict_planes3(acc, i1, w1, i2, w2, out, J)


@JIT
def prolong_add2(u, e, i0, w0, i1, w1):
    n0, n1 = u.shape[0] - 2, u.shape[1] - 2
    for i in numba.prange(n0):
        for a in range(i0.shape[1]):
            wa = w0[i, a]
            if wa == 0:
                continue
            row = i0[i, a]
            for j in range(n1):
                s = w1[j, 0] * e[row, i1[j, 0]]
                for b in range(1, i1.shape[1]):
                    s += w1[j, b] * e[row, i1[j, b]]
                u[i + 1, j + 1] += wa * s


@JIT
def prolong_add3(u, e, i0, w0, i1, w1, i2, w2):
    n0, n1, n2 = u.shape[0] - 2, u.shape[1] - 2, u.shape[2] - 2
    for i in numba.prange(n0):
        for a in range(i0.shape[1]):
            wa = w0[i, a]
            if wa == 0:
                continue
            plane = i0[i, a]
            for j in range(n1):
                for c in range(i1.shape[1]):
                    wb = wa * w1[j, c]
                    if wb == 0:
                        continue
                    row = i1[j, c]
                    for k in range(n2):
                        s = w2[k, 0] * e[plane, row, i2[k, 0]]
                        for b in range(1, i2.shape[1]):
                            s += w2[k, b] * e[plane, row, i2[k, b]]
                        u[i + 1, j + 1, k + 1] += wb * s


def _identity(n: int, dtype):
    return np.arange(n, dtype=np.int64).reshape(n, 1), np.ones((n, 1), dtype=dtype)


class NumbaKernels(HostCalls):
    """Kernels bound per level to full-shape face views and per-axis tables (identity where not coarsened)."""

    xp = np

    def __init__(self, traffic: Traffic):
        self.traffic = traffic
        self.bound: dict[int, tuple] = {}

    def bind(self, level: Level) -> None:
        shape = level.shape
        views = tuple(
            np.broadcast_to(kf, tuple(n + 1 if b == a else n for b, n in enumerate(shape))) for a, kf in enumerate(level.faces)
        )
        dtype = level.f.dtype if level.f is not None else level.faces[0].dtype

        def tables(which):
            if which is None:
                return None
            flat = []
            for a, t in enumerate(which):
                flat.extend(t if t is not None else _identity(shape[a], dtype))
            return tuple(flat)

        self.bound[id(level)] = (views, tables(level.down), tables(level.up))

    def _views(self, level: Level):
        return self.bound[id(level)][0]

    def smooth_colour(self, level: Level, colour: int, omega: float) -> None:
        level.refresh(level.u)
        kernel = colour2 if len(level.shape) == 2 else colour3
        kernel(level.u, level.f, *self._views(level), (colour + level.parity) % 2, level.f.dtype.type(omega))
        self.traffic.add(level.u, level.f, level.u, *level.faces)

    def jacobi(self, level: Level, omega: float) -> None:
        level.refresh(level.u)
        kernel = jacobi2 if len(level.shape) == 2 else jacobi3
        kernel(level.u, level.f, *self._views(level), level.f.dtype.type(omega), level.spare)
        level.u, level.spare = level.spare, level.u
        self.traffic.add(level.u, level.f, level.u, *level.faces)

    def residual(self, level: Level, u, f, out) -> None:
        level.refresh(u)
        (residual2 if len(level.shape) == 2 else residual3)(u, f, *self._views(level), out)
        self.traffic.add(u, f, out, *level.faces)

    def residual_norm2(self, level: Level, u, f) -> float:
        level.refresh(u)
        self.traffic.add(u, f, *level.faces)
        return float((sum_squares2 if len(level.shape) == 2 else sum_squares3)(u, f, *self._views(level)))

    def restrict_residual(self, level: Level, coarse: Level) -> None:
        level.refresh(level.u)
        kernel = restrict_residual2 if len(level.shape) == 2 else restrict_residual3
        kernel(level.u, level.f, *self._views(level), *self.bound[id(level)][1], coarse.f)
        self.traffic.add(level.u, level.f, coarse.f, *level.faces)

    def restrict(self, level: Level, r, coarse: Level) -> None:
        """coarse.f from a residual array `r` that level.down indexes."""
        (restrict2 if len(level.shape) == 2 else restrict3)(r, *self.bound[id(level)][1], coarse.f)
        self.traffic.add(r, coarse.f)

    def prolong_add(self, level: Level, coarse: Level) -> None:
        kernel = prolong_add2 if len(level.shape) == 2 else prolong_add3
        kernel(level.u, coarse.u, *self.bound[id(level)][2])
        self.traffic.add(coarse.f, level.f, level.f)  # coarse correction read, fine iterate read and written
