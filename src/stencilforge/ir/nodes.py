"""The expression IR: what a user writes, as immutable trees every printer walks the same way.

Arithmetic is evaluated in the grid's dtype, left to right as written, with
integer powers expanded into products, so the numpy, numba and CUDA printers
perform the same operations in the same order. Coordinates and time are formed
in float64 and rounded to the dtype once.
"""

from __future__ import annotations

import dataclasses
import keyword
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import StencilforgeError
from ..grid import AXIS_NAMES, parse_dtype
from ..plan import Derivative1D

RESERVED = {"x", "y", "z", "t", "np", "numba", "math"}
FUNCTIONS = ("sqrt", "exp", "log", "sin", "cos", "tanh", "abs")


def check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise StencilforgeError(f"{what} name {name!r} is not a Python identifier")
    if name in RESERVED or name.startswith("_"):
        raise StencilforgeError(f"{what} name {name!r} is reserved (x, y, z, t and names starting with _)")
    return name


def as_expr(value) -> "Expr":
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, np.bool_)):
        raise StencilforgeError(f"a boolean {value!r} is not a number in an expression")
    if isinstance(value, (int, float, np.integer, np.floating)):
        if not math.isfinite(float(value)):
            raise StencilforgeError(f"non-finite constant {value!r} in an expression")
        return Literal(float(value))
    raise StencilforgeError(f"{value!r} ({type(value).__name__}) cannot be used in an expression")


class Expr:
    """Base of every node: operators build new trees, nothing is evaluated here."""

    __slots__ = ()

    def __add__(self, other):
        return Binary("+", self, as_expr(other))

    def __radd__(self, other):
        return Binary("+", as_expr(other), self)

    def __sub__(self, other):
        return Binary("-", self, as_expr(other))

    def __rsub__(self, other):
        return Binary("-", as_expr(other), self)

    def __mul__(self, other):
        return Binary("*", self, as_expr(other))

    def __rmul__(self, other):
        return Binary("*", as_expr(other), self)

    def __truediv__(self, other):
        return Binary("/", self, as_expr(other))

    def __rtruediv__(self, other):
        return Binary("/", as_expr(other), self)

    def __neg__(self):
        return Negate(self)

    def __pos__(self):
        return self

    def __pow__(self, n):
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
            raise StencilforgeError(f"only integer powers are supported, got {n!r}: use sf.sqrt, or sf.exp(p * sf.log(x))")
        return Power(self, int(n))

    def __rpow__(self, base):
        raise StencilforgeError("a number raised to an expression is not supported: use sf.exp(expr * math.log(base))")

    def __abs__(self):
        return Call("abs", (self,))

    def __lt__(self, other):
        return Compare("<", self, as_expr(other))

    def __le__(self, other):
        return Compare("<=", self, as_expr(other))

    def __gt__(self, other):
        return Compare(">", self, as_expr(other))

    def __ge__(self, other):
        return Compare(">=", self, as_expr(other))

    def __bool__(self):
        raise StencilforgeError("an expression has no truth value: use sf.where(condition, a, b)")

    def children(self) -> tuple["Expr", ...]:
        return ()

    def rebuild(self, children: Sequence["Expr"]) -> "Expr":
        return self


@dataclass(frozen=True, eq=False)
class Literal(Expr):
    value: float


@dataclass(frozen=True, eq=False)
class Constant(Expr):
    """A scalar parameter passed to the kernel at run time: changing its value does not recompile."""

    name: str
    value: float

    def __post_init__(self):
        check_name(self.name, "constant")
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float, np.integer, np.floating)):
            raise StencilforgeError(f"constant {self.name} needs a number, got {self.value!r}")
        if not math.isfinite(float(self.value)):
            raise StencilforgeError(f"constant {self.name} is not finite: {self.value!r}")
        object.__setattr__(self, "value", float(self.value))


@dataclass(frozen=True, eq=False)
class Coordinate(Expr):
    """The coordinate along `axis` of the cell being updated, moved by `shift` cells."""

    axis: int
    shift: int = 0


@dataclass(frozen=True, eq=False)
class Time(Expr):
    """t at the start of the step being computed."""


@dataclass(frozen=True, eq=False)
class Access(Expr):
    """A field's value at time level `level` (-1 prev, 0 current, +1 next), at an integer offset."""

    field: "Field"
    level: int
    offset: tuple[int, ...]

    def __getitem__(self, offset) -> "Access":
        offset = self.field._offset(offset)
        return Access(self.field, self.level, tuple(a + b for a, b in zip(self.offset, offset)))

    def shift(self, **by: int) -> "Access":
        return self[self.field.grid.offset(by)]

    @property
    def label(self) -> str:
        return self.field.name + {-1: ".prev", 0: "", 1: ".next"}[self.level]


