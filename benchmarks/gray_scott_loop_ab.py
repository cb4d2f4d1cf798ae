"""Gray-Scott 2048² float32 on numba, in a fresh process: sf.run's own clock per step, Simulation.step, the passes
alone and the periodic images' gather alone, interleaved rounds. Usage: python benchmarks/gray_scott_loop_ab.py OUT.json"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

import stencilforge as sf
from stencilforge.backends import get_backend
from stencilforge.bench.loop import gray_scott
from stencilforge.simulation import Simulation

STEPS = 200


def main() -> None:
    problem = gray_scott((2048, 2048))
    sf.run(problem, steps=100, backend="numba")  # compiled and cached before any clock
    backend = get_backend("numba")
    sim = Simulation(problem, backend)
    sim.step(2)
    samples: dict[str, list[float]] = {k: [] for k in ("sf.run (its wall_s)", "Simulation.step", "passes alone", "gather alone")}
    for _ in range(7):
        s = sf.run(problem, steps=STEPS, backend="numba").summary
        samples["sf.run (its wall_s)"].append(s["wall_s"] / s["steps"] * 1e3)
        t0 = time.perf_counter()
        sim.step(STEPS)
        samples["Simulation.step"].append((time.perf_counter() - t0) / STEPS * 1e3)
        t0 = time.perf_counter()
        for _ in range(STEPS):
            arrays = sim.arrays()
            for _, run in sim.passes:
                run(arrays, sim.params, 0.0)
            sim._rotate(1)
        samples["passes alone"].append((time.perf_counter() - t0) / STEPS * 1e3)
        t0 = time.perf_counter()
        for _ in range(STEPS):
            sim._fill_before(sim.t)
        samples["gather alone"].append((time.perf_counter() - t0) / STEPS * 1e3)
    report = {k: {"median_ms": float(np.median(v)), "min_ms": float(min(v)), "samples_ms": v} for k, v in samples.items()}
    with open(sys.argv[1], "w") as fh:
        json.dump({"workload": "gray_scott 2048x2048 float32, numba, 2 cores of an AMD EPYC", "per_step": report}, fh, indent=1)
    for k, v in report.items():
        print(f"{k:20}: median {v['median_ms']:.3f} ms, min {v['min_ms']:.3f}")


if __name__ == "__main__":
    main()
