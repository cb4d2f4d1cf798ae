"""Stencils as immutable maps from integer offsets to coefficients.

Weights of derived stencils come from Fornberg's algorithm evaluated in exact
rationals, so a 16th-order Laplacian carries no rounding from its derivation;
backends convert them to the field dtype when they build a kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping, Sequence

from .errors import StencilforgeError

Offset = tuple[int, ...]
GROUP_LIMIT = 8  # entries a weight group holds at most (`Stencil.weight_groups`)


def fornberg_weights(order: int, x0: Fraction | int, nodes: Sequence[Fraction | int]) -> list[Fraction]:
    """Exact weights w_j with sum_j w_j f(nodes[j]) ~ f^(order)(x0) (Fornberg 1988)."""
    n = len(nodes)
    if order >= n:
        raise StencilforgeError(f"{n} nodes cannot approximate a derivative of order {order}")
    xs = [Fraction(x) for x in nodes]
    z = Fraction(x0)
    c = [[Fraction(0)] * (order + 1) for _ in range(n)]
    c[0][0] = Fraction(1)
    c1 = Fraction(1)
    c4 = xs[0] - z
    for i in range(1, n):
        mn = min(i, order)
        c2 = Fraction(1)
        c5 = c4
        c4 = xs[i] - z
        for j in range(i):
            c3 = xs[i] - xs[j]
            c2 *= c3
            if j == i - 1:
                for k in range(mn, 0, -1):
                    c[i][k] = c1 * (k * c[i - 1][k - 1] - c5 * c[i - 1][k]) / c2
                c[i][0] = -c1 * c5 * c[i - 1][0] / c2
            for k in range(mn, 0, -1):
                c[j][k] = (c4 * c[j][k] - k * c[j][k - 1]) / c3
            c[j][0] = c4 * c[j][0] / c3
        c1 = c2
    return [c[j][order] for j in range(n)]


def central_weights(order: int, radius: int) -> dict[int, Fraction]:
    """Exact central weights for d^order/dx^order on offsets -radius..radius (unit spacing)."""
    offsets = list(range(-radius, radius + 1))
    return {o: w for o, w in zip(offsets, fornberg_weights(order, 0, offsets)) if w != 0}


@dataclass(frozen=True)
class Stencil:
    """An immutable map of integer offsets to coefficients (exact Fractions or floats)."""

    entries: tuple[tuple[Offset, Fraction | float], ...]

    def __post_init__(self) -> None:
        if not self.entries:
            raise StencilforgeError("a stencil needs at least one point")
        dims = {len(o) for o, _ in self.entries}
        if len(dims) != 1:
            raise StencilforgeError("all stencil offsets must have the same number of dimensions")
        for o, c in self.entries:
            if not all(isinstance(i, int) for i in o):
                raise StencilforgeError(f"stencil offset {o} is not made of integers")
            if not math.isfinite(float(c)):
                raise StencilforgeError(f"stencil coefficient at {o} is not finite")

    @classmethod
    def from_dict(cls, weights: Mapping[Any, Fraction | float]) -> "Stencil":
        """From {offset: weight}, an offset being any sequence of integers; repeated offsets add up."""
        merged: dict[Offset, Fraction | float] = {}
        for o, c in weights.items():
            key = tuple(int(i) for i in o)
            merged[key] = merged.get(key, 0) + c
        return cls(tuple(sorted((o, c) for o, c in merged.items() if c != 0)))

    @property
    def ndim(self) -> int:
        return len(self.entries[0][0])

    @property
    def radius(self) -> int:
        return max(max(abs(i) for i in o) for o, _ in self.entries)

    def weight_groups(self) -> tuple[tuple[Fraction | float, tuple[Offset, ...]], ...]:
        """The entries gathered by weight (equal as float64): each group's offsets in entry order, a new group
        after GROUP_LIMIT, the groups in the order of their first entries.

        The CPU backends' order of operations: a group's values are added left to right, then multiplied
        by its weight once, c * (a + b + ...), and the groups added in order. A symmetric stencil needs
        half the multiplies of c * a + c * b, and its additions form a shorter dependent chain; a wide
        star's CPU time is bound by that arithmetic (cpu-grouped-order-2026-11-27.json). NumPy's oracle
        and every numba kernel follow it, so they agree bit for bit. The limit keeps a group inside one of
        numba's vectorised loops.
        """
        groups: list[tuple[Fraction | float, list[Offset]]] = []
        open_group: dict[float, list[Offset]] = {}
        for o, c in self.entries:
            members = open_group.get(float(c))
            if members is None or len(members) == GROUP_LIMIT:
                members = open_group[float(c)] = []
                groups.append((c, members))
            members.append(o)
        return tuple((c, tuple(offsets)) for c, offsets in groups)

    def as_dict(self) -> dict[Offset, Fraction | float]:
        return dict(self.entries)

    def scaled(self, factor: Fraction | float) -> "Stencil":
        return Stencil.from_dict({o: c * factor for o, c in self.entries})

    def __add__(self, other: "Stencil") -> "Stencil":
        if other.ndim != self.ndim:
            raise StencilforgeError("cannot add stencils of different dimensions")
        merged = self.as_dict()
        for o, c in other.entries:
            merged[o] = merged.get(o, 0) + c
        return Stencil.from_dict(merged)

    def symbol_max(self) -> float:
        """Largest |sum_o c_o exp(i k.o)| over the checkerboard modes k in {0, pi}^d.

        For the symmetric star stencils used here this is the spectral radius that
        sets explicit time-step limits.
        """
        best = 0.0
        for mask in range(2**self.ndim):
            total = 0.0
            for o, c in self.entries:
                sign = (-1) ** sum(o[d] for d in range(self.ndim) if mask >> d & 1)
                total += float(c) * sign
            best = max(best, abs(total))
        return best

    # Named constructors -------------------------------------------------

    @classmethod
    def identity(cls, ndim: int) -> "Stencil":
        return cls.from_dict({(0,) * ndim: Fraction(1)})

    @classmethod
    def derivative(cls, order: int, axis: int, ndim: int, radius: int, spacing: float = 1.0) -> "Stencil":
        """Central derivative of the given order along one axis (axis 0 is the slowest)."""
        if not 0 <= axis < ndim:
            raise StencilforgeError(f"axis {axis} out of range for {ndim} dimensions")
        if radius < 1:
            raise StencilforgeError("stencil radius must be at least 1")
        weights = {}
        for o, w in central_weights(order, radius).items():
            off = [0] * ndim
            off[axis] = o
            weights[tuple(off)] = w
        return cls.from_dict(weights).scaled(_inverse_power(spacing, order))

    @classmethod
    def laplacian(cls, ndim: int, radius: int = 1, spacing: float | Sequence[float] = 1.0) -> "Stencil":
        """Star Laplacian of order 2*radius: the sum of central second derivatives."""
        hs = [spacing] * ndim if isinstance(spacing, (int, float, Fraction)) else list(spacing)
        if len(hs) != ndim:
            raise StencilforgeError("one spacing per dimension is needed")
        total = cls.derivative(2, 0, ndim, radius, hs[0])
        for axis in range(1, ndim):
            total = total + cls.derivative(2, axis, ndim, radius, hs[axis])
        return total

    @classmethod
    def five_point(cls, spacing: float = 1.0) -> "Stencil":
        return cls.laplacian(2, 1, spacing)

    @classmethod
    def seven_point(cls, spacing: float = 1.0) -> "Stencil":
        return cls.laplacian(3, 1, spacing)

    @classmethod
    def seven_point_general(cls, c: Sequence[float]) -> "Stencil":
        """The 3D 7-point stencil with coefficients c0 (centre) .. c6."""
        if len(c) != 7:
            raise StencilforgeError("the 7-point stencil takes exactly seven coefficients c0..c6")
        offs = [(0, 0, 0), (0, 0, -1), (0, 0, 1), (0, -1, 0), (0, 1, 0), (-1, 0, 0), (1, 0, 0)]
        return cls.from_dict(dict(zip(offs, c)))


def _inverse_power(spacing: float | Fraction, order: int) -> Fraction | float:
    if spacing <= 0:
        raise StencilforgeError("grid spacing must be positive")
    if spacing == 1:
        return Fraction(1)
    return 1.0 / float(spacing) ** order