@dataclass(frozen=True, eq=False)
class Binary(Expr):
    op: str
    left: Expr
    right: Expr

    def children(self):
        return (self.left, self.right)

    def rebuild(self, c):
        return Binary(self.op, *c)


@dataclass(frozen=True, eq=False)
class Negate(Expr):
    arg: Expr

    def children(self):
        return (self.arg,)

    def rebuild(self, c):
        return Negate(*c)


@dataclass(frozen=True, eq=False)
class Power(Expr):
    base: Expr
    n: int

    def children(self):
        return (self.base,)

    def rebuild(self, c):
        return Power(c[0], self.n)


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """sqrt, exp, log, sin, cos, tanh, abs of one argument; min, max of two."""

    fn: str
    args: tuple[Expr, ...]

    def children(self):
        return self.args

    def rebuild(self, c):
        return Call(self.fn, tuple(c))


@dataclass(frozen=True, eq=False)
class Compare(Expr):
    op: str
    left: Expr
    right: Expr

    def children(self):
        return (self.left, self.right)

    def rebuild(self, c):
        return Compare(self.op, *c)


@dataclass(frozen=True, eq=False)
class Where(Expr):
    """cond ? a : b, per cell."""

    cond: Compare
    a: Expr
    b: Expr

    def children(self):
        return (self.cond, self.a, self.b)

    def rebuild(self, c):
        return Where(*c)


@dataclass(frozen=True, eq=False)
class OneSided(Expr):
    """A derivative of a field along one axis whose rows next to the grid's ends reach only inwards (closures),
    so it reads no ghost cell: `sf.d(u, "x", closure="one-sided")`. It is an equation of its own and runs as
    the backends' axis-operator kernels (`plan.AxisOperator`); `derivative.out` is left empty here."""

    operand: Access
    axis: int
    derivative: Derivative1D

    def children(self):
        return (self.operand,)

    def rebuild(self, c):
        return OneSided(c[0], self.axis, self.derivative)


def _call(fn: str, *args) -> Call:
    return Call(fn, tuple(as_expr(a) for a in args))


def sqrt(a):
    return _call("sqrt", a)


def exp(a):
    return _call("exp", a)


def log(a):
    return _call("log", a)


def sin(a):
    return _call("sin", a)


def cos(a):
    return _call("cos", a)


def tanh(a):
    return _call("tanh", a)


def absolute(a):
    return _call("abs", a)


def minimum(a, b):
    return _call("min", a, b)


def maximum(a, b):
    return _call("max", a, b)


def where(cond, a, b) -> Where:
    if not isinstance(cond, Compare):
        raise StencilforgeError("where() needs a comparison as its condition, such as u > 0")
    return Where(cond, as_expr(a), as_expr(b))


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """One number from every interior cell's value of `arg`: its sum ("sum"), or its L1, L2 or max norm ("l1",
    "l2", "max"). Stop rules compare them (`rules`); equations, which compute a value per cell, cannot read them."""

    kind: str
    arg: Expr

    def children(self):
        return (self.arg,)

    def rebuild(self, c):
        return Reduce(self.kind, *c)


NORMS = {1: "l1", 2: "l2", math.inf: "max"}


def norm(a, ord=2) -> Reduce:
    """The L1 (`ord=1`: the sum of |a|), L2 (2: the square root of the sum of a^2) or max (math.inf: the largest
    |a|) norm of `a` over the interior cells, for a stop rule (`until=`). `a` is an expression of fields read at
    the cell (p, p.next - p), evaluated in the grid's dtype; the norm is formed in float64, its sums exact."""
    kind = None if isinstance(ord, bool) or not isinstance(ord, (int, float, np.integer, np.floating)) else NORMS.get(float(ord))
    if kind is None:
        raise StencilforgeError(f"norm: ord is 1, 2 or math.inf, got {ord!r}")
    return Reduce(kind, as_expr(a))


def total(a) -> Reduce:
    """The sum of `a` (with its signs, as np.sum) over the interior cells, for a stop rule (`until=`): the course's
    sum(|p| - |pn|) is sf.total(abs(p.next) - abs(p)). Formed in float64, exact and rounded once."""
    return Reduce("sum", as_expr(a))


