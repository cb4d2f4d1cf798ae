"""Multi-GPU scaling of decomposed runs on the cuda backend: weak, strong, transports.

Run once under mpiexec with one rank per GPU (`mpiexec -n 4 python benchmarks/mpi_gpu_bench.py OUT.json`).
Runs on k < n GPUs use the first k ranks (a sub-communicator), so one launch
builds each global problem once and measures 1, 2 and 4 GPUs. Every measurement
is one warm-up run (compiles, NCCL set-up) then a timed run; time per step is
the slowest rank's wall time / steps, comm and compute per step come from the
run's summary (`sf.run(problem, comm=...)`: halo exchanges timed by CUDA events).
"""

from __future__ import annotations

import json
import sys
import time

from mpi4py import MPI

from stencilforge import problems
from stencilforge.backends import get_backend
from stencilforge.distributed import bind_device
from stencilforge.runner import run_with

WARMUP_STEPS = 10


def plan(ranks: int):
    """(group, problem, build params, steps, [(label, procs, halo), ...], k)."""
    out = []
    ks = [k for k in (1, 2, 4, 8) if k <= ranks]
    for problem, params, steps in (("heat3d", {}, 400), ("wave3d", {"radius": 8}, 150)):
        for k in ks:
            shape = (512 * k, 512, 512)
            configs = [("auto", None, "auto")]
            if k == ks[-1] and k > 1 and problem == "heat3d":
                configs.append(("staged", None, "staged"))
            out.append(("weak", problem, dict(params, shape=shape), steps, configs, k))
    for k in ks:
        configs = [("auto", None, "auto")]
        if k > 1:
            configs.append(("slabs", (k, 1, 1), "auto"))
        out.append(("strong", "heat3d", dict(shape=(1024, 1024, 1024)), 150, configs, k))
    return out


def main(path: str) -> None:
    world = MPI.COMM_WORLD
    bind_device(world)
    backend = get_backend("cuda")
    import cupy

    records = []
    built: dict = {}
    began = time.perf_counter()
    for group, problem, params, steps, configs, k in plan(world.size):
        color = 0 if world.rank < k else MPI.UNDEFINED
        sub = world.Split(color, world.rank)
        if sub != MPI.COMM_NULL:
            key = (problem, tuple(sorted((n, tuple(v) if isinstance(v, tuple) else v) for n, v in params.items())))
            if key not in built:
                built.clear()
                t = time.perf_counter()
                built[key] = problems.problem(problem, **params)[0]
                build_s = time.perf_counter() - t
            made = built[key]
            for label, procs, halo in configs:
                run_with(made, None, steps=WARMUP_STEPS, backend=backend, comm=sub, procs=procs, halo=halo)
                result = run_with(made, None, steps=steps, backend=backend, comm=sub, procs=procs, halo=halo)
                s = result.summary
                del result
                cupy.get_default_memory_pool().free_all_blocks()
                wall = sub.allreduce(s["wall_s"], op=MPI.MAX)
                rec = {
                    "group": group, "problem": problem, "params": {n: list(v) if isinstance(v, tuple) else v for n, v in params.items()},
                    "gpus": k, "config": label, "procs": s["procs"], "halo": s["halo"],
                    "strategy": s.get("strategy"), "steps": s["steps"], "wall_s": wall,
                    "ms_per_step": 1e3 * wall / s["steps"],
                    "comm_ms_per_step": 1e3 * s["comm_s"] / s["steps"],
                    "compute_ms_per_step": 1e3 * s["compute_s"] / s["steps"],
                    "gcells_per_s": s["gcells_per_s"], "teff_gbps": s["teff_gbps"], "build_s": build_s,
                    "elapsed_s": time.perf_counter() - began,
                }
                if world.rank == 0:
                    records.append(rec)
                    print(json.dumps(rec), flush=True)
            sub.Free()
        world.Barrier()
    if world.rank == 0:
        device = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        report = {
            "device": device.decode() if isinstance(device, bytes) else device,
            "ranks": world.size,
            "mpi": MPI.Get_library_version().splitlines()[0],
            "records": records,
        }
        with open(path, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
