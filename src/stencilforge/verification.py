"""The convergence-order suite behind `stencilforge verify`.

Each check refines the grid, fits the log-log slope of the error against the
spacing and compares it with theory (as findiff does). Star stencils are
checked twice: on polynomials of degree 2r+2, whose leading error term is exact
so the slope is the order itself even at r = 8 in float64, and on a smooth
trigonometric field for r <= 4. Everything runs through the chosen backend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import problems
from .errors import StencilforgeError
from .grid import Grid
from .ir.nodes import Constant
from .plan import Sweep, Term
from .problems import derivatives as deriv
from .stencil import Stencil

TOLERANCE = 0.15


@dataclass(frozen=True)
class Check:
    name: str
    expected: float
    observed: float
    errors: tuple[float, ...]
    tolerance: float = TOLERANCE

    @property
    def passed(self) -> bool:
        return abs(self.observed - self.expected) <= self.tolerance


def observed_order(spacings, errors) -> float:
    return float(np.polyfit(np.log(spacings), np.log(errors), 1)[0])


def _star_error(backend, radius: int, n: int, field: str) -> float:
    h = 1.0 / n
    grid = Grid((n, n), (h, h), np.dtype(np.float64), radius, (0.0, 0.0))
    x, y = grid.mesh()
    if field == "poly":
        p = 2 * radius + 2
        u = (x - 0.5) ** p + (y - 0.4) ** p
        xi, yi = grid.mesh(ghosts=False)
        exact = p * (p - 1) * ((xi - 0.5) ** (p - 2) + (yi - 0.4) ** (p - 2))
    else:
        k = 4 * np.pi
        u = np.sin(k * x + 0.3) * np.sin(k * y + 0.7) / (2 * k * k)  # scaled so its Laplacian has unit amplitude
        exact = -2 * k * k * u[grid.interior]
    # u a writable copy: the arrays numba's kernels are compiled for (a read-only view would compile another)
    fields = {"u": backend.asarray(np.array(np.broadcast_to(u, grid.padded_shape))),
              "out": backend.asarray(np.full(grid.padded_shape, np.nan))}
    backend.sweep(Sweep("out", (Term("u", Stencil.laplacian(2, radius, h)),)), grid)(fields)
    return float(np.max(np.abs(backend.to_host(fields["out"])[grid.interior] - exact)))


def star_checks(backend, quick: bool):
    poly = (10, 12, 14)
    trig = {1: (32, 64, 128), 2: (32, 48, 64), 4: (40, 48, 56)}
    for r in (1, 2, 4, 8):
        ns = poly
        errs = [_star_error(backend, r, n, "poly") for n in ns]
        yield Check(f"star laplacian r={r}, polynomial", 2 * r, observed_order([1 / n for n in ns], errs), tuple(errs))
    for r in (1, 2) if quick else (1, 2, 4):
        ns = trig[r]
        errs = [_star_error(backend, r, n, "trig") for n in ns]
        yield Check(f"star laplacian r={r}, sin(4 pi x)", 2 * r, observed_order([1 / n for n in ns], errs), tuple(errs))


def derivative_checks(backend, quick: bool):
    """Interior and closure orders on u = sin(2x + 0.3): a low frequency keeps the
    one-sided closures' odd h^5 term from masking their 4th order at these grids."""
    ns = (64, 128, 256)
    for accuracy, boundary_order in ((2, 1), (4, 4)):
        for order in (1, 2):
            interior, boundary = [], []
            for n in ns:
                h = 1.0 / (n - 1)
                x = np.linspace(0.0, 1.0, n)
                u = np.stack([np.sin(2 * x + 0.3), np.sin(2 * x + 1.1)])
                phase = np.array([[0.3], [1.1]])
                exact = 2 * np.cos(2 * x + phase) if order == 1 else -4 * np.sin(2 * x + phase)
                op = deriv.operator(1, h, accuracy, (order,))
                out = backend.asarray(np.full(u.shape, np.nan))
                backend.axis_operator(op, np.dtype(np.float64), u.shape)(backend.asarray(u), out)
                err = np.abs(backend.to_host(out) - exact)
                rows = accuracy // 2
                interior.append(float(np.max(err[:, rows:-rows])))
                boundary.append(float(np.max(np.concatenate([err[:, :rows], err[:, -rows:]], axis=1))))
            hs = [1 / (n - 1) for n in ns]
            name = f"derivatives d{order} accuracy {accuracy}"
            yield Check(f"{name}, interior", accuracy, observed_order(hs, interior), tuple(interior))
            yield Check(f"{name}, boundary closure", boundary_order, observed_order(hs, boundary), tuple(boundary))


