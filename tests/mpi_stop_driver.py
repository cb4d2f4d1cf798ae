"""Run under mpiexec by test_mpi.py: the CFD course's Laplace problem stopped by each of its rules on every process
grid of the ranks, and a Python function as the rule (refused); rank 0 writes what each run reported as JSON.

usage: mpi_stop_driver.py BACKEND OUT.json
"""

from __future__ import annotations

import json
import sys

import stencilforge as sf
from mpi_equation_driver import process_grids
from stencilforge.distributed import world
from test_stop_rules import COURSE_RULES, laplace

SHAPE = (12, 16)  # a few hundred to a thousand steps to each rule


def main(backend: str, out: str) -> None:
    comm = world()
    found: dict = {}
    for name, (rule, _, _) in COURSE_RULES.items():
        problem = laplace(SHAPE, until=rule)
        for dims in process_grids(comm.size, problem):
            s = sf.run(problem, backend=backend, check_every=1, comm=comm, procs=dims).summary
            found[f"{name}@{'x'.join(map(str, dims))}"] = {k: s[k] for k in ("stop", "step", "until")}
    try:
        sf.run(laplace(SHAPE), steps=2, backend=backend, comm=comm, until=lambda fields: True)
    except sf.StencilforgeError as exc:
        found["function"] = str(exc)
    if comm.rank == 0:
        with open(out, "w") as f:
            json.dump(found, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
