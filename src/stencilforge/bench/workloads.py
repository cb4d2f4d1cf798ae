"""Benchmark workloads: a problem's step plan on random data, and the default matrices.

A workload is a named plan (a sweep or an axis operator) on one shape and
dtype. Its fields are random, never zeros, ghost layers included, so no
kernel can profit from zero pages or denormal-free shortcuts, and every
implementation (ours and the peers') starts from the same arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .. import problems
from ..errors import StencilforgeError
from ..grid import Grid, parse_dtype
from ..ir.lowering import linear_passes
from ..plan import AxisOperator, Sweep
from ..problem import Problem
from ..problems import derivatives, poisson2d
from ..simulation import initial_array
from ..stencil import Stencil


@dataclass(frozen=True)
class Workload:
    """One benchmark row group: a workload name (see KINDS), a shape and a dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def label(self) -> str:
        return f"{self.name} {'x'.join(map(str, self.shape))} {self.dtype}"


@dataclass
class Case:
    """A workload instantiated: plan, grid and random host fields shared by every implementation.

    For sweeps, `swap` names the buffers exchanged after each step; after a
    step the newest values are in `swap[0]`. Axis operators have no swap: their
    outputs are rewritten by every application.
    """

    workload: Workload
    problem: str
    grid: Grid
    plan: Sweep | AxisOperator
    fields: dict[str, np.ndarray]
    swap: tuple[str, str] | None = None
    params: dict = field(default_factory=dict)

    @property
    def is_sweep(self) -> bool:
        return isinstance(self.plan, Sweep)

    @property
    def outputs(self) -> tuple[str, ...]:
        """Fields holding the newest result after a step (compared between implementations)."""
        if isinstance(self.plan, AxisOperator):
            return tuple(d.out for d in self.plan.outputs)
        assert self.swap is not None, "a sweep case swaps two buffers"
        return (self.swap[0],)

    @property
    def cells(self) -> int:
        return self.grid.cells

    @property
    def bytes_per_cell(self) -> int:
        return self.plan.bytes_per_cell(self.grid.dtype.itemsize)

    @property
    def flops_per_cell(self) -> int:
        return self.plan.flops_per_cell()

    @property
    def footprint_bytes(self) -> int:
        return sum(a.nbytes for a in self.fields.values())


def _random(rng: np.random.Generator, shape, dtype, low: float = 0.5, high: float = 1.5) -> np.ndarray:
    x = rng.random(shape, dtype=np.dtype(dtype).type)
    x *= high - low
    x += low
    return x


def _sweep_case(w: Workload, name: str, lattice: Grid, sweep: Sweep, swap, params: dict, names: tuple[str, ...], rng,
                scale: dict | None = None) -> Case:
    scale = scale or {}
    fields = {}
    for field_name in names:
        low, high = scale.get(field_name, (0.5, 1.5))
        fields[field_name] = _random(rng, lattice.padded_shape, lattice.dtype, low, high)
    a, b = swap  # both buffers of a swap carry the same walls, as the time loop fills them
    walls = np.ones(lattice.padded_shape, bool)
    walls[lattice.interior] = False
    fields[b][walls] = fields[a][walls]
    return Case(w, name, lattice, sweep, fields, swap, params)


def _build_jacobi(w: Workload, rng, with_rhs: bool) -> Case:
    step = problems.linear_step("poisson2d", w.shape, w.dtype)
    sweep = poisson2d.jacobi_sweep(Stencil.laplacian(2, 1, step.lattice.spacing), with_rhs=with_rhs)
    names = ("u", "u_new", "f") if with_rhs else ("u", "u_new")
    return _sweep_case(w, "poisson2d", step.lattice, sweep, step.swap, step.params, names, rng)


def _build_heat(w: Workload, rng, ndim: int) -> Case:
    step = problems.linear_step(f"heat{ndim}d", w.shape, w.dtype)
    return _sweep_case(w, f"heat{ndim}d", step.lattice, step.sweep, step.swap, step.params, ("u", "u_new"), rng)


def _build_wave(w: Workload, rng, radius: int) -> Case:
    step = problems.linear_step("wave3d", w.shape, w.dtype, radius=radius)
    vmax = float(np.max(initial_array(step.problem, step.lattice, "vel", 0, step.values, 1.0)))
    # random speeds below the stable maximum keep the leapfrog bounded over many timed steps
    return _sweep_case(w, "wave3d", step.lattice, step.sweep, step.swap, step.params, ("u", "u_prev", "vel"), rng,
                       {"vel": (0.5 * vmax, vmax)})


def _build_derivatives(w: Workload, rng, orders: tuple[int, ...], axis: int) -> Case:
    problem, built = problems.problem("derivatives", w.shape, w.dtype, axis=axis)
    grid = problem.grid
    op = derivatives.operator(axis, grid.spacing[axis], built["accuracy"], orders=orders)
    fields = {"u": _random(rng, w.shape, w.dtype)}
    for d in op.outputs:
        fields[d.out] = np.full(w.shape, np.nan, dtype=w.dtype)
    lattice = Grid(grid.shape, grid.spacing, grid.dtype, 0, grid.origin)
    return Case(w, "derivatives", lattice, op, fields, None, {"axis": axis, "orders": list(orders)})


