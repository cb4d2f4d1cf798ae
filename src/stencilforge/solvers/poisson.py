"""`poisson`: div(k grad u) = f to a tolerance by multigrid, mixed-precision multigrid or MG-preconditioned CG.

Non-zero Dirichlet values are moved into the right-hand side once
(f' = f - L g, g the walls with a zero interior), so the solver iterates on a
problem with homogeneous walls. Convergence is judged on ||f - L u|| / ||f||,
the measure the Jacobi time loop uses.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, NamedTuple, Sequence

import numpy as np

from ..backends import get_backend
from ..boundary import argument_names
from ..distributed import bind_for
from ..errors import StencilforgeError
from ..grid import parse_dtype
from ..resources import numba_threads
from . import operator as op
from .geometry import WALLS
from .multigrid import ArrayKernels, Multigrid, Traffic, Undivided, level_faces

METHODS = ("multigrid", "cg")
CYCLES = ("V", "W")
SMOOTHERS = ("rbgs", "jacobi")
COMPATIBILITY = 1e-6  # |mean f| / mean |f| above which f has no solution with zero-flux/periodic walls
STALL_CYCLES = 3  # cycles without a 10% residual drop before the loop stops (rounding floor reached)


def stalled(history: list[float]) -> bool:
    """Whether the residuals of the last STALL_CYCLES cycles fell less than 10% below the one before them."""
    return len(history) > STALL_CYCLES + 1 and min(history[-STALL_CYCLES:]) > 0.9 * history[-STALL_CYCLES - 1]


class PoissonResult(NamedTuple):
    """The solution on the interior nodes (the backend's array type) and a summary dict."""

    u: object
    summary: dict


def _walls(boundary, ndim: int) -> tuple[str, ...]:
    walls = (boundary,) * ndim if isinstance(boundary, str) else tuple(boundary)
    if len(walls) != ndim or any(w not in WALLS for w in walls):
        raise StencilforgeError(f"boundary must be one of {', '.join(WALLS)} or one per axis ({ndim}), got {boundary!r}")
    return walls


def _spacing(spacing, shape, walls) -> tuple[float, ...]:
    if spacing is None:
        return tuple(1.0 / (n + 1) if w == "dirichlet" else 1.0 / n for n, w in zip(shape, walls))
    hs: tuple = (spacing,) * len(shape) if np.isscalar(spacing) else tuple(spacing)
    if len(hs) != len(shape) or not all(np.isfinite(h) and h > 0 for h in hs):
        raise StencilforgeError(f"spacing must be one positive number or one per axis, got {spacing!r}")
    return tuple(float(h) for h in hs)


def _checked_k(k, shape) -> np.ndarray | None:
    if k is None:
        return None
    arr = np.asarray(k, dtype=np.float64) if np.ndim(k) else np.full(shape, float(k))
    if arr.shape != tuple(shape):
        raise StencilforgeError(f"k has shape {arr.shape}, f has {tuple(shape)}: give k at the same nodes")
    if not np.isfinite(arr).all():
        raise StencilforgeError("k contains NaN or Inf")
    if not (arr > 0).all():
        raise StencilforgeError(f"k must be positive everywhere, smallest value {arr.min():.6g}")
    return arr


def _wall_values(value, shape, walls, spacing) -> np.ndarray | None:
    """The ghosted float64 array holding Dirichlet wall values (None when they are all zero)."""
    padded = tuple(n + 2 for n in shape)
    if callable(value):
        coords = [(np.arange(-1, n + 1) + 1) * h for n, h in zip(shape, spacing)]
        named = dict(zip(argument_names(value, len(shape), timed=False), np.meshgrid(*coords, indexing="ij", sparse=True)))
        g = np.broadcast_to(np.asarray(value(**named), dtype=np.float64), padded).copy()
    elif np.ndim(value):
        g = np.asarray(value, dtype=np.float64)
        if g.shape != padded:
            raise StencilforgeError(
                f"wall values must be a number, a function or an array of the ghosted shape {padded}, got shape {g.shape}"
            )
        g = g.copy()
    else:
        if float(value) == 0.0:
            return None
        g = np.full(padded, float(value))
    interior = tuple(slice(1, 1 + n) for n in shape)
    g[interior] = 0.0
    if not np.isfinite(g).all():
        raise StencilforgeError("the Dirichlet wall values contain NaN or Inf")
    if not any(w == "dirichlet" for w in walls):
        return None
    for a, w in enumerate(walls):  # only dirichlet walls carry values; the others' ghosts are not read
        if w != "dirichlet":
            g[tuple(slice(0, 1) if b == a else slice(None) for b in range(len(shape)))] = 0.0
            g[tuple(slice(n + 1, n + 2) if b == a else slice(None) for b, n in enumerate(shape))] = 0.0
    return g


def _kernels(engine, traffic: Traffic):
    if engine.name == "numba":
        from .numba_kernels import NumbaKernels

        return NumbaKernels(traffic)
    if engine.name == "cuda":
        from .cuda_kernels import CudaKernels

        return CudaKernels(traffic, engine.arch)
    return ArrayKernels(engine.xp, traffic)


def _validate_options(tol, max_cycles, method, cycle, smoother, pre, post, mixed, dtype):
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
        raise StencilforgeError(f"tol must be a positive number, got {tol}")
    if not isinstance(max_cycles, (int, np.integer)) or max_cycles < 1:
        raise StencilforgeError(f"max_cycles must be a positive integer, got {max_cycles}")
    for name, value, allowed in (("method", method, METHODS), ("cycle", cycle, CYCLES), ("smoother", smoother, SMOOTHERS)):
        if value not in allowed:
            raise StencilforgeError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    if pre < 0 or post < 0 or pre + post < 1:
        raise StencilforgeError(f"pre and post smoothing sweeps must be non-negative with at least one in all, got {pre} and {post}")
    if mixed and dtype != np.float64:
        raise StencilforgeError("mixed precision runs float32 cycles inside a float64 solve: give float64 f or dtype")


def poisson(
    f,
    spacing: float | Sequence[float] | None = None,
    *,
    boundary: str | Sequence[str] = "dirichlet",
    value: float | Callable | np.ndarray = 0.0,
    k=None,
    tol: float = 1e-8,
    max_cycles: int = 50,
    method: str = "multigrid",
    cycle: str = "V",
    smoother: str = "rbgs",
    pre: int = 2,
    post: int = 2,
    fmg: bool = True,
    mixed: bool = False,
    dtype=None,
    backend: str = "auto",
    comm=None,
    procs: Sequence[int] | None = None,
    threads: int | None = None,
) -> PoissonResult:
    """Solve div(k grad u) = f (del^2 u = f without k) on a 2D or 3D box of nodes.

    f: values at the interior nodes. spacing: h per axis (default: the unit box).
    boundary: dirichlet, neumann (zero flux) or periodic, one for all walls or one per axis.
    value: Dirichlet wall values, a number, value(x, y[, z]) at the wall nodes (called by name, x the last axis,
           as `sf.Dirichlet` calls its function) or a ghosted array.
    k: positive coefficient at the nodes (scalar or array). method: multigrid cycles or
    CG preconditioned by one cycle. mixed: float32 cycles correcting a float64 solution.
    comm: an MPI communicator whose ranks all call this with the same arguments; the fine levels
    are split over them (procs: the process grid, default the least cut area) and every rank
    gets the whole solution, the same bits for any number of ranks.
    threads (numba): threads for this solve (default: $NUMBA_NUM_THREADS, else this process's share of the cores it
    may run on), reported in the summary and given back afterwards.
    Returns (u, summary); u is zero-mean when no wall is Dirichlet.
    """
    bind_for(comm, backend)
    engine = get_backend(backend)
    xp = engine.xp
    on_device = hasattr(f, "__cuda_array_interface__")
    arr = f if on_device and xp is not np else (f.get() if on_device else np.asarray(f))
    dtype = parse_dtype(dtype if dtype is not None else (arr.dtype if arr.dtype.kind == "f" else np.float64))
    if arr.ndim not in (2, 3):
        raise StencilforgeError(f"f must be a 2D or 3D array, got {arr.ndim}D")
    shape = arr.shape
    if min(shape) < 3:
        raise StencilforgeError(f"shape {shape} is too small to coarsen: every axis needs at least 3 nodes")
    arr = xp.asarray(arr, dtype=np.float64)  # where the solve runs: a device f never visits the host
    if not bool(xp.isfinite(arr).all()):
        raise StencilforgeError("f contains NaN or Inf")
    _validate_options(tol, max_cycles, method, cycle, smoother, pre, post, mixed, dtype)
    walls = _walls(boundary, len(shape))
    hs = _spacing(spacing, shape, walls)
    k = _checked_k(k, shape)
    singular = all(w != "dirichlet" for w in walls)
    if singular:
        scale = float(xp.mean(xp.abs(arr)))
        mean = float(xp.mean(arr))
        if abs(mean) > COMPATIBILITY * scale:
            raise StencilforgeError(
                f"f is incompatible with {'/'.join(sorted(set(walls)))} walls: its mean is {mean:.3e} "
                f"(relative {abs(mean) / scale:.1e}), it must be 0; subtract f.mean() to solve the nearest compatible problem"
            )
    layout = _layout(comm, procs, engine, shape, walls)
    try:
        with numba_threads(engine, threads, comm) as count:
            result = Solve(engine, arr, hs, walls, k, _wall_values(value, shape, walls, hs), dtype, tol, max_cycles, method,
                           cycle, smoother, pre, post, fmg, mixed, layout).run()
        result.summary["threads"] = count
        return result
    finally:
        layout.close()


def _layout(comm, procs, engine, shape, walls):
    """Undivided without a communicator, else this rank's blocks of the fine levels (on CPU or GPU ranks)."""
    if comm is None:
        if procs is not None:
            raise StencilforgeError("procs (a process grid) needs comm, the MPI communicator to split over")
        return Undivided()
    from .decomposed import BlockLayout

    return BlockLayout(comm, shape, walls, procs, xp=engine.xp)


class Solve:
    """One solve: the hierarchy (float32 for mixed precision), the float64 outer state, the loop."""

    def __init__(self, engine, f, spacing, walls, k, walls_g, dtype, tol, max_cycles, method, cycle, smoother, pre, post, fmg, mixed,
                 layout):
        self.engine = engine
        self.layout = layout
        self.xp = xp = engine.xp
        self.tol, self.max_cycles, self.method, self.fmg, self.mixed = tol, max_cycles, method, fmg, mixed
        self.options = dict(cycle=cycle, smoother=smoother, pre=pre, post=post)
        self.walls = walls
        self.dtype = dtype
        self.traffic = Traffic()
        started = time.perf_counter()
        self.kernels = layout.kernels(_kernels(engine, self.traffic))
        inner = np.dtype(np.float32) if mixed else dtype
        self.mg = Multigrid(f.shape, walls, spacing, k, inner, self.kernels, symmetric=method == "cg", layout=layout, **self.options)
        self.rhs_norm = float(xp.linalg.norm(f))
        rhs = f
        if walls_g is not None:
            rhs = f - xp.asarray(op.apply(np, walls_g, level_faces(f.shape, walls, spacing, k)))
        if self.rhs_norm == 0.0:
            self.rhs_norm = float(xp.linalg.norm(rhs)) or 1.0
        self.walls_g = walls_g
        # the outer (float64 for mixed precision) state: the finest level's operator, u and f
        self.faces = [xp.asarray(a, dtype=dtype) for a in self.mg.finest.host_faces] if mixed else self.mg.finest.faces
        self.f = xp.asarray(layout.block(rhs), dtype=dtype)
        shape = self.mg.finest.shape  # this rank's block
        self.own_u = xp.zeros(tuple(n + 2 for n in shape), dtype=dtype) if mixed or method == "cg" else None
        self.r = xp.zeros(shape, dtype=dtype) if mixed else None
        if not mixed:
            self.mg.finest.f[...] = self.f
        self._outer = self.outer_level()
        self.cycle = self.kernels.recorded(self.mg.cycle)
        self.setup_s = time.perf_counter() - started

    @property
    def u(self):
        """The solution's ghosted array: the finest level's iterate unless it is only a correction."""
        return self.mg.finest.u if self.own_u is None else self.own_u

    def relative_residual(self) -> float:
        return math.sqrt(self.kernels.residual_norm2(self._outer, self.u, self.f)) / self.rhs_norm

    def outer_level(self):
        level = self.mg.finest
        if not self.mixed:
            return level
        outer = dataclasses.replace(level, faces=self.faces, u=None, spare=None, f=None, down=None, up=None)
        self.kernels.bind(outer)
        return outer

    def _timed(self, action) -> tuple[float, int]:
        self.engine.synchronize()
        before = self.traffic.bytes
        start = time.perf_counter()
        action()
        self.engine.synchronize()
        return time.perf_counter() - start, self.traffic.bytes - before

    def _multigrid_step(self, first: bool) -> None:
        mg = self.mg
        fine = mg.finest
        if self.mixed:
            if first and self.fmg:
                fine.f[...] = self.f
            else:
                self.kernels.residual(self._outer, self.u, self.f, self.r)
                fine.f[...] = self.r
                fine.u[...] = 0
        if first and self.fmg:
            mg.full_multigrid()
        else:
            self.cycle()
        if self.mixed:
            interior = self.u[fine.interior]
            interior += fine.u[fine.interior]
        if mg.singular:
            mg.remove_mean(self.u)

    def run(self):
        history = [self.relative_residual()]
        times, moved = [], []
        start = time.perf_counter()
        if self.method == "cg":
            history, times, moved = self._cg(history)
        else:
            while history[-1] >= self.tol and len(times) < self.max_cycles:
                seconds, nbytes = self._timed(lambda: self._multigrid_step(first=not times))
                times.append(seconds)
                moved.append(nbytes)
                history.append(self.relative_residual())
                if stalled(history):
                    break
        wall = time.perf_counter() - start
        u = self.layout.gather(self.u[self.mg.finest.interior])
        return PoissonResult(u, self._summary(history, times, moved, wall))

    def _cg(self, history):
        """CG on L u = f preconditioned by one cycle from zero (symmetric: pre and post sweeps mirror)."""
        xp = self.xp
        mg = self.mg
        fine = mg.finest
        c = fine.interior
        outer = self._outer
        times, moved = [], []
        r = xp.array(self.f)
        p = xp.zeros_like(self.u)
        q = xp.zeros(fine.shape, dtype=self.dtype)
        zero = xp.zeros(fine.shape, dtype=self.dtype)

        def precondition():
            fine.f[...] = r
            fine.u[...] = 0
            self.cycle()
            z = xp.array(fine.u[c], dtype=self.dtype)
            if mg.singular:
                z -= self.layout.mean(z).astype(z.dtype)
            return z

        rz = None
        residual = history[-1]
        while residual >= self.tol and len(times) < self.max_cycles:
            def iteration():
                nonlocal rz, residual
                z = precondition()
                rz_new = self.layout.dot(xp, r, z)
                if rz is None:
                    p[c] = z
                else:
                    p[c] = z + (rz_new / rz) * p[c]
                rz = rz_new
                self.kernels.residual(outer, p, zero, q)  # q = -L p
                alpha = rz / self.layout.dot(xp, p[c], -q)
                self.u[c] += alpha * p[c]
                r[...] = r + alpha * q
                residual = math.sqrt(self.layout.dot(xp, r, r)) / self.rhs_norm
                self.traffic.add(r, z, p, p, p, self.u, self.u, r, r, q, q)

            seconds, nbytes = self._timed(iteration)
            times.append(seconds)
            moved.append(nbytes)
            history.append(residual)
        if mg.singular:
            mg.remove_mean(self.u)
        history[-1] = self.relative_residual()
        return history, times, moved

    def _summary(self, history, times, moved, wall) -> dict:
        factors = [b / a for a, b in zip(history, history[1:]) if a > 0]
        if self.fmg and self.method == "multigrid" and len(times) > 1:  # a cycle's figures leave out the FMG start
            times, moved = times[1:], moved[1:]
        cycle_s = float(np.median(times)) if times else None
        per_cycle = int(np.median(moved)) if moved else 0
        cells = int(np.prod(self.mg.finest.shape))
        itemsize = self.mg.dtype.itemsize
        converged = history[-1] < self.tol
        return {
            "method": self.method,
            "backend": self.engine.name,
            "shape": list(self.mg.shapes[0]),
            "dtype": self.dtype.name,
            "precision": "mixed" if self.mixed else self.dtype.name,
            "walls": list(self.walls),
            **self.options,
            "fmg": self.fmg and self.method == "multigrid",
            "levels": [list(shape) for shape in self.mg.shapes],
            **self.layout.summary(),
            "cycles": len(times),
            "residual": history[-1],
            "residual_history": history,
            "factors": factors,
            "mean_factor": (history[-1] / history[1]) ** (1 / (len(history) - 2)) if len(history) > 2 and history[1] > 0 else None,
            "converged": converged,
            "tol": self.tol,
            "setup_s": self.setup_s,
            "wall_s": wall,
            "cycle_s": cycle_s,
            "bytes_per_cycle": per_cycle,
            "passes_per_cycle": per_cycle / (cells * itemsize) if cells else None,
            "teff_gbps": per_cycle / cycle_s / 1e9 if cycle_s else None,
        }
