"""Run under mpiexec by test_mpi.py: every equation problem on every process grid that fits, gathered on rank 0.

usage: mpi_equation_driver.py BACKEND OUT.npz
"""

from __future__ import annotations

import json
import sys

import numpy as np

import stencilforge as sf
from stencilforge.distributed import world
from stencilforge.distributed.decomposition import _fits, factorizations
from test_boundary import channel  # inflow and outflow: walls per side


def gray_scott() -> sf.Problem:
    """Two coupled fields (u v^2) on a periodic grid, u from an array, with a residual that reads neighbours."""
    grid = sf.Grid((13, 10), extent=(1.3, 1.0))
    x, y = grid.x, grid.y
    u, v = sf.Field("u", grid), sf.Field("v", grid)
    du, dv, feed, kill = sf.Constant("Du", 2e-4), sf.Constant("Dv", 1e-4), sf.Constant("F", 0.04), sf.Constant("k", 0.06)
    dt = 0.2
    uvv = u * v ** 2
    noise = np.random.default_rng(1).uniform(0.4, 1.0, size=grid.shape)
    return sf.Problem(
        [sf.Eq(u.next, u + dt * (du * sf.laplacian(u) - uvv + feed * (1 - u))),
         sf.Eq(v.next, v + dt * (dv * sf.laplacian(v) + uvv - (feed + kill) * v))],
        initial={u: noise, v: 0.25 + 0.2 * sf.sin(6.3 * x) * sf.cos(6.3 * y)},
        boundary={u: sf.Periodic(), v: sf.Periodic()},
        exact={u: 1 - 0.1 * sf.sin(6.3 * x + grid.t), v: 0.25 + 0 * y},
        residual=du * sf.laplacian(u) - uvv + feed * (1 - u),
        dt=dt, name="gray_scott",
    )


def walls() -> sf.Problem:
    """Two passes (q.next reads v.next at neighbours), Dirichlet walls of x and t, a Neumann wall,
    a diagonal (corner) read, a coefficient known only as an expression, a forcing of x, y and t (numba: hoisted
    out of the kernel, evaluated on each rank's block), point sources and receivers between nodes, some on the
    cells of several blocks (the cuts of 2, 3 and 4 ranks), recorded every other step."""
    grid = sf.Grid((14, 11), extent=(1.4, 1.1))
    x, y, t = grid.x, grid.y, grid.t
    v, q = sf.Field("v", grid), sf.Field("q", grid)
    c = sf.Field("c", grid, levels=1)
    dt = 0.02
    return sf.Problem(
        [sf.Eq(v.next, v - dt * sf.d(q, "x") + dt * c * (q[1, 1] - q[-1, -1]) + dt * 0.1 * sf.sin(3 * x + t) * sf.cos(2 * y)),
         sf.Eq(q.next, q - dt * sf.d(v.next, "x", accuracy=4) + dt * 0.1 * sf.laplacian(q))],
        initial={v: sf.sin(3 * x) * y, q: sf.cos(2 * y) + x, c: 1 + 0.5 * sf.sin(x + y)},
        boundary={v: (sf.Neumann(), sf.Dirichlet(sf.sin(3 * x) * sf.cos(t))),
                  q: (sf.Dirichlet(x * y + t), sf.Dirichlet(sf.cos(x + t)))},
        exact={v: sf.sin(3 * x) * y * sf.cos(t), q: sf.cos(2 * y) + x},
        sources=[sf.Source(q, (0.77, 0.33), sf.sin(7 * t)), sf.Source(v, (0.7, 0.6), 1 + t), sf.Source(q, (0.7, 0.6), 0.5)],
        receivers=[sf.Receiver(q, (0.7, 0.6)), sf.Receiver(v, (0.5, 0.4)), sf.Receiver(q, (0.77, 0.33)),
                   sf.Receiver(v, (0.25, 0.35)), sf.Receiver(q, (1.35, 1.05)), sf.Receiver(v, (0.52, 0.41), "nearest")],
        record_every=2,
        residual=sf.d(q, "y") - v, residual_scale=q,
        dt=dt, name="walls",
    )


def sinc_points() -> sf.Problem:
    """A wave with sinc sources and receivers (Kaiser-windowed, radius 4: 8 x 8 nodes) whose nodes straddle the cuts
    of 2, 3 and 4 ranks, one of radius 2 and one of radius 3, one on a node (that node alone), and a linear source
    sharing their nodes."""
    grid = sf.Grid((16, 15), extent=(1.6, 1.5))  # nodes at (i + 1/2) / 10
    t = grid.t
    w = sf.Field("w", grid, levels=3)
    return sf.Problem(
        [sf.Eq(w.next, 2 * w - w.prev + 0.002 * sf.laplacian(w, order=4))],
        initial={w: sf.sin(3 * grid.x) * sf.cos(2 * grid.y)}, boundary={w: sf.Dirichlet(0.0)},
        sources=[sf.Source(w, (0.77, 0.71), sf.sin(7 * t), "sinc"), sf.Source(w, (0.74, 0.66), 0.5),
                 sf.Source(w, (0.52, 0.93), 1 + t, "sinc", sinc_radius=2)],
        receivers=[sf.Receiver(w, (0.83, 0.64), "sinc"), sf.Receiver(w, (0.45, 0.35), "sinc"),
                   sf.Receiver(w, (0.6, 0.9), "sinc", sinc_radius=3), sf.Receiver(w, (0.77, 0.71))],
        dt=0.1, name="sinc_points",
    )


