"""Where a decomposed step of a user's equations goes on GPU ranks: the ghost fill before the passes (walls and
halo exchange), the passes, the rotation, each timed alone by the slowest rank's wall clock around a
synchronised phase (median over steps), beside the undisturbed step time of the same Simulation.

    mpiexec -n 2 python benchmarks/mpi_equation_profile.py --shape 8192 8192 --steps 200

Rank 0 prints one JSON object. A phase timed alone loses the overlap a free-running step may have, so the phases
add up to at least the step time; their sizes say where to look.
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import time
from functools import partial
from pathlib import Path

from mpi4py import MPI

from stencilforge.backends import get_backend
from stencilforge.decomposed_simulation import DecomposedSimulation
from stencilforge.distributed import bind_device
from stencilforge.simulation import Simulation

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def timed(comm, backend, fn) -> float:
    backend.synchronize()
    comm.Barrier()
    start = time.perf_counter()
    fn()
    backend.synchronize()
    comm.Barrier()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example", default="gray_scott")
    ap.add_argument("--shape", type=int, nargs="+", default=[8192, 8192], help="per rank, split along the first axis")
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    bind_device(world)
    backend = get_backend("cuda")
    shape = (args.shape[0] * world.size, *args.shape[1:])
    problem = runpy.run_path(str(EXAMPLES / f"{args.example}.py"))["build"](shape=shape)
    sim = (DecomposedSimulation(problem, backend, None, world, procs=(world.size,) + (1,) * (len(shape) - 1))
           if world.size > 1 else Simulation(problem, backend))
    sim.step(5)  # compiles, NCCL set-up
    phases: dict[str, list[float]] = {"fill_before": [], "passes": [], "sources_and_rotate": [], "step": []}
    def passes(arrays, t):
        for _, run in sim.stages:
            run(arrays, sim.params, t)

    for _ in range(args.steps):
        t = sim.t
        phases["fill_before"].append(timed(world, backend, partial(sim._fill_before, t)))
        phases["passes"].append(timed(world, backend, partial(passes, sim.arrays(), t)))
        phases["sources_and_rotate"].append(timed(world, backend, partial(sim._rotate, 1)))
    total = timed(world, backend, lambda: sim.step(args.steps)) / args.steps
    out = {"example": args.example, "ranks": world.size, "shape": list(shape), "transport": getattr(sim, "transport", None),
           "ms": {k: 1e3 * statistics.median(v) for k, v in phases.items() if v}, "step_ms": 1e3 * total}
    if world.rank == 0:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