def _solve_error(backend, name: str, n: int, ndim: int, final_t: float | None, **params) -> tuple[float, float]:
    """(spacing, max error of u) of the named problem run to `final_t` (its stable dt shortened to land on it), or
    by Jacobi to a residual of 1e-11."""
    from .runner import run as run_problem

    shape = (n,) * ndim
    steps: int | None = None
    tol: float | None = 1e-11
    if final_t is not None:
        probe = problems.problem(name, shape, "float64", **params)[0]
        dt = probe.values()[probe.dt.name] if isinstance(probe.dt, Constant) else probe.dt.value
        steps, tol = math.ceil(final_t / dt), None
        params = {**params, "dt": final_t / steps}
    problem = problems.problem(name, shape, "float64", **params)[0]
    result = run_problem(problem, steps=steps, tol=tol, backend=backend)
    return problem.grid.spacing[0], result.summary["errors"]["u"]


def solver_checks(backend, quick: bool):
    cases = [
        ("heat2d", 2, (16, 32, 64), 0.02, {}),
        ("heat3d", 3, (8, 16, 24), 0.02, {}),
        ("poisson2d", 2, (16, 24, 32) if quick else (16, 32, 48), None, {}),
        ("wave3d", 3, (20, 28, 36), 0.1, {"radius": 8}),
    ]
    for name, ndim, ns, final_t, params in cases:
        pairs = [_solve_error(backend, name, n, ndim, final_t, **params) for n in ns]
        hs, errs = zip(*pairs)
        label = f"{name} (radius 8, dt ~ h)" if name == "wave3d" else (f"{name} (dt ~ h^2)" if final_t else f"{name} (Jacobi to 1e-11)")
        yield Check(label, 2, observed_order(hs, errs), tuple(errs))


def _manufactured(case: str):
    """(walls, exact u, f, k or None) on the unit square for one multigrid check."""
    pi = np.pi
    if case == "dirichlet":  # non-zero walls on y = 0 and y = 1
        return "dirichlet", lambda x, y: np.sin(pi * x) * np.exp(y), lambda x, y: (1 - pi * pi) * np.sin(pi * x) * np.exp(y), None
    if case == "neumann":  # zero flux through walls half a cell outside the first and last nodes
        return "neumann", lambda x, y: np.cos(pi * x) * np.cos(pi * y), lambda x, y: -2 * pi * pi * np.cos(pi * x) * np.cos(pi * y), None
    if case == "periodic":
        return (
            "periodic",
            lambda x, y: np.sin(2 * pi * x) * np.cos(2 * pi * y),
            lambda x, y: -8 * pi * pi * np.sin(2 * pi * x) * np.cos(2 * pi * y),
            None,
        )

    def k(x, y):
        return 1 + 0.5 * np.sin(2 * x + y)

    def f(x, y):
        u_x, u_y = pi * np.cos(pi * x) * np.sin(pi * y), pi * np.sin(pi * x) * np.cos(pi * y)
        return k(x, y) * -2 * pi * pi * np.sin(pi * x) * np.sin(pi * y) + np.cos(2 * x + y) * (u_x + 0.5 * u_y)

    return "dirichlet", lambda x, y: np.sin(pi * x) * np.sin(pi * y), f, k


