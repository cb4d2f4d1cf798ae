"""Run under mpiexec by test_mpi.py: the examples whose step holds a solve (sf.Solve), decomposed, gathered on rank 0.

usage: mpi_solve_driver.py BACKEND OUT.npz
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

import stencilforge as sf
from stencilforge.convergence import load_problem_file
from stencilforge.distributed import world

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# (example, shape, steps, build options): Neumann walls (a singular solve), Dirichlet walls of t (the screened
# operator of an implicit step), periodic axes, and a start that is not divergence-free; shapes of two multigrid
# levels or more, so that the fine level splits
CASES = (
    ("cavity", (31, 31), 6, {}),
    ("implicit_heat", (33, 29), 5, {}),
    ("crank_nicolson", (29, 33), 4, {}),
    ("channel", (31, 40), 5, {"start": "perturbed"}),
    ("taylor_green", (32, 32), 4, {}),
)


def problem(name: str, shape, options) -> sf.Problem:
    return load_problem_file(EXAMPLES / f"{name}.py").build(shape=shape, **options)


def main(backend: str, out: str) -> None:
    comm = world()
    saved, meta = {}, {}
    for name, shape, steps, options in CASES:
        result = sf.run(problem(name, shape, options), steps=steps, backend=backend, comm=comm)
        if comm.rank == 0:
            saved.update({f"{name}/{field}": arr for field, arr in result.fields.items()})
            meta[name] = {"procs": result.summary["procs"], "solves": result.summary["solves"]}
    if comm.rank == 0:
        np.savez(out, __meta__=np.array(json.dumps(meta)), **saved)


if __name__ == "__main__":
    main(*sys.argv[1:])
