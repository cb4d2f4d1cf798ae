"""Run under mpiexec by test_mpi_multigrid.py: every case on every process grid of the ranks, results saved by rank 0.

usage: mpi_poisson_driver.py BACKEND OUT.npz
"""

from __future__ import annotations

import json
import sys

import numpy as np

from stencilforge import poisson
from stencilforge.distributed import world
from stencilforge.distributed.decomposition import _cut_area, _fits, factorizations
from stencilforge.solvers.decomposed import MIN_BLOCK


def case_inputs(shape, walls, variable, seed):
    """f (zero-mean without a dirichlet wall) and k of a case, the same on every rank."""
    rng = np.random.default_rng(seed)
    f = rng.standard_normal(shape)
    if all(w != "dirichlet" for w in walls):
        f -= f.mean()
    k = np.exp(rng.uniform(-1.0, 1.0, shape)) if variable else None
    return f, k


# (label, shape, walls, variable k, options): nested and non-nested levels split over the ranks, every wall, both
# smoothers, V and W cycles, FMG, CG, mixed precision, non-zero Dirichlet values, the null space. Small grids and
# few cycles keep a run quick on 2 cores; the cases without max_cycles stop at their tolerance.
CASES = (
    ("dirichlet2d", (50, 44), ("dirichlet", "dirichlet"), True, dict(value=lambda x, y: 1 + x - y * y, mixed=True, max_cycles=3)),
    ("periodic_neumann2d", (40, 34), ("periodic", "neumann"), False, dict(smoother="jacobi", cycle="W", tol=1e-6)),
    ("walls3d", (20, 18, 17), ("dirichlet", "periodic", "neumann"), True, dict(max_cycles=3)),
    ("cg2d", (36, 40), ("dirichlet", "neumann"), True, dict(method="cg", tol=1e-7)),
)


def solve(label, comm=None, procs=None, backend="numpy"):
    _, shape, walls, variable, options = next(c for c in CASES if c[0] == label)
    f, k = case_inputs(shape, walls, variable, seed=sum(map(ord, label)))
    options = {"tol": 1e-30, "max_cycles": 40, **options}
    return poisson(f, boundary=walls, k=k, backend=backend, comm=comm, procs=procs, **options)


def process_grids(nprocs: int, shape) -> list[tuple[int, ...]]:
    """Every process grid of 2 ranks; of more, the two with the least cut area (the automatic choice and the next)."""
    grids = [d for d in factorizations(nprocs, len(shape)) if _fits(shape, d, (MIN_BLOCK,) * len(shape))]
    grids.sort(key=lambda d: (_cut_area(shape, d), d))
    return grids if nprocs <= 2 else grids[:2]


def main(backend: str, out: str) -> None:
    comm = world()
    saved, meta = {}, {}
    for label, shape, *_ in CASES:
        for dims in process_grids(comm.size, shape):
            result = solve(label, comm, dims, backend)
            key = f"{label}@{'x'.join(map(str, dims))}"
            s = result.summary
            saved[key] = result.u
            meta[key] = {k: s[k] for k in ("procs", "cycles", "residual_history", "converged", "split_levels")}
    if comm.rank == 0:
        np.savez(out, __meta__=np.array(json.dumps(meta)), **saved)


if __name__ == "__main__":
    main(*sys.argv[1:])
