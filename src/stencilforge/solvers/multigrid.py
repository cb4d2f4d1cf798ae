"""Geometric multigrid for div(k grad u) = f: the level hierarchy, V/W cycles and full multigrid.

Levels hold ghosted iterates with homogeneous walls (the caller moves
non-zero Dirichlet values into f first), so every level, the finest included,
solves for a correction the same way. The kernels (stencil passes and
transfers) come from a `Kernels` object: array-module code for numpy and cupy,
compiled loops for numba; each records the compulsory bytes it moves so a
cycle's effective bandwidth can be reported. A layout places the levels:
`Undivided` keeps them whole, `decomposed.BlockLayout` gives an MPI rank its
block of the fine levels.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from threadpoolctl import threadpool_limits

from ..errors import StencilforgeError
from . import operator as op
from .geometry import Transfer, coarsened_axes, transfers

DIRECT_LIMIT = 512  # unknowns solved by a dense inverse on the coarsest level
OMEGA = {2: 4 / 5, 3: 6 / 7}  # weighted Jacobi's smoothing-optimal weights for the 5- and 7-point stencils
# Red-black over-relaxation: Yavneh's observation that omega > 1 smooths better for red-black ordering;
# these values were chosen by measuring V(2,2) residual factors on nested and non-nested grids.
RB_OMEGA = {2: 1.2, 3: 1.25}


@dataclass
class Traffic:
    """Compulsory bytes moved by the kernels since the last reset."""

    bytes: int = 0

    def add(self, *arrays) -> None:
        self.bytes += sum(int(a.size) * a.itemsize for a in arrays)


@dataclass
class Level:
    shape: tuple[int, ...]
    walls: tuple[str, ...]
    spacing: tuple[float, ...]
    host_faces: list  # float64 numpy, broadcastable
    faces: list = field(default_factory=list)  # on the device, in the level's dtype
    u: Any = None  # arrays of the level's backend (NumPy or CuPy)
    spare: Any = None  # Jacobi's second buffer
    f: Any = None
    down: list | None = None  # per axis (index, weight) fine residual -> coarse, or None (axis not coarsened)
    up: list | None = None  # per axis (index into the coarse ghosted array, weight) coarse -> fine
    fill: Callable | None = None  # ghost refresh (periodic wrap, halo exchange) or None
    parity: int = 0  # sum of the block's global start indices mod 2: colours are global
    block: Any = None  # a rank's block of a decomposed level (decomposed.Block), else None
    shift: float = 0.0  # the screened operator's L u - shift * u (ArrayKernels only)

    @property
    def interior(self) -> tuple[slice, ...]:
        return tuple(slice(1, 1 + n) for n in self.shape)

    def refresh(self, arr) -> None:
        if self.fill is not None:
            self.fill(arr)


def level_faces(shape, walls, spacing, k) -> list:
    """Host float64 face coefficients / h^2 per axis; k None or a float64 nodal array."""
    faces = []
    for a, (wall, h) in enumerate(zip(walls, spacing)):
        if k is None:
            faces.append(op.constant_faces(shape, a, wall, 1.0 / (h * h)))
        else:
            faces.append(op.harmonic_faces(k, a, wall) / (h * h))
    return faces


def build_levels(shape, walls, spacing, k) -> list[Level]:
    """The hierarchy's geometry on the host: coarsen until the coarsest is small enough to invert."""
    levels = [Level(tuple(shape), tuple(walls), tuple(spacing), level_faces(shape, walls, spacing, k))]
    while int(np.prod(levels[-1].shape)) > DIRECT_LIMIT:
        fine = levels[-1]
        axes = coarsened_axes(fine.shape, fine.walls, fine.spacing)
        if not any(axes):
            break
        shape_c: list[int] = []
        spacing_c: list[float] = []
        down: list[Transfer | None] = []
        up: list[Transfer | None] = []
        for a, (n, wall, h) in enumerate(zip(fine.shape, fine.walls, fine.spacing)):
            if not axes[a]:
                shape_c.append(n)
                spacing_c.append(h)
                down.append(None)
                up.append(None)
                continue
            m, interp, restrict = transfers(n, wall)
            big = n + 1 if wall == "dirichlet" else n
            small = m + 1 if wall == "dirichlet" else m
            shape_c.append(m)
            spacing_c.append(h * big / small)
            down.append(restrict)
            up.append(interp)
        if k is not None:
            k = op.transfer(np, k, [None if t is None else (t.index, t.weight) for t in down])
            k = k / op.transfer(np, np.ones(fine.shape), [None if t is None else (t.index, t.weight) for t in down])
        fine.down, fine.up = down, up
        levels.append(Level(tuple(shape_c), fine.walls, tuple(spacing_c), level_faces(shape_c, fine.walls, spacing_c, k)))
    return levels