class Grid:
    """The lattice of unknowns: point i of an axis sits at origin + i * spacing.

    Give `extent` for n cells covering [0, extent] with points at the cell
    centres (natural for periodic and Neumann walls), or `spacing` (and
    `origin`) to place the points yourself.
    """

    def __init__(self, shape, extent=None, spacing=None, origin=None, dtype="float64"):
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        shape = tuple(shape)
        if not 1 <= len(shape) <= 3 or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 for n in shape):
            raise StencilforgeError(f"grid shape must be 1 to 3 positive integers, got {shape!r}")
        self.shape = tuple(int(n) for n in shape)
        nd = len(self.shape)
        if (extent is None) == (spacing is None):
            raise StencilforgeError("give the grid either extent= or spacing=")
        if extent is not None:
            ext = _per_axis(extent, nd, "extent")
            self.spacing = tuple(e / n for e, n in zip(ext, self.shape))
            base = _per_axis(0.0 if origin is None else origin, nd, "origin", positive=False)
            self.origin = tuple(b + h / 2 for b, h in zip(base, self.spacing))
        else:
            self.spacing = _per_axis(spacing, nd, "spacing")
            self.origin = _per_axis(0.0 if origin is None else origin, nd, "origin", positive=False)
        self.dtype = parse_dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def axis_names(self) -> tuple[str, ...]:
        return AXIS_NAMES[self.ndim]

    @property
    def coordinates(self) -> tuple[Coordinate, ...]:
        """x, y, z in array-axis order (the last axis is x)."""
        return tuple(Coordinate(a) for a in range(self.ndim))

    def coordinate(self, name: str) -> Coordinate:
        if name not in self.axis_names:
            raise StencilforgeError(f"a {self.ndim}D grid has no coordinate {name!r}: its axes are {', '.join(self.axis_names)}")
        return Coordinate(self.axis_names.index(name))

    @property
    def t(self) -> Time:
        """Time at the start of the step, for right-hand sides and wall values."""
        return Time()

    @property
    def x(self) -> Coordinate:
        return self.coordinate("x")

    @property
    def y(self) -> Coordinate:
        return self.coordinate("y")

    @property
    def z(self) -> Coordinate:
        return self.coordinate("z")

    def values(self, name: str) -> np.ndarray:
        """The coordinates of the points along axis `name` ("x", "y" or "z"), as float64 numbers (`grid.x` is a
        symbol for equations; this is its value at each point)."""
        axis = self.coordinate(name).axis
        return self.origin[axis] + np.arange(self.shape[axis], dtype=np.float64) * self.spacing[axis]

    def offset(self, by: dict) -> tuple[int, ...]:
        names = self.axis_names
        unknown = set(by) - set(names)
        if unknown:
            raise StencilforgeError(f"unknown axis {sorted(unknown)[0]!r}: this grid's axes are {', '.join(names)}")
        return tuple(int(by.get(n, 0)) for n in names)

    def __repr__(self):
        return f"Grid(shape={self.shape}, spacing={self.spacing}, origin={self.origin}, dtype={self.dtype.name})"


def _per_axis(value, nd: int, what: str, positive: bool = True) -> tuple[float, ...]:
    values = (value,) * nd if isinstance(value, (int, float, np.integer, np.floating)) else tuple(value)
    if len(values) != nd or not all(isinstance(v, (int, float, np.integer, np.floating)) for v in values):
        raise StencilforgeError(f"grid {what} needs one number per axis ({nd}), got {value!r}")
    if not all(math.isfinite(v) and (v > 0 or not positive) for v in values):
        raise StencilforgeError(f"grid {what} must be finite{' and positive' if positive else ''}, got {value!r}")
    return tuple(float(v) for v in values)


