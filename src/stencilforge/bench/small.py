"""Small-problem rows: where the host's work per step is what a step costs, a step through `sf.run` against the
same update as a plain array loop (what a course writes).

Diffusion (u + nu lap u h^2, walls at rest) on a 1D line of 81 points, 2D squares of 64^2 and 256^2 and a 3D
cube of 32^3, against the course's loop in NumPy on the CPU, and in CuPy and as one `jax.jit` of
`lax.fori_loop` on the GPU; and a step of 52 passes (a source pass, a pressure Jacobi of 50 iterations in one
sf.Iterate, an update that reads the last iterate), against the same step in NumPy or CuPy. Every peer starts
from our initial state and takes as many steps; its state after them must be within `AGREE` of ours (relative
to the largest value), or it is reported `wrong`. Ours: the median of the repeats of a whole `sf.run` (one
check, at the end) after a run that compiles; a peer: the median of as many repeats.
"""

from __future__ import annotations

import functools
import os
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..boundary import Dirichlet, Neumann
from ..ir.nodes import Eq, Field, Grid, Iterate, cos, sin
from ..ir.operators import laplacian
from ..problem import Problem
from ..runner import run as run_problem

NU = 0.1  # nu dt / h^2 of every diffusion case, stable in 1D, 2D and 3D
NIT = 50  # the pressure loop's iterations, as the "12 steps to Navier-Stokes" course takes
AGREE = 1e-10
CELL_STEPS = 2e6  # about this many cell updates a run: fewer steps on larger grids


@dataclass(frozen=True)
class SmallWorkload:
    name: str  # "diffusion" or "pressure_loop"
    shape: tuple[int, ...]

    @property
    def label(self) -> str:
        return f"{self.name} {'x'.join(map(str, self.shape))} float64"

    def steps(self, gpu: bool) -> int:
        if self.name == "pressure_loop":
            return 400 if gpu else 300
        return 2000 if gpu else int(min(20000, max(500, CELL_STEPS / np.prod(self.shape))))


MATRIX = (*(SmallWorkload("diffusion", s) for s in ((81,), (64, 64), (256, 256), (32, 32, 32))),
          SmallWorkload("pressure_loop", (39, 39)))


def diffusion(shape: tuple[int, ...]) -> Problem:
    g = Grid(shape, extent=2.0, dtype="float64")
    u = Field("u", g)
    rng = np.random.default_rng(0)
    return Problem([Eq(u.next, u + NU * laplacian(u) * min(g.spacing) ** 2)], initial={u: rng.random(shape)},
                   boundary={u: Dirichlet(0.0)}, dt=0.01, name="diffusion")


def pressure_loop(shape: tuple[int, ...], nit: int = NIT) -> Problem:
    """52 passes a step: b from q, p by `nit` Jacobi iterations of the course's pressure equation (Neumann walls,
    p = 0 at the top), q moved by the last iterate's gradient."""
    dy, dx = (2.0 / (n + 1) for n in shape)
    grid = Grid(shape, spacing=(dy, dx), origin=(dy, dx))
    p, q, b = Field("p", grid), Field("q", grid), Field("b", grid, levels=1)
    jacobi = Eq(p.next, ((p[0, 1] + p[0, -1]) * dy**2 + (p[1, 0] + p[-1, 0]) * dx**2) / (2 * (dx**2 + dy**2))
                - dx**2 * dy**2 / (2 * (dx**2 + dy**2)) * b)
    move = Eq(q.next, q - 0.01 * q * (q - q[0, -1]) - 0.001 * (p.next[0, 1] - p.next[0, -1]))
    return Problem([Eq(b, sin(grid.x) * q), Iterate(nit, (jacobi,)), move], initial={q: sin(grid.x) * cos(grid.y)},
                   boundary={p: ((Neumann(), Dirichlet(0.0)), Neumann()), q: Dirichlet(0.0)}, dt=0.01, name="pressure_loop")


def _problem(w: SmallWorkload) -> Problem:
    return pressure_loop(w.shape) if w.name == "pressure_loop" else diffusion(w.shape)


def _initial(problem: Problem) -> dict[str, np.ndarray]:
    """The fields' initial values with one ghost layer (zero there): the state every implementation starts from."""
    from ..simulation import Simulation

    sim = Simulation(problem, "numpy")
    return {name: np.asarray(levels[-2 if len(levels) > 1 else 0]) for name, levels in sim.levels.items()}


def _diffusion_loop(u, steps: int) -> Any:
    """The course's loop: copy, the interior from slices, the walls (ghost cells) left at rest."""
    inner = (slice(1, -1),) * u.ndim
    for _ in range(steps):
        un = u.copy()
        lap = -2.0 * u.ndim * un[inner]
        for a in range(u.ndim):
            lap = lap + un[tuple(slice(2, None) if b == a else slice(1, -1) for b in range(u.ndim))]
            lap = lap + un[tuple(slice(None, -2) if b == a else slice(1, -1) for b in range(u.ndim))]
        u[inner] = un[inner] + NU * lap
    return u