def ghosted_up(up: list, shape) -> list:
    """Interpolation tables reading the coarse ghosted array (index + 1), identity on the axes not coarsened."""
    out = []
    for t, n in zip(up, shape):
        if t is None:
            out.append(Transfer(np.arange(1, n + 1, dtype=np.int64).reshape(n, 1), np.ones((n, 1))))
        else:
            out.append(Transfer(t.index + 1, t.weight))
    return out


class Undivided:
    """The layout of a solve on one process: every level whole, sums and means computed locally."""

    def localize(self, levels: list[Level], dtype, xp) -> list[Level]:
        for level in levels:
            level.fill = op.periodic_filler(level.shape, level.walls)
            if level.up is not None:
                level.up = ghosted_up(level.up, level.shape)
        return levels

    def block(self, arr):
        return arr

    def gather(self, arr):
        return arr

    def kernels(self, kernels):
        return kernels

    def dot(self, xp, a, b) -> float:
        return float(xp.vdot(a, b))

    def norm2(self, xp, a) -> float:
        """sum(a**2) in float64."""
        return float(xp.sum(xp.square(a, dtype=np.float64)))

    def mean(self, arr):
        """The mean in float64. A GPU array with gaps between its rows (a ghosted level's interior) is summed row
        by row first: CuPy reduces such an array to one number in a single block of threads
        (benchmarks/results/cavity-step-h200-2026-12-02.json)."""
        if isinstance(arr, np.ndarray) or arr.flags.c_contiguous:
            return arr.mean(dtype=np.float64)
        return arr.sum(axis=-1, dtype=np.float64).sum() / arr.size

    def summary(self) -> dict:
        return {}

    def close(self) -> None:
        """Nothing held."""


def coarse_inverse(level: Level, singular: bool, constant: bool = False) -> np.ndarray:
    """Dense inverse of the coarsest operator; with a constant null space, of the system bordered by
    the constraint sum(u) = 0, whose leading block maps a compatible f to the zero-mean solution.
    With a constant coefficient the inverse depends only on the level's geometry and is kept for the next solve."""
    if constant:
        return _constant_inverse(level.shape, level.walls, level.spacing, singular, level.shift)
    return _inverse(op.dense_matrix(level.host_faces, level.shape, level.walls, level.shift), singular)


@functools.lru_cache(maxsize=16)
def _constant_inverse(shape, walls, spacing, singular: bool, shift: float = 0.0) -> np.ndarray:
    inverse = _inverse(op.dense_matrix(level_faces(shape, walls, spacing, None), shape, walls, shift), singular)
    inverse.setflags(write=False)
    return inverse


def _inverse(mat: np.ndarray, singular: bool) -> np.ndarray:
    """LAPACK's inverse on one BLAS thread: its last bits depend on the thread count, which differs between
    machines and between MPI ranks bound to different numbers of cores, and every rank of a split solve must
    cycle the gathered levels with the same inverse (and any rank count give the same bits)."""
    size = mat.shape[0]
    if singular:
        bordered = np.zeros((size + 1, size + 1))
        bordered[:size, :size] = mat
        bordered[:size, size] = bordered[size, :size] = 1.0
        mat = bordered
    with threadpool_limits(limits=1, user_api="blas"):
        return np.linalg.inv(mat)[:size, :size]


class HostCalls:
    """What kernels called from the host one by one share: the coarse solve as a matrix product, and
    no recording of a cycle (there is no launch cost to save)."""

    traffic: Traffic

    def dense_solve(self, level: Level, inverse) -> None:
        level.u[level.interior] = (inverse @ level.f.reshape(-1)).reshape(level.shape)
        self.traffic.add(inverse, level.f, level.f)

    def recorded(self, fn):
        return fn


class ArrayKernels(HostCalls):
    """Stencil passes and transfers as array-module statements (NumPy, or CuPy on a GPU)."""

    screened = True  # they take the screened operator's shift (`Level.shift`)

    def __init__(self, xp, traffic: Traffic):
        self.xp = xp
        self.traffic = traffic

    def bind(self, level: Level) -> None:
        """Nothing to prepare: array code reads the level's arrays directly."""

    def smooth_colour(self, level: Level, colour: int, omega: float) -> None:
        level.refresh(level.u)
        op.colour_update(self.xp, level.u, level.f, level.faces, (colour + level.parity) % 2, omega, level.shift)
        self.traffic.add(level.u, level.f, level.u, *level.faces)

    def jacobi(self, level: Level, omega: float) -> None:
        level.refresh(level.u)
        op.jacobi(self.xp, level.u, level.f, level.faces, omega, level.spare, level.shift)
        level.u, level.spare = level.spare, level.u
        self.traffic.add(level.u, level.f, level.u, *level.faces)

    def residual(self, level: Level, u, f, out) -> None:
        level.refresh(u)
        op.residual(self.xp, u, f, level.faces, out=out, shift=level.shift)
        self.traffic.add(u, f, out, *level.faces)

    def residual_norm2(self, level: Level, u, f) -> float:
        level.refresh(u)
        r = op.residual(self.xp, u, f, level.faces, shift=level.shift)
        self.traffic.add(u, f, *level.faces)
        return float(self.xp.sum(self.xp.square(r.astype(np.float64))))

    def restrict_residual(self, level: Level, coarse: Level) -> None:
        level.refresh(level.u)
        r = op.residual(self.xp, level.u, level.f, level.faces, shift=level.shift)
        self.traffic.add(level.u, level.f, r, *level.faces)
        self.restrict(level, r, coarse)

    def restrict(self, level: Level, r, coarse: Level) -> None:
        """coarse.f from a residual array `r` that level.down indexes."""
        coarse.f[...] = op.transfer(self.xp, r, level.down)
        self.traffic.add(r, coarse.f)

    def prolong_add(self, level: Level, coarse: Level) -> None:
        interior = level.u[level.interior]
        interior += op.transfer(self.xp, coarse.u, level.up)
        self.traffic.add(coarse.f, level.f, level.f)  # coarse correction read, fine iterate read and written


