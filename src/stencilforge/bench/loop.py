"""Time-loop rows: a problem's time per step through the public API next to its kernels alone.

The loop time is the clock the loop itself reports (`wall_s` of `sf.solve` or
`sf.run`, over a run whose length is a multiple of the default check interval,
so its finite and residual checks count at their real rate; without the copy a
blow-up would hand over, `keep_finite`, which is not the loop's). The kernel time
is the same compiled kernels called in a bare loop on the same grid, in the
same mix of single and fused passes the run took. What the loop adds (walls,
sources, swaps, checks, bookkeeping) is overhead = loop / kernel - 1. Loop and
kernel repeats alternate in one process, so load from other jobs falls on both,
and each repeat of either allocates its fields afresh, as a run does: where an
allocation lands moved one kernel's time by up to 1.6x on a shared VM
(cpu-aligned-fields-2026-11-25.json), and fields allocated once for every kernel
repeat would put that luck on one side only.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from .. import problems
from ..boundary import Periodic
from ..errors import StencilforgeError
from ..grid import parse_dtype
from ..ir.nodes import Constant, Eq, Field, Grid
from ..ir.operators import laplacian
from ..problem import Problem
from ..runner import run as run_problem

CHECK_EVERY = 100  # the API's default check interval; a run is a whole number of them


@dataclass(frozen=True)
class LoopWorkload:
    """A problem run through the API: a seed problem's name, or 'gray_scott' (an equation written by a user)."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"

    @property
    def label(self) -> str:
        return f"{self.name} {'x'.join(map(str, self.shape))} {self.dtype}"


NAMES = ("heat2d", "heat3d", "poisson2d", "wave3d", "gray_scott")
CPU = tuple(LoopWorkload(n, s) for n, s in zip(NAMES, ((4096, 4096), (256, 256, 256), (4096, 4096), (192, 192, 192), (2048, 2048))))
CPU_QUICK = tuple(LoopWorkload(n, s) for n, s in zip(NAMES, ((1024, 1024), (96, 96, 96), (1024, 1024), (64, 64, 64), (512, 512))))
GPU = tuple(LoopWorkload(n, s) for n, s in zip(NAMES, ((16384, 16384), (512, 512, 512), (16384, 16384), (512, 512, 512), (4096, 4096))))
GPU_QUICK = tuple(LoopWorkload(n, s) for n, s in zip(NAMES, ((8192, 8192), (256, 256, 256), (8192, 8192), (256, 256, 256), (2048, 2048))))


def loop_matrix(gpu: bool, quick: bool, names: list[str] | None = None, sizes: dict | None = None) -> tuple[LoopWorkload, ...]:
    """The default loop workloads, restricted to `names` where given (names without a time loop are
    left out), with `sizes` overriding shapes by name or by '2d' / '3d' as for the kernel rows."""
    sizes = sizes or {}
    matrix = (GPU_QUICK if quick else GPU) if gpu else (CPU_QUICK if quick else CPU)
    chosen = [w for w in matrix if names is None or w.name in names]
    out = []
    for w in chosen:
        shape = sizes.get(w.name) or sizes.get(f"{len(w.shape)}d")
        if shape is not None and len(shape) != len(w.shape):
            raise StencilforgeError(f"{w.name} needs a {len(w.shape)}D size, got {'x'.join(map(str, shape))}")
        out.append(replace(w, shape=tuple(shape)) if shape is not None else w)
    return tuple(out)


def gray_scott(shape: tuple[int, ...], dtype: str = "float32"):
    """The Gray-Scott system of examples/gray_scott.py (two coupled fields, periodic walls, one pass),
    on `shape`: the bench's equation written by a user."""
    grid = Grid(shape, extent=2.5, dtype=dtype)
    dt = min(1.0, 0.24 * min(grid.spacing) ** 2 / 2e-5)  # forward Euler is stable while Du dt / h^2 <= 1/4
    u, v = Field("u", grid), Field("v", grid)
    du, dv, feed, kill = (Constant(n, x) for n, x in (("Du", 2e-5), ("Dv", 1e-5), ("F", 0.04), ("k", 0.06)))
    uvv = u * v ** 2
    rng = np.random.default_rng(0)
    return Problem(
        [Eq(u.next, u + dt * (du * laplacian(u) - uvv + feed * (1 - u))),
         Eq(v.next, v + dt * (dv * laplacian(v) + uvv - (feed + kill) * v))],
        initial={u: 1.0 - 0.5 * rng.random(shape), v: 0.25 * rng.random(shape)},
        boundary={u: Periodic(), v: Periodic()}, dt=dt, steps=10000, name="gray_scott",
    )