class Field(Access):
    """A named array on a grid with `levels` time levels: 1 (a coefficient or an auxiliary
    field written in place), 2 (u and u.next) or 3 (u.prev, u, u.next, for leapfrog schemes).

    The field itself stands for its current level at the cell being updated;
    u[dy, dx] (array-axis order, x last) or u.shift(x=1) reads a neighbour.

    `storage="float16"` keeps the field's values in half precision on a float32 grid: every
    read widens a value exactly to float32, the arithmetic stays in float32, and every write
    (values computed by an equation, initial and wall values, already rounded to float32)
    rounds to the nearest float16. Half the bytes per cell for a bandwidth-bound step, at
    float16's precision (11 significant bits) and range (up to 65504).
    """

    name: str
    grid: Grid
    levels: int
    storage: np.dtype

    def __init__(self, name: str, grid: Grid, levels: int = 2, storage=None):
        check_name(name, "field")
        if not isinstance(grid, Grid):
            raise StencilforgeError(f"field {name} needs a stencilforge Grid, got {type(grid).__name__}")
        if levels not in (1, 2, 3):
            raise StencilforgeError(f"field {name}: levels must be 1, 2 or 3, got {levels!r}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "levels", levels)
        object.__setattr__(self, "storage", _storage(name, grid, storage))
        Access.__init__(self, self, 0, (0,) * grid.ndim)

    @property
    def half(self) -> bool:
        """Whether the values are stored narrower than the arithmetic (float16 on a float32 grid)."""
        return self.storage != self.grid.dtype

    def _offset(self, offset) -> tuple[int, ...]:
        offset = offset if isinstance(offset, tuple) else (offset,)
        if len(offset) != self.grid.ndim or not all(isinstance(o, (int, np.integer)) and not isinstance(o, bool) for o in offset):
            raise StencilforgeError(f"field {self.name} is {self.grid.ndim}D: index it with {self.grid.ndim} integers, got {offset!r}")
        return tuple(int(o) for o in offset)

    def _level(self, level: int) -> Access:
        if level == 1 and self.levels < 2:
            raise StencilforgeError(f"field {self.name} has one time level: give it levels=2 to use {self.name}.next")
        if level == -1 and self.levels < 3:
            raise StencilforgeError(f"field {self.name} has {self.levels} time level(s): give it levels=3 to use {self.name}.prev")
        return Access(self, level, (0,) * self.grid.ndim)

    @property
    def next(self) -> Access:
        return self._level(1)

    forward = next

    @property
    def prev(self) -> Access:
        return self._level(-1)

    backward = prev

    def __repr__(self):
        return f"Field({self.name!r}, levels={self.levels}{f', storage={self.storage.name!r}' if self.half else ''})"

    __hash__ = object.__hash__


def _storage(name: str, grid: Grid, storage) -> np.dtype:
    """The dtype a field's values are kept in: the grid's, or float16 on a float32 grid."""
    if storage is None:
        return grid.dtype
    try:
        dt = np.dtype(storage)
    except TypeError:
        dt = None
    if dt is not None and dt == grid.dtype:
        return grid.dtype
    if dt is None or dt != np.float16:
        raise StencilforgeError(f"field {name}: storage must be 'float16' or the grid's dtype ({grid.dtype.name}), got {storage!r}")
    if grid.dtype != np.float32:
        raise StencilforgeError(f"field {name}: float16 storage computes in float32; give the grid dtype='float32', not {grid.dtype.name}")
    return np.dtype(np.float16)


@dataclass(frozen=True, eq=False)
class Eq:
    """target = expression, evaluated at every interior cell."""

    target: Access
    expr: Expr

    def __post_init__(self):
        if not isinstance(self.target, Access):
            raise StencilforgeError(f"the left side of an equation must be a field (u.next, or a one-level field), got {self.target!r}")
        object.__setattr__(self, "expr", as_expr(self.expr))
        if any(self.target.offset):
            raise StencilforgeError(f"equation for {self.target.label}: the target must be at offset 0, got {self.target.offset}")

    @property
    def label(self) -> str:
        return self.target.label


@dataclass(frozen=True, eq=False)
class Solve:
    """a * target - b * div(k grad target) = rhs, solved for `target` inside the step (multigrid, to a relative
    residual `tol` per step, started from the field's previous value; tol defaults to 1e-8 on a float64 grid
    and 1e-4 on a float32 one, above the rounding floor of its dtype). A solve that misses tol within `max_cycles`
    cycles goes on from its last iterate, counted in the run's summary, or stops a run with strict solves (`sf.run`).

    The defaults a = 0, b = -1, k = 1 make it the Poisson equation laplacian(target) = rhs (a pressure
    projection); `Solve(u.next, u, a=1, b=dt * nu)` is a backward-Euler diffusion step. The solve ends a
    pass: equations after it may read `target` at neighbouring cells. Its walls are the field's boundary
    condition; with no Dirichlet wall and a = 0 the solution is the zero-mean one, and the rhs's mean is
    removed first (the nearest compatible problem, as the discrete divergence of a velocity needs).
    a, b: numbers or expressions of constants; k: positive, a number, an expression of coordinates and
    constants or a field no equation writes (each face takes the harmonic mean of its two cells).
    """

    target: Access
    rhs: Expr
    a: Expr = dataclasses.field(default=Literal(0.0), kw_only=True)
    b: Expr = dataclasses.field(default=Literal(-1.0), kw_only=True)
    k: Expr | None = dataclasses.field(default=None, kw_only=True)
    tol: float | None = dataclasses.field(default=None, kw_only=True)
    max_cycles: int = dataclasses.field(default=50, kw_only=True)

    def __post_init__(self):
        if not isinstance(self.target, Access) or any(self.target.offset):
            raise StencilforgeError(f"sf.Solve needs a field (p, or u.next) at offset 0 to solve for, got {self.target!r}")
        for name in ("rhs", "a", "b"):
            object.__setattr__(self, name, as_expr(getattr(self, name)))
        if self.k is not None:
            object.__setattr__(self, "k", as_expr(self.k))
        tol, cycles = self.tol, self.max_cycles
        if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)) or not 0 < tol < 1):
            raise StencilforgeError(f"solve for {self.label}: tol must be a number between 0 and 1, got {tol!r}")
        if isinstance(cycles, bool) or not isinstance(cycles, (int, np.integer)) or cycles < 1:
            raise StencilforgeError(f"solve for {self.label}: max_cycles must be a positive integer, got {cycles!r}")

    @property
    def label(self) -> str:
        return self.target.label

    @property
    def expressions(self) -> tuple[Expr, ...]:
        """Every expression the solve evaluates: its right-hand side, a, b and k."""
        return (self.rhs, self.a, self.b) + (() if self.k is None else (self.k,))


