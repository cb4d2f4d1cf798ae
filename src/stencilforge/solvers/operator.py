"""div(k grad u) on one level as array-module code (NumPy or CuPy: the same statements run on both).

The operator is stored as one face-coefficient array per axis, already divided
by h^2: faces[a] has n_a + 1 entries along axis a (face i sits between nodes
i - 1 and i, faces 0 and n_a are the walls) and is broadcast (length 1) along
the axes where it does not vary, so a constant k costs no memory traffic.
(L u)_i = sum_a faces_a[i+1] (u_{i+1} - u_i) - faces_a[i] (u_i - u_{i-1}),
with u a ghosted array (one ghost layer). A neumann wall has a zero face, so
its ghost value never matters; dirichlet ghosts hold the wall values; periodic
ghosts are refreshed from the opposite end before every stencil pass.
A screened operator L u - shift * u (shift >= 0, a constant: `sf.Solve`'s backward-Euler
form) adds the shift to the diagonal; the compiled kernels take only shift = 0.
This NumPy/CuPy code is the oracle the numba kernels are tested against.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..boundary import ghost_region, slab
from ..grid import Grid


def harmonic_faces(k: np.ndarray, axis: int, wall: str) -> np.ndarray:
    """Face values of a nodal coefficient (host, float64): harmonic means of neighbours, which keep the
    flux continuous across a jump in k. Past a non-periodic wall k is extrapolated log-linearly from the
    first two nodes (second order for smooth k), the ratio limited to [1/2, 2] so a jump next to a wall
    does not send the wall's coefficient towards zero or infinity."""
    n = k.shape[axis]

    def end(first: int, second: int) -> np.ndarray:
        k0, k1 = np.take(k, [first], axis=axis), np.take(k, [second], axis=axis)
        return k0 * np.clip(k0 / k1, 0.5, 2.0) if n > 1 else k0

    if wall == "periodic":
        ext = np.concatenate([np.take(k, [n - 1], axis=axis), k, np.take(k, [0], axis=axis)], axis=axis)
    else:
        ext = np.concatenate([end(0, 1), k, end(n - 1, n - 2)], axis=axis)
    a = np.take(ext, np.arange(n + 1), axis=axis)
    b = np.take(ext, np.arange(1, n + 2), axis=axis)
    faces = 2.0 * a * b / (a + b)
    if wall == "neumann":
        faces[slab(k.ndim, axis, slice(0, 1))] = 0.0
        faces[slab(k.ndim, axis, slice(n, n + 1))] = 0.0
    return faces


def constant_faces(shape, axis: int, wall: str, value: float) -> np.ndarray:
    """A constant coefficient's faces along one axis as a broadcastable array (zero at neumann walls)."""
    line = np.full(shape[axis] + 1, value, dtype=np.float64)
    if wall == "neumann":
        line[0] = line[-1] = 0.0
    return line.reshape(tuple(n + 1 if b == axis else 1 for b, n in enumerate(shape)))


def _sl(arr, axis: int, sl: slice, other: dict[int, slice] | None = None):
    """arr sliced by `sl` along `axis` and by other[b] along each other axis where it is not broadcast."""
    idx = []
    for b in range(arr.ndim):
        if b == axis:
            idx.append(sl)
        elif other is not None and arr.shape[b] != 1:
            idx.append(other[b])
        else:
            idx.append(slice(None))
    return arr[tuple(idx)]


def shifted(interior: tuple[slice, ...], axis: int, by: int) -> tuple[slice, ...]:
    return tuple(slice(s.start + by, s.stop + by, s.step) if b == axis else s for b, s in enumerate(interior))


def apply(xp, u, faces, out=None, shift: float = 0.0):
    """L u (minus shift * u) on the interior of the ghosted u."""
    shape = tuple(n - 2 for n in u.shape)
    c = tuple(slice(1, 1 + n) for n in shape)
    centre = u[c]
    total = None
    for a, kf in enumerate(faces):
        n = shape[a]
        term = _sl(kf, a, slice(1, n + 1)) * (u[shifted(c, a, 1)] - centre) - _sl(kf, a, slice(0, n)) * (centre - u[shifted(c, a, -1)])
        total = term if total is None else total + term
    if shift:
        total = total - shift * centre
    if out is None:
        return total
    out[...] = total
    return out


def residual(xp, u, f, faces, out=None, shift: float = 0.0):
    """f - L u."""
    r = f - apply(xp, u, faces, shift=shift)
    if out is None:
        return r
    out[...] = r
    return out


def _diagonal_sum(faces, shape, a_slices):
    total = None
    for a, kf in enumerate(faces):
        lo = a_slices[a]
        hi = slice(lo.start + 1, lo.stop + 1, lo.step)
        part = _sl(kf, a, lo, a_slices) + _sl(kf, a, hi, a_slices)
        total = part if total is None else total + part
    return total