def overhead(loop_ms: float, kernel_ms: float) -> float:
    """What the loop adds to its kernels, as a fraction of the kernels' time."""
    return loop_ms / kernel_ms - 1.0


class _Subject:
    """A problem through `sf.run` (a seed problem from the catalogue, or Gray-Scott as a user writes it), and the
    kernels of its passes in a bare loop."""

    def __init__(self, w: LoopWorkload, backend: str):
        from ..backends import get_backend

        self.problem = gray_scott(w.shape, w.dtype) if w.name == "gray_scott" else problems.problem(w.name, w.shape, w.dtype)[0]
        self.tol = 1e-30 if w.name in problems.POISSON else None  # Jacobi as `--tol` runs it: residual checks count, never met
        self.backend = backend
        self.engine = get_backend(backend)

    def loop(self, steps: int) -> dict:
        return run_problem(self.problem, steps=steps, tol=self.tol, backend=self.backend, keep_finite=False).summary

    def kernels(self, steps: int, fused: int) -> float:
        """The passes of `steps` steps, `fused` of them several per pass as the loop took them, on fresh fields."""
        from ..simulation import Simulation

        sim = Simulation(self.problem, self.engine)
        if fused:
            why = sim.build_fused()
            assert why is None and sim.fused is not None, why  # the loop fused steps, so the pass fuses
            sim.fused.wait()
        arrays, params = sim.arrays(), sim.params
        self.engine.synchronize()
        start = time.perf_counter()
        if sim.fused is not None:
            for _ in range(fused // sim.fused.steps):
                sim.fused(arrays, [s * sim.dt for s in range(sim.fused.steps)])
        for _ in range(steps - fused):
            for _, run in sim.passes:
                run(arrays, params, 0.0)
        self.engine.synchronize()
        return time.perf_counter() - start


def measure_loop(w: LoopWorkload, backend: str, repeats: int, target_s: float) -> dict:
    """One row: interleaved repeats of the API's run and of its kernels alone, medians and the overhead."""
    parse_dtype(w.dtype)
    load_before = os.getloadavg()
    subject = _Subject(w, backend)
    first = subject.loop(CHECK_EVERY)  # warms every kernel the run uses; sizes the run
    per_step = first["wall_s"] / max(first["steps"], 1)
    steps = CHECK_EVERY * max(1, math.ceil(target_s / max(per_step * CHECK_EVERY, 1e-9)))
    loop_s, kernel_s, fused = [], [], 0
    for _ in range(repeats):
        s = subject.loop(steps)
        fused = s.get("fused_steps", 0)
        loop_s.append(s["wall_s"] / s["steps"])
        kernel_s.append(subject.kernels(s["steps"], fused) / s["steps"])
    return loop_row(w, backend, s["steps"], fused, loop_s, kernel_s, load_before, os.getloadavg())


def loop_row(w: LoopWorkload, backend: str, steps: int, fused: int, loop_s: list[float], kernel_s: list[float],
             load_before=None, load_after=None) -> dict:
    """The JSON row from per-step samples in seconds."""
    loop_ms, kernel_ms = statistics.median(loop_s) * 1e3, statistics.median(kernel_s) * 1e3
    return {
        "problem": w.name, "label": w.label, "shape": list(w.shape), "dtype": w.dtype, "backend": backend,
        "status": "ok", "steps": steps, "fused_steps": fused,
        "loop_ms": loop_ms, "kernel_ms": kernel_ms, "overhead": overhead(loop_ms, kernel_ms),
        "overhead_min": overhead(min(loop_s), min(kernel_s)),  # the least disturbed repeats, on a shared machine
        "loop_samples_ms": [x * 1e3 for x in loop_s], "kernel_samples_ms": [x * 1e3 for x in kernel_s],
        "repeats": len(loop_s),
        "load_average": {"before": list(load_before) if load_before else None, "after": list(load_after) if load_after else None},
    }


def loop_rows(workloads, backend: str, repeats: int, target_s: float, say: Callable[[str], None] = lambda m: None) -> list[dict]:
    rows = []
    for w in workloads:
        say(f"time loop: {w.label}")
        try:
            rows.append(measure_loop(w, backend, repeats, target_s))
        except StencilforgeError as exc:
            rows.append({"problem": w.name, "label": w.label, "shape": list(w.shape), "dtype": w.dtype, "backend": backend,
                         "status": "skipped", "note": str(exc)})
    return rows