@dataclass(frozen=True, eq=False)
class Iterate:
    """`equations` run `count` times in a row inside the step (the Jacobi sweeps of a pressure Poisson
    equation, say): their passes are compiled once and launched `count` times, not unrolled.

    A field written inside reads as in a step: `p` is the previous iterate (the step's start value in the
    first iteration), `p.next` the new one. Between iterations p's two levels swap (no copy) and its walls
    are filled again, at t + dt as the step's new values' are, so its boundary condition holds in every
    iteration. After the group `p.next` is the last iterate, what later equations read; `p` then holds an
    earlier iterate, which they may not read. The step's end swaps p's levels once more, as it swaps every
    written field's, so the next step starts from the last iterate.

    Inside: sf.Eq only (no solve, no nested Iterate), writing fields of one or two levels that no equation
    outside the group writes; a one-level field is overwritten in place every iteration.
    """

    count: int
    equations: tuple[Eq, ...]

    def __post_init__(self):
        n = self.count
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
            raise StencilforgeError(f"sf.Iterate needs a positive integer count of iterations, got {n!r}")
        object.__setattr__(self, "count", int(n))
        if isinstance(self.equations, (Eq, Solve, Iterate)) or not isinstance(self.equations, (list, tuple)):
            raise StencilforgeError(f"sf.Iterate(n, [equations]) takes a list of equations, got {self.equations!r}")
        if not self.equations:
            raise StencilforgeError("sf.Iterate needs at least one equation to iterate")
        for eq in self.equations:
            if isinstance(eq, Iterate):
                raise StencilforgeError("sf.Iterate inside sf.Iterate is not supported: write the inner equations in the outer group")
            if isinstance(eq, Solve):
                raise StencilforgeError(f"sf.Iterate repeats sf.Eq equations; the solve for {eq.label} goes outside it")
            if not isinstance(eq, Eq):
                raise StencilforgeError(f"sf.Iterate repeats sf.Eq(target, expression) equations, got {eq!r}")
        object.__setattr__(self, "equations", tuple(self.equations))

    @property
    def label(self) -> str:
        return f"{self.count} x ({', '.join(eq.label for eq in self.equations)})"

    @property
    def expressions(self) -> tuple[Expr, ...]:
        """Every expression the group evaluates."""
        return tuple(eq.expr for eq in self.equations)


def walk(expr: Expr):
    """Every node of the tree, parents before children."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children()))


def transform(expr: Expr, fn) -> Expr:
    """Rebuild the tree bottom-up, replacing each leaf by fn(leaf) (fn returns None to keep it)."""
    kids = expr.children()
    if not kids:
        new = fn(expr)
        return expr if new is None else new
    return expr.rebuild([transform(k, fn) for k in kids])


def shift(expr, offset: Sequence[int]) -> Expr:
    """The expression evaluated `offset` cells away: accesses and coordinates move, the rest stays."""
    expr = as_expr(expr)
    offset = tuple(offset)

    def move(leaf):
        if isinstance(leaf, Access):
            return Access(leaf.field, leaf.level, tuple(a + b for a, b in zip(leaf.offset, offset)))
        if isinstance(leaf, Coordinate):
            return Coordinate(leaf.axis, leaf.shift + offset[leaf.axis])
        return None

    return transform(expr, move)