def jacobi(xp, u, f, faces, omega: float, out, shift: float = 0.0) -> None:
    """Weighted Jacobi into the ghosted `out`: u + omega (L u - f) / sum(faces) (sum(faces) + shift = -diag)."""
    shape = f.shape
    every = {a: slice(0, n) for a, n in enumerate(shape)}
    diag = _diagonal_sum(faces, shape, every)
    if shift:
        diag = diag + shift
    c = tuple(slice(1, 1 + n) for n in shape)
    out[c] = u[c] + omega * (apply(xp, u, faces, shift=shift) - f) / diag


def colour_update(xp, u, f, faces, colour: int, omega: float, shift: float = 0.0) -> None:
    """Over-relaxed Gauss-Seidel update of the nodes whose index sum has parity `colour`, in place.

    One strided sub-lattice per parity pattern (2 in 2D, 4 in 3D): every
    neighbour of a node has the other colour, so the update is a plain
    vectorised expression.
    """
    shape = f.shape
    nd = len(shape)
    for parity in itertools.product((0, 1), repeat=nd):
        if sum(parity) % 2 != colour or any(p >= n for p, n in zip(parity, shape)):
            continue
        fsl = {a: slice(p, n, 2) for a, (p, n) in enumerate(zip(parity, shape))}
        c = tuple(slice(1 + p, 1 + n, 2) for p, n in zip(parity, shape))
        num = -f[tuple(fsl[a] for a in range(nd))]
        den = None
        for a, kf in enumerate(faces):
            p, n = parity[a], shape[a]
            lo = _sl(kf, a, slice(p, n, 2), fsl)
            hi = _sl(kf, a, slice(p + 1, n + 1, 2), fsl)
            num = num + lo * u[shifted(c, a, -1)] + hi * u[shifted(c, a, 1)]
            part = lo + hi
            den = part if den is None else den + part
        if shift:
            assert den is not None, "a level has at least one axis"
            den = den + shift
        u[c] = (1 - omega) * u[c] + omega * (num / den)


def periodic_filler(shape, walls):
    """The ghost refresh of a ghosted array for the periodic axes (None when there are none)."""
    grid = Grid(tuple(shape), (1.0,) * len(shape), np.dtype(np.float64), 1, (0.0,) * len(shape))
    pairs = []
    for a, wall in enumerate(walls):
        if wall == "periodic":
            n = shape[a]
            pairs.append((ghost_region(grid, a, 0), slab(len(shape), a, slice(n, n + 1))))
            pairs.append((ghost_region(grid, a, 1), slab(len(shape), a, slice(1, 2))))
    if not pairs:
        return None

    def fill(u):
        for dst, src in pairs:
            u[dst] = u[src]

    return fill


def transfer(xp, arr, tables):
    """Apply per-axis banded tables (None: axis unchanged) to an interior array."""
    for a, table in enumerate(tables):
        if table is None:
            continue
        index, weight = table
        bcast = tuple(-1 if b == a else 1 for b in range(arr.ndim))
        out = None
        for b in range(index.shape[1]):
            part = weight[:, b].reshape(bcast) * xp.take(arr, index[:, b], axis=a)
            out = part if out is None else out + part
        arr = out
    return arr


def dense_matrix(faces, shape, walls, shift: float = 0.0) -> np.ndarray:
    """The level's operator as a dense float64 matrix (host), rows in C order, for the coarse solve."""
    size = int(np.prod(shape))
    mat = np.zeros((size, size))
    rows = np.arange(size)
    if shift:
        mat[rows, rows] = -shift
    coords = np.unravel_index(rows, shape)
    for a, kf in enumerate(faces):
        n = shape[a]
        full = np.broadcast_to(np.asarray(kf, dtype=np.float64), tuple(m + 1 if b == a else m for b, m in enumerate(shape)))
        lo = np.take(full, np.arange(n), axis=a).ravel()
        hi = np.take(full, np.arange(1, n + 1), axis=a).ravel()
        np.add.at(mat, (rows, rows), -(lo + hi))
        pos = coords[a]
        for side, coef in ((-1, lo), (1, hi)):
            other = pos + side
            if walls[a] == "periodic":
                other %= n
                keep = np.ones(size, bool)
            else:
                keep = (other >= 0) & (other < n)
            nbr = np.ravel_multi_index(
                tuple(np.clip(other, 0, n - 1) if b == a else p for b, p in enumerate(coords)),
                shape,
            )
            np.add.at(mat, (rows[keep], nbr[keep]), coef[keep])
    return mat
