"""Finite-difference operators as expressions, with exact Fornberg weights from `stencil.py`.

Each operator takes any expression (a field, or a product of fields and
coordinates) and returns a weighted sum of shifted copies of it, so operators
compose (laplacian(u * v), d(k * d(u, "x"), "x")) and the analysis sees every
access they make.
"""

from __future__ import annotations

from fractions import Fraction

from ..errors import StencilforgeError
from ..stencil import Stencil, fornberg_weights
from .nodes import Access, Expr, Grid, Literal, as_expr, shift, walk, where


def grid_of(expr: Expr, grid: Grid | None = None) -> Grid:
    """The grid an expression lives on: the grid of the fields it reads."""
    if grid is not None:
        return grid
    for node in walk(expr):
        if isinstance(node, Access):
            return node.field.grid
    raise StencilforgeError("this expression reads no field: pass grid= to the operator")


def _axis(grid: Grid, axis) -> int:
    if isinstance(axis, str):
        if axis not in grid.axis_names:
            raise StencilforgeError(f"unknown axis {axis!r}: this grid's axes are {', '.join(grid.axis_names)}")
        return grid.axis_names.index(axis)
    if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < grid.ndim:
        raise StencilforgeError(f"axis {axis!r} out of range for a {grid.ndim}D grid (use a name: {', '.join(grid.axis_names)})")
    return axis


def apply_stencil(stencil, expr) -> Expr:
    """sum_k c_k * expr shifted by offset_k, in the stencil's entry order; `stencil` is a Stencil or a
    mapping of offsets (array-axis order) to weights."""
    if not isinstance(stencil, Stencil):
        if not hasattr(stencil, "items"):
            raise StencilforgeError(f"a stencil is a Stencil or a mapping of offsets to weights, got {stencil!r}")
        stencil = Stencil.from_dict(stencil)
    expr = as_expr(expr)
    total: Expr | None = None
    for offset, c in stencil.entries:
        term = Literal(float(c)) * shift(expr, offset)
        total = term if total is None else total + term
    assert total is not None, "a Stencil has at least one point"
    return total


def _even_accuracy(accuracy, what: str, top: int = 16) -> int:
    if isinstance(accuracy, bool) or not isinstance(accuracy, int) or accuracy < 2 or accuracy > top or accuracy % 2:
        raise StencilforgeError(f"{what} accuracy must be an even integer from 2 to {top}, got {accuracy!r}")
    return accuracy


def laplacian(u, order: int = 2, grid: Grid | None = None) -> Expr:
    """The star Laplacian of the given even order of accuracy (2..16)."""
    u = as_expr(u)
    g = grid_of(u, grid)
    radius = _even_accuracy(order, "laplacian") // 2
    return apply_stencil(Stencil.laplacian(g.ndim, radius, g.spacing), u)


def laplacian9(u, grid: Grid | None = None) -> Expr:
    """The isotropic 9-point 2D Laplacian (Patra-Karttunen weights: 2/3 of the 5-point star
    plus 1/3 of the diagonal cross), second order, on a grid of equal spacings."""
    u = as_expr(u)
    g = grid_of(u, grid)
    if g.ndim != 2 or abs(g.spacing[0] - g.spacing[1]) > 1e-12 * g.spacing[0]:
        raise StencilforgeError("the 9-point Laplacian needs a 2D grid with equal spacings")
    h2 = g.spacing[0] ** 2
    w = {(0, 0): Fraction(-10, 3)}
    for o in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        w[o] = Fraction(2, 3)
    for o in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
        w[o] = Fraction(1, 6)
    return apply_stencil(Stencil.from_dict(w).scaled(1.0 / h2), u)


def d(u, axis, order: int = 1, accuracy: int = 2, grid: Grid | None = None) -> Expr:
    """Centred derivative of order 1 or 2 along an axis ("x", "y", "z" or an array axis)."""
    u = as_expr(u)
    g = grid_of(u, grid)
    a = _axis(g, axis)
    if order not in (1, 2):
        raise StencilforgeError(f"derivative order must be 1 or 2, got {order!r}")
    radius = _even_accuracy(accuracy, "derivative") // 2
    return apply_stencil(Stencil.derivative(order, a, g.ndim, radius, g.spacing[a]), u)


UPWIND_NODES = {1: (-1, 0), 2: (-2, -1, 0), 3: (-2, -1, 0, 1)}


def upwind(u, axis, velocity, accuracy: int = 1, grid: Grid | None = None) -> Expr:
    """du/d(axis) biased against the flow: backward where velocity > 0, forward elsewhere.

    Order 1 and 2 are one-sided; order 3 is the classic biased stencil (one
    point downwind), which is less dissipative and still stable for advection.
    """
    u = as_expr(u)
    g = grid_of(u, grid)
    a = _axis(g, axis)
    if accuracy not in UPWIND_NODES:
        raise StencilforgeError(f"upwind accuracy must be 1, 2 or 3, got {accuracy!r}")
    nodes = UPWIND_NODES[accuracy]
    h = g.spacing[a]

    def one_sided(sign: int) -> Expr:
        pts = [sign * n for n in nodes]
        weights = {}
        for p, w in zip(pts, fornberg_weights(1, 0, pts)):
            if w:
                off = [0] * g.ndim
                off[a] = p
                weights[tuple(off)] = w
        return apply_stencil(Stencil.from_dict(weights).scaled(1.0 / h), u)

    return where(as_expr(velocity) > 0, one_sided(1), one_sided(-1))


def div_grad(k, u, average: str = "arithmetic", grid: Grid | None = None) -> Expr:
    """div(k grad u), second order, with k averaged onto the cell faces.

    "harmonic" (2 k_i k_j / (k_i + k_j)) keeps the flux continuous where k jumps
    between cells, so second order survives a material interface; "arithmetic"
    is cheaper and suits smooth k.
    """
    u, k = as_expr(u), as_expr(k)
    g = grid_of(u, grid)
    if average not in ("arithmetic", "harmonic"):
        raise StencilforgeError(f"div_grad average must be 'arithmetic' or 'harmonic', got {average!r}")
    total: Expr | None = None
    for a in range(g.ndim):
        e = [0] * g.ndim
        e[a] = 1
        plus, minus = tuple(e), tuple(-o for o in e)
        if average == "harmonic":
            k_hi = 2.0 * k * shift(k, plus) / (k + shift(k, plus))
            k_lo = 2.0 * shift(k, minus) * k / (shift(k, minus) + k)
        else:
            k_hi = (k + shift(k, plus)) * 0.5
            k_lo = (shift(k, minus) + k) * 0.5
        flux = k_hi * (shift(u, plus) - u) - k_lo * (u - shift(u, minus))
        term = flux * Literal(1.0 / g.spacing[a] ** 2)
        total = term if total is None else total + term
    assert total is not None, "a grid has at least one axis"
    return total

