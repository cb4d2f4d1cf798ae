"""Cold and warm start: a fresh process's time to its first step, measured in a subprocess.

Cold: empty kernel caches (STENCILFORGE_CACHE_DIR, NUMBA_CACHE_DIR and CUPY_CACHE_DIR point to a
new temporary directory), as on a new machine. Warm: a second process on the same caches, as on
every later run. The child times `import stencilforge`, building the problem, compiling its kernels
and its first step (a run of the problem's default length, stopped after its first pass: the
kernels compiled are those such a run uses).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .loop import LoopWorkload

CHILD = """
import json, sys, time
start = time.perf_counter()
import stencilforge
imported = time.perf_counter()
from stencilforge.bench.coldstart import first_step
print("COLDSTART " + json.dumps(first_step(*json.loads(sys.argv[1]), import_s=imported - start)))
"""


def first_step(name: str, shape: list[int], dtype: str, backend: str, import_s: float) -> dict:
    """In the child: build, compile and take the first step of the problem's own run, timing each."""
    from .. import problems
    from ..backends import get_backend
    from ..simulation import Simulation
    from ..timeloop import LoopOptions, StopRequest, run

    start = time.perf_counter()
    engine = get_backend(backend)
    if name == "gray_scott":
        from .loop import gray_scott

        problem = gray_scott(tuple(shape), dtype)
        built = time.perf_counter()
        sim = Simulation(problem, engine)  # compiles its passes
        compiled = time.perf_counter()
        sim.step(1)
        sim.synchronize()
        return {"import_s": import_s, "setup_s": built - start, "compile_s": compiled - built,
                "first_step_s": time.perf_counter() - compiled, "first_steps": 1}
    setup = problems.build(name, shape=tuple(shape), dtype=dtype)
    built = time.perf_counter()
    stop = StopRequest()
    result = run(setup, engine, LoopOptions(steps=setup.default_steps, stop=stop, progress=lambda *a: stop.set(0)))
    s = result.summary
    return {"import_s": import_s, "setup_s": built - start, "compile_s": s["compile_s"], "first_step_s": s["wall_s"],
            "first_steps": s["steps"]}


def _child(w: LoopWorkload, backend: str, cache: Path) -> dict:
    env = dict(os.environ, STENCILFORGE_CACHE_DIR=str(cache / "stencilforge"), NUMBA_CACHE_DIR=str(cache / "numba"),
               CUPY_CACHE_DIR=str(cache / "cupy"))
    package_root = str(Path(__file__).resolve().parents[2])  # the stencilforge this process runs
    env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
    args = json.dumps([w.name, list(w.shape), w.dtype, backend])
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, args], env=env, capture_output=True, text=True, timeout=1800)
    process_s = time.perf_counter() - start
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("COLDSTART ")), None)
    if proc.returncode != 0 or line is None:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": "failed", "note": last}
    out = json.loads(line[len("COLDSTART "):])
    out["to_first_step_s"] = out["import_s"] + out["setup_s"] + out["compile_s"] + out["first_step_s"]
    out["process_s"] = process_s  # interpreter start and exit included
    return {"status": "ok", **out}


def cold_start(w: LoopWorkload, backend: str) -> dict:
    """One row: a cold process on empty caches, then a warm one on the caches it left."""
    with tempfile.TemporaryDirectory(prefix="sf-coldstart-") as tmp:
        cold = _child(w, backend, Path(tmp))
        warm = _child(w, backend, Path(tmp))
    return {"problem": w.name, "label": w.label, "shape": list(w.shape), "dtype": w.dtype, "backend": backend,
            "cold": cold, "warm": warm, "load_average": list(os.getloadavg())}


def cold_start_rows(workloads, backend: str, say=lambda m: None) -> list[dict]:
    rows = []
    for w in workloads:
        say(f"cold start: {w.label}")
        rows.append(cold_start(w, backend))
    return rows