class Multigrid:
    """A hierarchy bound to a backend and a dtype, with its cycles.

    level 0 is the finest; each level's `f` is its right-hand side and `u` its
    iterate (a correction on coarse levels).
    """

    def __init__(self, shape, walls, spacing, k, dtype, kernels, *, cycle="V", smoother="rbgs", pre=2, post=2, symmetric=False,
                 layout=None, shift: float = 0.0):
        self.xp = kernels.xp
        self.dtype = np.dtype(dtype)
        self.layout = Undivided() if layout is None else layout
        self.kernels = kernels
        self.gamma = 2 if cycle == "W" else 1
        self.smoother = smoother
        self.pre, self.post = pre, post
        self.symmetric = symmetric  # post-smoothing mirrors pre-smoothing (black before red): a symmetric preconditioner
        self.singular = shift == 0 and all(w != "dirichlet" for w in walls)
        if shift and not getattr(kernels, "screened", False):
            raise StencilforgeError("a screened operator (shift > 0) runs on the array kernels (NumPy or CuPy) only")
        levels = build_levels(shape, walls, spacing, k)
        self.shapes = [level.shape for level in levels]  # global shapes
        xp = self.xp
        self.levels = self.layout.localize(levels, self.dtype, xp)
        for level in self.levels:
            level.shift = float(shift)
            level.faces = [xp.asarray(f, dtype=self.dtype) for f in level.host_faces]
            padded = tuple(n + 2 for n in level.shape)
            level.u = xp.zeros(padded, dtype=self.dtype)
            level.spare = xp.zeros(padded, dtype=self.dtype) if smoother == "jacobi" else None
            level.f = xp.zeros(level.shape, dtype=self.dtype)
            for name in ("down", "up"):
                tables = getattr(level, name)
                if tables is not None:
                    bound = [None if t is None else (xp.asarray(t.index), xp.asarray(t.weight, dtype=self.dtype)) for t in tables]
                    setattr(level, name, bound)
            kernels.bind(level)
        self.inverse = xp.asarray(coarse_inverse(self.levels[-1], self.singular, constant=k is None), dtype=self.dtype)
        self.omega = OMEGA[len(shape)] if smoother == "jacobi" else RB_OMEGA[len(shape)]

    @property
    def finest(self) -> Level:
        return self.levels[0]

    def smooth(self, level: Level, sweeps: int, reverse: bool) -> None:
        for _ in range(sweeps):
            if self.smoother == "jacobi":
                self.kernels.jacobi(level, self.omega)
            else:
                for colour in (1, 0) if reverse and self.symmetric else (0, 1):
                    self.kernels.smooth_colour(level, colour, self.omega)

    def coarse_solve(self) -> None:
        self.kernels.dense_solve(self.levels[-1], self.inverse)

    def cycle(self, index: int = 0) -> None:
        """One V (or W) cycle on level `index`, from its current iterate."""
        if index == len(self.levels) - 1:
            self.coarse_solve()
            return
        level, coarse = self.levels[index], self.levels[index + 1]
        self.smooth(level, self.pre, reverse=False)
        self.kernels.restrict_residual(level, coarse)
        coarse.u[...] = 0
        visits = 1 if index + 1 == len(self.levels) - 1 else self.gamma
        for _ in range(visits):
            self.cycle(index + 1)
        self.kernels.prolong_add(level, coarse)
        self.smooth(level, self.post, reverse=True)

    def full_multigrid(self) -> None:
        """FMG: restrict f to every level, solve the coarsest, then interpolate and cycle once per level."""
        for level, coarse in zip(self.levels, self.levels[1:]):
            level.u[...] = 0
            self.kernels.restrict_residual(level, coarse)
        self.coarse_solve()
        for index in range(len(self.levels) - 2, -1, -1):
            level, coarse = self.levels[index], self.levels[index + 1]
            level.u[...] = 0
            self.kernels.prolong_add(level, coarse)
            self.cycle(index)

    def remove_mean(self, u) -> None:
        """Project out the constant null space (periodic or neumann on every wall)."""
        interior = u[self.finest.interior]
        interior -= self.layout.mean(interior).astype(interior.dtype)
