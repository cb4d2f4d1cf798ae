"""What keeping the last finite state costs (`LoopOptions.keep_finite`): the time loop on heat2d 2048^2 (the CLI's
default float32, numba), 1000 steps with a check every 100, alternately with and without the copy, and the copy
itself against a step and a check, interleaved in one process.

On a shared host the load moves the times more than the copy does: the load average is recorded, and only runs
taken while it stays low compare.

    PYTHONPATH=src python benchmarks/keep_finite_bench.py --rounds 24 > keep.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from stencilforge import problems
from stencilforge.backends import get_backend
from stencilforge.runner import run
from stencilforge.simulation import PassStepper, Simulation

SHAPE, STEPS = (2048, 2048), 1000


def machine() -> str:
    """The CPU's model name, where Linux says it."""
    try:
        return next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


def summary(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "samples": samples}


def loop(engine, rounds: int) -> dict:
    """Loop seconds of whole runs, keeping and not, in alternating order after a warm-up pair."""
    out: dict[str, list[float]] = {"keep": [], "off": []}
    for r in range(rounds + 1):
        for keep in (True, False) if r % 2 else (False, True):
            s = run(problems.problem("heat2d", shape=SHAPE)[0], steps=STEPS, backend=engine, keep_finite=keep).summary
            if r:
                out["keep" if keep else "off"].append(s["wall_s"])
    return {k: summary(v) for k, v in out.items()}


def parts(engine, repeats: int) -> dict:
    """Milliseconds of a fused pass per step, a single step, the finite check and the copy, interleaved."""
    st = PassStepper(Simulation(problems.problem("heat2d", shape=SHAPE)[0], engine))
    st.warm()
    st.compile()
    if st.sim.fused is not None:
        st.sim.fused.wait()
    kept = engine.xp.empty_like(st.fields()["u"])
    times: dict[str, list[float]] = {"fused_step": [], "single_step": [], "finite_check": [], "copy": []}
    n = 0
    for _ in range(repeats):
        a = time.perf_counter()
        k = st.advance(n, st.fused is not None)
        times["fused_step"].append((time.perf_counter() - a) / k * 1e3)
        n += k
        a = time.perf_counter()
        n += st.advance(n, False)
        times["single_step"].append((time.perf_counter() - a) * 1e3)
        a = time.perf_counter()
        st.finite()
        times["finite_check"].append((time.perf_counter() - a) * 1e3)
        a = time.perf_counter()
        kept[...] = st.fields()["u"]
        times["copy"].append((time.perf_counter() - a) * 1e3)
    return {"steps_per_pass": st.per_pass, "array_mb": kept.nbytes / 1e6, **{k: summary(v) for k, v in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    engine = get_backend("numba")
    load = [os.getloadavg()[0]]
    result = {"machine": machine(), "cores": os.cpu_count(),
              "case": f"heat2d {SHAPE[0]}x{SHAPE[1]} float32 numba, {STEPS} steps, check every 100",
              "parts_ms": parts(engine, args.repeats)}
    load.append(os.getloadavg()[0])
    result["loop_s"] = loop(engine, args.rounds)
    load.append(os.getloadavg()[0])
    result["load_average"] = load
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
