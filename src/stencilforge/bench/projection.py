"""Projection rows: a step with a solve inside (the lid-driven cavity by pressure projection, as a user writes it)
through `sf.run`, against the same scheme written with an array library and its sparse solvers.

Ours: examples/cavity.py's problem at Re = 100 (momentum, `Solve` for the pressure by multigrid to the dtype's
default tolerance, warm-started, correction), a fresh run from rest per repeat after one run that compiles and
loads the kernels; its time is the loop's own clock. The peers take the same steps from rest with the pressure
by conjugate gradients, warm-started from the last pressure, to the same relative residual: NumPy with SciPy
(and SciPy's sparse LU, factorised once and not counted: its best case, a matrix that never changes) on the
CPU, CuPy with cupyx on the GPU (a GPU user's way). A peer is timed once (a CG step takes seconds at the GPU
sizes); its fields after the last step are compared with ours, and a peer further than `AGREE` from them is
reported as wrong.
"""

from __future__ import annotations

import inspect
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..boundary import Dirichlet, Neumann
from ..errors import StencilforgeError
from ..ir.nodes import Constant, Eq, Field, Grid, Solve, where
from ..ir.operators import d, laplacian
from ..problem import Problem
from ..runner import run as run_problem
from ..simulation import SOLVE_TOL

RE = 100.0
AGREE = 1e-6  # largest |u_ours - u_peer| (lid speed 1) for a peer to count as the same scheme
PEER_NAMES = {"numpy": ("NumPy + SciPy CG", "NumPy + SciPy LU"), "cupy": ("CuPy + cupyx CG",)}


@dataclass(frozen=True)
class ProjectionWorkload:
    """The cavity on `n` x `n` interior nodes (n + 2 with the walls), float64, `steps` steps from rest."""

    n: int
    steps: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    @property
    def label(self) -> str:
        return f"projection {self.n}x{self.n} float64"


CPU, CPU_QUICK = ProjectionWorkload(511, 5), ProjectionWorkload(127, 3)
GPU, GPU_QUICK = ProjectionWorkload(4095, 5), ProjectionWorkload(1023, 3)


def projection_matrix(gpu: bool, quick: bool, sizes: dict | None = None) -> tuple[ProjectionWorkload, ...]:
    """The default workload for the device, its size from `sizes['projection']` (square) where given."""
    w = (GPU_QUICK if quick else GPU) if gpu else (CPU_QUICK if quick else CPU)
    shape = (sizes or {}).get("projection")
    if shape is None:
        return (w,)
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 3:
        raise StencilforgeError(f"projection needs a square 2D size of at least 3x3, got {'x'.join(map(str, shape))}")
    return (ProjectionWorkload(shape[0], w.steps),)


def time_step(n: int) -> float:
    """examples/cavity.py's step at Re = 100: 0.01 on 33 x 33 nodes, in proportion to h^2."""
    return min(0.01 * (32 / (n + 1)) ** 2, 1 / RE)


def cavity(n: int, dtype: str = "float64") -> Problem:
    """examples/cavity.py's problem at Re = 100 on n x n interior nodes: the bench's step with a solve inside."""
    h, dt = 1.0 / (n + 1), time_step(n)
    grid = Grid((n, n), spacing=(h, h), origin=(h, h), dtype=dtype)
    nu = Constant("nu", 1 / RE)
    u, v = Field("u", grid), Field("v", grid)
    us, vs, p = (Field(name, grid, levels=1) for name in ("us", "vs", "p"))
    lid, rest = Dirichlet(where(grid.y > 1 - h / 2, 1.0, 0.0)), Dirichlet(0.0)

    def momentum(w):
        return w + dt * (-u * d(w, "x") - v * d(w, "y") + nu * laplacian(w))

    return Problem(
        [Eq(us, momentum(u)), Eq(vs, momentum(v)), Solve(p, (d(us, "x") + d(vs, "y")) / dt),
         Eq(u.next, us - dt * d(p, "x")), Eq(v.next, vs - dt * d(p, "y"))],
        boundary={u: lid, us: lid, v: rest, vs: rest, p: Neumann()}, dt=dt, steps=1000, name="cavity",
    )


