"""The time of a projection step of the lid-driven cavity (examples/cavity.py, Re = 100, float64) on one backend:
steps from rest as a warm-up, then timed steps, wall clock with the device synchronised; with --kernels, the GPU
kernels' time over a few steps (PyTorch's profiler, which sees every CUDA kernel of the process, CuPy's too).

usage: python benchmarks/cavity_step.py [--backend cuda] [--n 4095] [--warm 30] [--steps 30] [--kernels] [--json OUT]

N is the number of interior nodes per axis: 4095 gives the 4097^2 grid of nodes with the walls.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import stencilforge as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import cavity  # noqa: E402


def kernel_table(sim: sf.Simulation, steps: int) -> list[dict]:
    """Per kernel name: its total time over `steps` steps and its launches."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        sim.step(steps)
        sim.synchronize()
    rows = [{"kernel": e.key, "ms_per_step": e.device_time_total / 1e3 / steps, "launches": e.count}
            for e in prof.key_averages() if e.device_time_total > 0]
    return sorted(rows, key=lambda r: -r["ms_per_step"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--n", type=int, default=4095)
    parser.add_argument("--warm", type=int, default=30)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--kernels", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    sim = sf.Simulation(cavity.build((args.n, args.n)), args.backend)
    sim.step(args.warm)
    sim.synchronize()
    start = time.perf_counter()
    sim.step(args.steps)
    sim.synchronize()
    ms = 1e3 * (time.perf_counter() - start) / args.steps
    solve = sim.solvers["p"].summary()
    row = {"nodes": args.n + 2, "backend": args.backend, "warm_steps": args.warm, "steps": args.steps, "ms_per_step": ms,
           "cycles_per_solve": solve["cycles_per_solve"]}
    print(f"{args.n + 2}^2 on {args.backend}: {ms:.2f} ms a step, {solve['cycles_per_solve']:.2f} cycles a solve")
    if args.kernels:
        row["kernels"] = kernel_table(sim, 10)
        for k in row["kernels"][:12]:
            print(f"  {k['ms_per_step']:8.3f} ms  {k['launches']:5d}  {k['kernel'][:70]}")
    if args.json:
        Path(args.json).write_text(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
