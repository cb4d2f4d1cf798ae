"""Finite-difference operators as expressions, with exact Fornberg weights from `stencil.py`.

Each operator takes any expression (a field, or a product of fields and
coordinates) and returns a weighted sum of shifted copies of it, so operators
compose (laplacian(u * v), d(k * d(u, "x"), "x")) and the analysis sees every
access they make.
"""

from __future__ import annotations

from fractions import Fraction

from ..errors import StencilforgeError
from ..plan import Derivative1D
from ..stencil import Stencil, central_weights, fornberg_weights
from .nodes import Access, Expr, Grid, Literal, OneSided, as_expr, shift, walk, where


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


def d(u, axis, order: int = 1, accuracy: int = 2, grid: Grid | None = None, closure: str | None = None) -> Expr:
    """Centred derivative of order 1 or 2 along an axis ("x", "y", "z" or an array axis).

    closure="one-sided": next to the grid's ends along the axis, rows that reach only inwards instead of
    ghost cells (`closed`), for a field `u` (not an expression), accuracy 2 or 4; written as an equation
    of its own, sf.Eq(ux, sf.d(u, "x", closure="one-sided")), on a 2D grid."""
    u = as_expr(u)
    g = grid_of(u, grid)
    a = _axis(g, axis)
    if order not in (1, 2):
        raise StencilforgeError(f"derivative order must be 1 or 2, got {order!r}")
    if closure is not None:
        if closure != "one-sided":
            raise StencilforgeError(f"closure must be 'one-sided' (or None: ghost cells), got {closure!r}")
        if not isinstance(u, Access) or any(u.offset):
            raise StencilforgeError(f"a one-sided derivative applies to a field (u, u.next), not to {u!r}")
        if g.ndim != 2:
            raise StencilforgeError(f"one-sided derivatives run on 2D grids, not {g.ndim}D")
        return OneSided(u, a, closed(order, accuracy, g.spacing[a]))
    radius = _even_accuracy(accuracy, "derivative") // 2
    return apply_stencil(Stencil.derivative(order, a, g.ndim, radius, g.spacing[a]), u)


CLOSED_ACCURACIES = (2, 4)
FIRST_ORDER_ROWS = {  # accuracy 2: one first-order row at each end, (left row 0, right row n-1) for each order
    1: (((0, Fraction(-1)), (1, Fraction(1))), ((-1, Fraction(-1)), (0, Fraction(1)))),
    2: (((0, Fraction(1)), (1, Fraction(-2)), (2, Fraction(1))), ((-2, Fraction(1)), (-1, Fraction(-2)), (0, Fraction(1)))),
}


def one_sided_rows(order: int, accuracy: int, rows: int, side: str) -> tuple:
    """Closure rows k = 0..rows-1 on `order + accuracy` nodes at the end of the axis (Fornberg's weights)."""
    width = order + accuracy
    out = []
    for k in range(rows):
        offsets = [j - k for j in range(width)]
        if side == "right":
            offsets = [-o for o in offsets]
        weights = fornberg_weights(order, 0, offsets)
        out.append(tuple(sorted((o, w) for o, w in zip(offsets, weights) if w != 0)))
    return tuple(out)


def closed(order: int, accuracy: int, h: float, name: str = "") -> Derivative1D:
    """A derivative with closures: accuracy 2 is the classic operator (central inside, one first-order row at
    each end); accuracy 4 takes radius-2 central weights and Fornberg closures wide enough to keep 4th order
    at the ends."""
    if accuracy not in CLOSED_ACCURACIES:
        raise StencilforgeError(f"accuracy must be one of {CLOSED_ACCURACIES}, got {accuracy}")
    radius = accuracy // 2
    interior = tuple(sorted(central_weights(order, radius).items()))
    left: tuple
    right: tuple
    if accuracy == 2:
        left, right = ((row,) for row in FIRST_ORDER_ROWS[order])
    else:
        left = one_sided_rows(order, accuracy, radius, "left")
        right = one_sided_rows(order, accuracy, radius, "right")
    return Derivative1D(name, interior, left, right, 1.0 / h**order)


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