def neumann_laplacian(n: int, h: float):
    """Minus the 5-point Laplacian on n x n nodes with zero flux through every wall (no face beyond the first and
    last node), as the project's multigrid builds it: symmetric, positive semi-definite."""
    import scipy.sparse as sp

    main = np.full(n, 2.0)
    main[0] = main[-1] = 1.0
    one = sp.diags([-np.ones(n - 1), main, -np.ones(n - 1)], [-1, 0, 1]) / (h * h)
    eye = sp.identity(n)
    return (sp.kron(eye, one) + sp.kron(one, eye)).tocsr()


def _host(a) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)


class ArrayProjection:
    """The cavity's step in NumPy (or CuPy, `xp`) with a library's sparse solver for the pressure: momentum by
    centred differences, -lap p = -div(u*) / dt by CG (or LU), u = u* - dt grad p."""

    def __init__(self, n: int, solver: str, xp=np):
        import scipy.sparse.linalg as spla

        self.n, self.h, self.xp = n, 1.0 / (n + 1), xp
        self.dt, self.nu = time_step(n), 1.0 / RE
        self.u, self.v = xp.zeros((n + 2, n + 2)), xp.zeros((n + 2, n + 2))
        self.u[-1, :] = 1.0  # the lid, on the wall y = 1 (ghost row), as the Dirichlet where(y > 1 - h/2, 1, 0) fills it
        self.p = xp.zeros(n * n)
        self.a, self.cg = neumann_laplacian(n, self.h), spla.cg
        if xp is not np:
            import cupyx.scipy.sparse as csp
            import cupyx.scipy.sparse.linalg as cspla

            self.a, self.cg = csp.csr_matrix(self.a), cspla.cg
        self.solver, self.iterations = solver, 0
        if solver == "lu":  # the null space removed by pinning the first node, then the zero-mean solution taken
            pinned = self.a.tolil()
            pinned[0, :] = 0.0
            pinned[0, 0] = 1.0
            self.lu = spla.splu(pinned.tocsc())

    def _count(self, x) -> None:
        """CG's callback: one iteration (keeping no iterate: a list of them held every one, 149 GB at 2047² on a GPU)."""
        self.iterations += 1

    def _dx(self, a):
        return (a[1:-1, 2:] - a[1:-1, :-2]) / (2 * self.h)

    def _dy(self, a):
        return (a[2:, 1:-1] - a[:-2, 1:-1]) / (2 * self.h)

    def _lap(self, a):
        return (a[1:-1, 2:] + a[1:-1, :-2] + a[2:, 1:-1] + a[:-2, 1:-1] - 4 * a[1:-1, 1:-1]) / (self.h * self.h)

    def step(self) -> None:
        u, v, dt, n = self.u, self.v, self.dt, self.n
        us, vs = u.copy(), v.copy()  # the walls carry over
        us[1:-1, 1:-1] = u[1:-1, 1:-1] + dt * (-u[1:-1, 1:-1] * self._dx(u) - v[1:-1, 1:-1] * self._dy(u) + self.nu * self._lap(u))
        vs[1:-1, 1:-1] = v[1:-1, 1:-1] + dt * (-u[1:-1, 1:-1] * self._dx(v) - v[1:-1, 1:-1] * self._dy(v) + self.nu * self._lap(v))
        rhs = ((self._dx(us) + self._dy(vs)) / dt).ravel()
        rhs = -(rhs - rhs.mean())
        if self.solver == "cg":
            tol = "rtol" if "rtol" in inspect.signature(self.cg).parameters else "tol"  # older cupyx names it tol
            self.p, _ = self.cg(self.a, rhs, x0=self.p, maxiter=20 * n, callback=self._count, **{tol: SOLVE_TOL["float64"]})
        else:
            pinned = rhs.copy()
            pinned[0] = 0.0
            self.p = self.lu.solve(pinned)
        self.p -= self.p.mean()
        pp = self.xp.pad(self.p.reshape(n, n), 1, mode="symmetric")  # Neumann walls: ghosts mirror the first interior node
        u[1:-1, 1:-1] = us[1:-1, 1:-1] - dt * self._dx(pp)
        v[1:-1, 1:-1] = vs[1:-1, 1:-1] - dt * self._dy(pp)

    def fields(self) -> tuple[np.ndarray, np.ndarray]:
        """Interior u and v on the host."""
        return _host(self.u)[1:-1, 1:-1], _host(self.v)[1:-1, 1:-1]