def heat_lowered() -> sf.Problem:
    """One linear equation: the lowered sweep decomposed, Dirichlet walls of x, y and t, a source between the
    nodes of the four blocks of 2 x 2 ranks (the lowered step's sources, weighted)."""
    grid = sf.Grid((12, 13), extent=1.0)
    x, y, t = grid.x, grid.y, grid.t
    u = sf.Field("u", grid)
    exact = sf.sin(3 * x) * sf.cos(2 * y) * sf.exp(-13 * 0.01 * t)
    return sf.Problem([sf.Eq(u.next, u + 0.05 * 0.01 * sf.laplacian(u))], initial={u: exact},
                      boundary={u: sf.Dirichlet(exact)}, exact={u: exact}, sources=[sf.Source(u, (0.5, 7 / 13), 0.01 * sf.cos(t))],
                      dt=0.05, name="heat_lowered")


def advection_periodic() -> sf.Problem:
    """One linear equation on a periodic grid: decomposed through the generated passes."""
    grid = sf.Grid((15, 12), extent=1.0)
    u = sf.Field("u", grid)
    return sf.Problem([sf.Eq(u.next, u - 0.02 * sf.upwind(u, "x", 1.0) + 0.0005 * sf.laplacian(u))],  # stable: CFL 0.24
                      initial={u: sf.sin(6.3 * grid.x) + grid.y}, boundary={u: sf.Periodic()}, dt=0.02, name="advection")


def iterated() -> sf.Problem:
    """sf.Iterate: 7 Jacobi-like iterations a step of p (its halos exchanged between them), with a one-level field r
    overwritten in place each iteration, a diagonal read (corners), walls periodic along y and per side along x, one
    of them a Dirichlet value of x and t; u.next reads the last iterate at neighbours."""
    grid = sf.Grid((13, 11), extent=(1.3, 1.1))
    x, y, t = grid.x, grid.y, grid.t
    u, p = sf.Field("u", grid), sf.Field("p", grid)
    b, r = sf.Field("b", grid, levels=1), sf.Field("r", grid, levels=1)
    dt = 0.002
    return sf.Problem(
        [sf.Eq(b, sf.sin(3 * x) * u + 0.01 * sf.laplacian(u)),
         sf.Iterate(7, [sf.Eq(r, b - 0.1 * p),
                        sf.Eq(p.next, (p[0, 1] + p[0, -1] + p[1, 0] + p[-1, 0] + 0.1 * p[1, 1]) / 4.1 - 0.01 * r)]),
         sf.Eq(u.next, u + dt * (sf.laplacian(u) - sf.d(p.next, "x") * u))],
        initial={u: sf.cos(2 * y) + x, p: x * y},
        boundary={u: sf.Dirichlet(x * y), p: (sf.Periodic(), (sf.Dirichlet(sf.cos(x + t)), sf.Neumann()))},
        dt=dt, name="iterated",
    )


CASES = (("gray_scott", gray_scott, 12), ("walls", walls, 9), ("sinc_points", sinc_points, 8), ("heat_lowered", heat_lowered, 8),
         ("advection", advection_periodic, 7), ("channel", channel, 10), ("iterated", iterated, 6))


def process_grids(nprocs: int, problem: sf.Problem) -> list[tuple[int, ...]]:
    """Every process grid of `nprocs` ranks whose blocks hold the problem's ghost width."""
    shape, g = problem.grid.shape, problem.analysis.ghost
    return [d for d in factorizations(nprocs, len(shape)) if _fits(shape, d, (g,) * len(shape))]


def run(problem: sf.Problem, backend: str, steps: int, **mpi) -> sf.Result:
    """`steps` steps; a problem with a residual measures it every few steps (a tol no run reaches)."""
    tol = 1e-300 if problem.residual is not None else None
    return sf.run(problem, steps=steps, tol=tol, backend=backend, check_every=4, **mpi)


def main(backend: str, out: str) -> None:
    comm = world()
    saved, meta = {}, {}
    for label, build, steps in CASES:
        problem = build()
        for dims in process_grids(comm.size, problem):
            result = run(problem, backend, steps, comm=comm, procs=dims)
            s = result.summary
            key = f"{label}@{'x'.join(map(str, dims))}"
            if comm.rank == 0:
                saved.update({f"{key}/{name}": arr for name, arr in result.fields.items()})
                saved.update({f"{key}/traces": result.traces.values} if result.traces is not None else {})
                meta[key] = {k: s.get(k) for k in ("procs", "steps", "errors", "residual", "sweeps")}
            else:
                assert all(arr is None for arr in result.fields.values()) and result.traces is None
    if comm.rank == 0:
        np.savez(out, __meta__=np.array(json.dumps(meta)), **saved)


if __name__ == "__main__":
    main(*sys.argv[1:])