# name -> (builder, default ndim, default dtype, description)
KINDS = {
    "poisson2d": (lambda w, rng: _build_jacobi(w, rng, True), 2, "float32", "Jacobi sweep with right-hand side (reads u and f)"),
    "jacobi2d": (lambda w, rng: _build_jacobi(w, rng, False), 2, "float32", "Jacobi sweep of the Laplace equation (f = 0)"),
    "heat2d": (lambda w, rng: _build_heat(w, rng, 2), 2, "float32", "FTCS heat step, 5-point"),
    "heat3d": (lambda w, rng: _build_heat(w, rng, 3), 3, "float32", "FTCS heat step, 7-point"),
    "wave3d": (lambda w, rng: _build_wave(w, rng, 8), 3, "float32", "acoustic leapfrog, radius-8 star (ISO3DFD)"),
    "derivatives": (lambda w, rng: _build_derivatives(w, rng, (1,), 1), 2, "float64", "first derivative along x"),
    "derivatives-fused": (
        lambda w, rng: _build_derivatives(w, rng, (1, 2), 1),
        2,
        "float64",
        "first and second derivative along x, one pass",
    ),
    "derivatives-y": (lambda w, rng: _build_derivatives(w, rng, (1, 2), 0), 2, "float64", "first and second derivative along y, one pass"),
}

GPU_MATRIX = (
    Workload("poisson2d", (16384, 16384), "float32"),
    Workload("jacobi2d", (16384, 16384), "float32"),
    Workload("heat2d", (16384, 16384), "float32"),
    Workload("heat3d", (512, 512, 512), "float32"),
    Workload("wave3d", (512, 512, 512), "float32"),
    Workload("derivatives", (10000, 10000), "float64"),
    Workload("derivatives-fused", (10000, 10000), "float64"),
)
GPU_QUICK = (
    Workload("jacobi2d", (8192, 8192), "float32"),
    Workload("heat3d", (256, 256, 256), "float32"),
    Workload("wave3d", (256, 256, 256), "float32"),
    Workload("derivatives-fused", (4096, 4096), "float64"),
)
# sized for a 2-core CI machine; each field set is larger than a typical last-level cache
CPU_MATRIX = (
    Workload("poisson2d", (4096, 4096), "float32"),
    Workload("jacobi2d", (4096, 4096), "float32"),
    Workload("heat2d", (4096, 4096), "float32"),
    Workload("heat3d", (256, 256, 256), "float32"),
    Workload("wave3d", (192, 192, 192), "float32"),
    Workload("derivatives", (2000, 2000), "float64"),
    Workload("derivatives-fused", (2000, 2000), "float64"),
)
CPU_QUICK = (
    Workload("jacobi2d", (2048, 2048), "float32"),
    Workload("heat3d", (128, 128, 128), "float32"),
    Workload("wave3d", (64, 64, 64), "float32"),
    Workload("derivatives-fused", (1000, 1000), "float64"),
)


def default_matrix(gpu: bool, quick: bool) -> tuple[Workload, ...]:
    if gpu:
        return GPU_QUICK if quick else GPU_MATRIX
    return CPU_QUICK if quick else CPU_MATRIX


def select(
    matrix: tuple[Workload, ...],
    names: list[str] | None = None,
    sizes: dict[str, tuple[int, ...]] | None = None,
    dtypes: list[str] | None = None,
) -> list[Workload]:
    """Restrict the matrix to `names` (a name outside it gets its default shape from `sizes`),
    override shapes (key: workload name, or '2d'/'3d' for every workload of that dimension)
    and cross with `dtypes`."""
    sizes = sizes or {}
    by_name = {w.name: w for w in matrix}
    chosen = []
    for name in names or [w.name for w in matrix]:
        if name not in KINDS:
            raise StencilforgeError(f"unknown workload {name!r}: choose from {', '.join(KINDS)}")
        ndim, default_dtype = KINDS[name][1], KINDS[name][2]
        shape = sizes.get(name) or sizes.get(f"{ndim}d")
        base = by_name.get(name)
        if shape is None and base is None:
            raise StencilforgeError(
                f"workload {name} is not in this matrix: give its size, for example --size {name}=" + "x".join(["256"] * ndim)
            )
        if shape is not None and len(shape) != ndim:
            raise StencilforgeError(f"workload {name} needs a {ndim}D size, got {'x'.join(map(str, shape))}")
        w = base if base is not None else Workload(name, tuple(shape or ()), default_dtype)
        if shape is not None:
            w = replace(w, shape=tuple(shape))
        for dt in dtypes or [w.dtype]:
            chosen.append(replace(w, dtype=parse_dtype(dt).name))
    return chosen


def build_case(w: Workload, seed: int = 0) -> Case:
    if w.name not in KINDS:
        raise StencilforgeError(f"unknown workload {w.name!r}: choose from {', '.join(KINDS)}")
    return KINDS[w.name][0](w, np.random.default_rng(seed))


def pass_cases(problem: Problem, seed: int = 0) -> list[Case]:
    """A case for each linear pass of a problem of one's own (its sweep as a run steps it, on its grid), on random
    fields: what `stencilforge tune FILE.py` measures. Each step swaps the output with the field the sweep reads
    around the cell (its first such field)."""
    an, values = problem.analysis, problem.values()
    grid = an.grid
    lattice = Grid(grid.shape, grid.spacing, grid.dtype, an.ghost, grid.origin)
    rng = np.random.default_rng(seed)
    cases = []
    for sweep in linear_passes(an.stages, values).values():
        w = Workload(f"{problem.name}:{sweep.out}", tuple(grid.shape), grid.dtype.name)
        swap = (sweep.out, (sweep.stencil_inputs or sweep.inputs)[0])
        names = tuple(dict.fromkeys((*sweep.inputs, sweep.out)))
        cases.append(_sweep_case(w, problem.name, lattice, sweep, swap, values, names, rng))
    return cases