def _ours(w: ProjectionWorkload, backend: str, repeats: int) -> tuple[dict, tuple[np.ndarray, np.ndarray]]:
    problem = cavity(w.n)
    run_problem(problem, steps=2, backend=backend)  # compiles, or loads the cache
    samples, summary, result = [], {}, None
    for _ in range(repeats):
        result = run_problem(problem, steps=w.steps, backend=backend, check_every=w.steps)
        summary = result.summary
        samples.append(summary["wall_s"] / w.steps)
    assert result is not None, "repeats >= 1"
    solves = summary["solves"]["p"]
    row = {"impl": f"stencilforge {backend}", "kind": "ours", "status": "ok", "solver": "multigrid",
           "ms_per_step": 1e3 * statistics.median(samples), "samples_ms": [1e3 * s for s in samples],
           "repeats": repeats, "work_per_solve": solves["cycles_per_solve"], "work_unit": "V-cycles"}
    return row, (_host(result.fields["u"]), _host(result.fields["v"]))


def _peers(names: tuple[str, ...], gpu: bool) -> list[tuple[str, str, str]]:
    """(row name, solver, library) for the chosen peers that apply on this device."""
    out = []
    if "numpy" in names and not gpu:
        out += [(PEER_NAMES["numpy"][0], "cg", "numpy"), (PEER_NAMES["numpy"][1], "lu", "numpy")]
    if "cupy" in names and gpu:
        out.append((PEER_NAMES["cupy"][0], "cg", "cupy"))
    return out


def _peer(w: ProjectionWorkload, name: str, solver: str, library: str, ours: tuple[np.ndarray, np.ndarray]) -> dict:
    row: dict = {"impl": name, "kind": "peer", "solver": solver}
    try:
        import scipy  # noqa: F401  (the matrix is built with SciPy on either device)

        xp: Any = np
        if library == "cupy":
            import cupy

            xp = cupy
        peer = ArrayProjection(w.n, solver, xp)
    except ImportError as exc:
        return {**row, "status": "skipped", "note": f"needs {exc.name}"}
    sync = xp.cuda.Device().synchronize if xp is not np else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(w.steps):
        peer.step()
    sync()
    seconds = time.perf_counter() - start
    gap = max(float(np.abs(a - b).max()) for a, b in zip(peer.fields(), ours))
    row.update(ms_per_step=1e3 * seconds / w.steps, repeats=1, largest_difference_in_u_v=gap,
               status="ok" if gap <= AGREE else "wrong")
    if solver == "cg":
        row.update(work_per_solve=peer.iterations / w.steps, work_unit="CG iterations")
    notes = [f"its u, v differ from ours by {gap:.2e} > {AGREE:g}"] if gap > AGREE else []
    if solver == "lu":
        notes.append("factoring not timed")
    if notes:
        row["note"] = "; ".join(notes)
    return row


def projection_rows(workloads, backend: str, peers: tuple[str, ...], repeats: int,
                    say: Callable[[str], None] = lambda m: None) -> list[dict]:
    """Per workload: our row, then each peer's, each with its time over ours (`ours_faster_by`)."""
    rows = []
    for w in workloads:
        say(f"projection: {w.label}, stencilforge {backend}")
        mine, fields = _ours(w, backend, repeats)
        group = [mine]
        for name, solver, library in _peers(peers, backend == "cuda"):
            say(f"projection: {w.label}, {name}")
            group.append(_peer(w, name, solver, library, fields))
        for r in group:
            r.update(problem="projection", label=w.label, shape=list(w.shape), dtype="float64", steps=w.steps)
            r["ours_faster_by"] = r["ms_per_step"] / mine["ms_per_step"] if "ms_per_step" in r else None
        rows.extend(group)
    return rows