def multigrid_error(backend_name: str, case: str, n: int) -> tuple[float, float]:
    """(h, max error) of the multigrid solution of a manufactured problem on an n x n grid."""
    from .solvers import poisson

    wall, exact, rhs, coefficient = _manufactured(case)
    h = 1.0 / (n + 1) if wall == "dirichlet" else 1.0 / n
    first = {"dirichlet": h, "neumann": h / 2, "periodic": 0.0}[wall]
    y, x = np.meshgrid(first + h * np.arange(n), first + h * np.arange(n), indexing="ij")  # x the last axis, as walls take it
    k = coefficient(x, y) if coefficient is not None else None
    result = poisson(rhs(x, y), h, boundary=wall, value=exact, k=k, tol=1e-11, backend=backend_name)
    u = exact(x, y)
    if wall != "dirichlet":
        u = u - u.mean()
    return h, float(np.max(np.abs(np.asarray(result.u) - u)))


def multigrid_checks(backend, quick: bool):
    """Second order of the multigrid solution on manufactured problems for every wall type and variable k."""
    for case in ("dirichlet", "neumann", "periodic", "variable k"):
        sizes = {"dirichlet": (15, 31, 63), "variable k": (15, 31, 63)}.get(case, (16, 32, 64))
        pairs = [multigrid_error(backend.name, case, n) for n in (sizes[:2] if quick else sizes)]
        hs, errs = zip(*pairs)
        yield Check(f"poisson multigrid, {case}", 2, observed_order(hs, errs), tuple(errs))


def run_suite(backend, quick: bool = False):
    """Every convergence check, in order, as a generator of Check results."""
    yield from star_checks(backend, quick)
    yield from derivative_checks(backend, quick)
    yield from solver_checks(backend, quick)
    yield from multigrid_checks(backend, quick)


@dataclass(frozen=True)
class StorageCheck:
    """A problem run with its fields stored narrower (`storage`) and in the grid's dtype, from the same start.

    Passes while the narrow run is finite and stays within `bound` of the wide one: one rounding to the
    storage's unit roundoff per stored value and step, steps * u * max|value| (what a non-expansive
    scheme can accumulate; more means the narrow run departs from the scheme, not from its rounding)."""

    name: str
    storage: str
    steps: int
    wide_error: float  # max-norm error against the exact solution, fields in the grid's dtype
    narrow_error: float  # the same, fields stored in `storage`
    difference: float  # max |narrow - wide| at the end
    bound: float

    @property
    def passed(self) -> bool:
        return math.isfinite(self.narrow_error) and self.difference <= self.bound


def storage_checks(backend, storage: str, quick: bool):
    """heat2d, heat3d and wave3d (its increment form) with every field stored in `storage`, against the
    float32 run; `storage` must be narrower than float32 (float16)."""
    from .problems import heat, wave3d
    from .runner import run as run_problem

    if storage != "float16":
        raise StencilforgeError(f"storage {storage!r}: float16 is the storage narrower than the grid's float32")
    unit = 2.0 ** -(np.finfo(np.float16).nmant + 1)
    cases = [
        ("heat2d", lambda st: heat.problem(2, (64, 64) if quick else (256, 256), storage=st), 200 if quick else 1000),
        ("heat3d", lambda st: heat.problem(3, (24,) * 3 if quick else (48,) * 3, storage=st), 100 if quick else 200),
        ("wave3d r4", lambda st: wave3d.problem((24,) * 3 if quick else (48,) * 3, radius=4, storage=st)[0], 100 if quick else 200),
    ]
    for name, build, steps in cases:
        wide, narrow = (run_problem(build(st), steps=steps, backend=backend) for st in (None, storage))
        u_wide = backend.to_host(wide.fields["u"]).astype(np.float64)
        u_narrow = backend.to_host(narrow.fields["u"]).astype(np.float64)
        yield StorageCheck(
            f"{name} {'x'.join(map(str, u_wide.shape))}", storage, steps, wide.summary["errors"]["u"],
            narrow.summary["errors"]["u"], float(np.abs(u_narrow - u_wide).max()), steps * unit * float(np.abs(u_wide).max()),
        )