def _pressure_step_loop(state: dict, steps: int, shape: tuple[int, ...], xp) -> dict:
    """pressure_loop's step as array code: the walls after each iteration as the course writes them."""
    dy, dx = (2.0 / (n + 1) for n in shape)
    x = xp.asarray(dx * np.arange(shape[1] + 2))[None, :]
    p, q = state["p"], state["q"]
    i = (slice(1, -1), slice(1, -1))
    for _ in range(steps):
        b = xp.sin(x[:, 1:-1]) * q[i]
        for _ in range(NIT):
            pn = p.copy()
            p[i] = (((pn[1:-1, 2:] + pn[1:-1, :-2]) * dy**2 + (pn[2:, 1:-1] + pn[:-2, 1:-1]) * dx**2) / (2 * (dx**2 + dy**2))
                    - dx**2 * dy**2 / (2 * (dx**2 + dy**2)) * b)
            p[0, :] = p[1, :]
            p[:, 0] = p[:, 1]
            p[:, -1] = p[:, -2]
        qn = q.copy()
        q[i] = qn[i] - 0.01 * qn[i] * (qn[i] - qn[1:-1, :-2]) - 0.001 * (p[1:-1, 2:] - p[1:-1, :-2])
    return {"p": p, "q": q}


@functools.lru_cache(maxsize=None)
def _jax_loop(ndim: int) -> Callable:
    """The diffusion update as one jitted lax.fori_loop over the steps (traced: one compile for every run)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # else JAX takes most of the GPU at import
    import jax

    jax.config.update("jax_enable_x64", True)
    if not any(d.platform == "gpu" for d in jax.devices()):
        raise ImportError(name="jax[cuda]")
    inner = (slice(1, -1),) * ndim

    def step(_, a):
        lap = -2.0 * ndim * a[inner]
        for k in range(ndim):
            lap = lap + a[tuple(slice(2, None) if b == k else slice(1, -1) for b in range(ndim))]
            lap = lap + a[tuple(slice(None, -2) if b == k else slice(1, -1) for b in range(ndim))]
        return a.at[inner].set(a[inner] + NU * lap)

    return jax.jit(lambda a, n: jax.lax.fori_loop(0, n, step, a))


def _jax_diffusion(u, steps: int):
    import jax

    return _jax_loop(u.ndim)(jax.numpy.asarray(u), steps).block_until_ready()


def _peers(w: SmallWorkload, gpu: bool, names: tuple[str, ...]) -> list[tuple[str, Callable]]:
    """(row name, run(initial fields, steps) -> their interior after them, on the host) of the peers that apply."""
    shape = w.shape

    def array_loop(xp):
        def run(initial, steps):
            state = {k: xp.asarray(v.copy()) for k, v in initial.items()}
            if w.name == "pressure_loop":
                out = _pressure_step_loop(state, steps, shape, xp)["q"]
            else:
                out = _diffusion_loop(state["u"], steps)
            if xp is not np:
                xp.cuda.Device().synchronize()
            return out

        return run

    peers: list[tuple[str, Callable]] = []
    if not gpu and "numpy" in names:
        peers.append(("NumPy loop", array_loop(np)))
    if gpu and "cupy" in names:
        import cupy

        peers.append(("CuPy loop", array_loop(cupy)))
    if gpu and "jax" in names and w.name == "diffusion":
        peers.append(("JAX fori_loop", lambda initial, steps: _jax_diffusion(initial["u"], steps)))
    return peers


def _host(a) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)


def small_rows(workloads, backend: str, peers: tuple[str, ...], repeats: int, say: Callable[[str], None] = lambda m: None) -> list[dict]:
    """Per workload: our row, then each peer's, in µs a step, each with its time over ours (`ours_faster_by`)."""
    gpu = backend == "cuda"
    rows = []
    for w in workloads:
        problem, steps = _problem(w), w.steps(gpu)
        out = "q" if w.name == "pressure_loop" else "u"
        say(f"small: {w.label}, stencilforge {backend}")
        result = run_problem(problem, steps=steps, backend=backend, check_every=steps)  # compiles
        samples = []
        for _ in range(repeats):
            result = run_problem(problem, steps=steps, backend=backend, check_every=steps)
            samples.append(result.summary["wall_s"] / steps)
        ours = _host(result.fields[out])
        group = [{"impl": f"stencilforge {backend}", "kind": "ours", "status": "ok", "us_per_step": 1e6 * statistics.median(samples),
                  "samples_us": [1e6 * s for s in samples], "passes_per_step": result.summary["passes_per_step"]}]
        initial = _initial(problem)
        for name, run in _peers(w, gpu, peers):
            say(f"small: {w.label}, {name}")
            row: dict = {"impl": name, "kind": "peer"}
            try:
                theirs = _host(run(initial, steps))  # also its compile, for JAX
                times = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    run(initial, steps)
                    times.append((time.perf_counter() - start) / steps)
            except ImportError as exc:
                group.append({**row, "status": "skipped", "note": f"needs {exc.name}"})
                continue
            inner = theirs[(slice(1, -1),) * theirs.ndim]
            gap = float(np.abs(inner - ours).max()) / (float(np.abs(ours).max()) or 1.0)
            row.update(status="ok" if gap <= AGREE else "wrong", us_per_step=1e6 * statistics.median(times),
                       samples_us=[1e6 * s for s in times], relative_difference=gap)
            if gap > AGREE:
                row["note"] = f"its {out} differs from ours by {gap:.2e} (relative) > {AGREE:g}"
            group.append(row)
        for r in group:
            r.update(problem=w.name, label=w.label, shape=list(w.shape), dtype="float64", steps=steps, repeats=repeats)
            r["ours_faster_by"] = r["us_per_step"] / group[0]["us_per_step"] if "us_per_step" in r else None
        rows.extend(group)
    return rows
