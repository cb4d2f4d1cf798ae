"""Cold and warm start: a fresh process's time to its first step, measured in a subprocess.

Cold: empty kernel caches (STENCILFORGE_CACHE_DIR, NUMBA_CACHE_DIR and CUPY_CACHE_DIR point to a
new temporary directory), as on a new machine. Warm: a second process on the same caches, as on
every later run. The child times `import stencilforge`, building the problem, compiling its kernels
and its first step (a run of the problem's default length, stopped after its first pass: the
kernels compiled are those such a run uses). A problem is a seed problem's name, gray_scott, or a
problem file (NAME.py defining build()) run as `stencilforge run NAME.py` runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ProblemFile:
    """A problem file's cold-start workload: its build() at `shape` (None: the file's default)."""

    name: str  # the file's path
    shape: tuple[int, ...] | None = None
    dtype: str = "float64"  # as `stencilforge run NAME.py` builds it

    @property
    def label(self) -> str:
        return f"{Path(self.name).stem} {'x'.join(map(str, self.shape)) if self.shape else 'default'} {self.dtype}"


def _user_problem(name: str, shape, dtype: str):
    """A problem written with the API: a problem file's build(), or the bench's Gray-Scott."""
    if name == "gray_scott":
        from .loop import gray_scott

        return gray_scott(tuple(shape), dtype)
    from ..convergence import load_problem_file

    return load_problem_file(name).build(shape=tuple(shape) if shape else None, dtype=dtype)


def first_step(name: str, shape: list[int] | None, dtype: str, backend: str, import_s: float) -> dict:
    """In the child: build, compile and take the first step of the problem's own run, timing each: sf.run's path in
    one process (a linear pass as its sweep, any other as its generated pass, compiled as the Simulation is built)."""
    from ..backends import get_backend
    from ..simulation import PassStepper, Simulation
    from ..timeloop import LoopOptions, StopRequest, run_stepper

    start = time.perf_counter()
    engine = get_backend(backend)
    stop = StopRequest()
    if name == "gray_scott" or name.endswith(".py"):
        problem = _user_problem(name, shape, dtype)
    else:
        from .. import problems

        problem = problems.problem(name, tuple(shape) if shape else None, dtype)[0]
    built = time.perf_counter()
    sim = Simulation(problem, engine, background=True)  # fills its arrays; its passes compile as sf.run's do
    compile_s = time.perf_counter() - built
    options = LoopOptions(steps=problem.default_steps, stop=stop, progress=lambda *a: stop.set(0))  # progress(0): stepping starts
    s = run_stepper(lambda: PassStepper(sim), engine, options).summary
    return {"import_s": import_s, "setup_s": built - start, "compile_s": compile_s + s["compile_s"],
            "first_step_s": s["wall_s"], "first_steps": s["steps"], "shape": list(s["shape"])}


def _child(w: LoopWorkload | ProblemFile, backend: str, cache: Path, hide: tuple[str, ...]) -> dict:
    env = dict(os.environ, STENCILFORGE_CACHE_DIR=str(cache / "stencilforge"), NUMBA_CACHE_DIR=str(cache / "numba"),
               CUPY_CACHE_DIR=str(cache / "cupy"))
    package_root = str(Path(__file__).resolve().parents[2])  # the stencilforge this process runs
    env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
    args = json.dumps([w.name, list(w.shape) if w.shape else None, w.dtype, backend])
    start = time.perf_counter()
    hidden = "".join(f"sys.modules[{name!r}] = None\n" for name in hide)  # an import of it raises ImportError
    code = f"import sys\n{hidden}{CHILD}" if hide else CHILD
    proc = subprocess.run([sys.executable, "-c", code, args], env=env, capture_output=True, text=True, timeout=1800)
    process_s = time.perf_counter() - start
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("COLDSTART ")), None)
    if proc.returncode != 0 or line is None:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": "failed", "note": last}
    out = json.loads(line[len("COLDSTART "):])
    out["to_first_step_s"] = out["import_s"] + out["setup_s"] + out["compile_s"] + out["first_step_s"]
    out["process_s"] = process_s  # interpreter start and exit included
    return {"status": "ok", **out}


def _median_run(runs: list[dict]) -> dict:
    """The run with the median time to its first step (the lower of the two middle ones), or the first failure."""
    ok = sorted((r for r in runs if r["status"] == "ok"), key=lambda r: r["to_first_step_s"])
    return ok[(len(ok) - 1) // 2] if len(ok) == len(runs) else next(r for r in runs if r["status"] != "ok")


def cold_start(w: LoopWorkload | ProblemFile, backend: str, hide: tuple[str, ...] = (), repeats: int = 1) -> dict:
    """One row: a cold process on empty caches, then a warm one on the caches it left, `repeats` times
    (the median of each is reported, every time in `samples`); the packages in `hide` cannot be
    imported in them, as on an install without them."""
    pairs = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="sf-coldstart-") as tmp:
            pairs.append((_child(w, backend, Path(tmp), hide), _child(w, backend, Path(tmp), hide)))
    cold, warm = _median_run([c for c, _ in pairs]), _median_run([h for _, h in pairs])
    samples = {kind: [run.get("to_first_step_s") for run in runs] for kind, runs in zip(("cold", "warm"), zip(*pairs))}
    file = w.name if isinstance(w, ProblemFile) else None
    shape = list(w.shape) if w.shape else cold.get("shape") or warm.get("shape")  # a file's default: what its run reported
    return {"problem": Path(file).stem if file else w.name, "file": file, "label": w.label, "shape": shape, "dtype": w.dtype,
            "backend": backend, "hidden": list(hide), "cold": cold, "warm": warm, "samples": samples,
            "load_average": list(os.getloadavg())}


def cold_start_rows(workloads, backend: str, say=lambda m: None, hide: tuple[str, ...] = (), repeats: int = 1) -> list[dict]:
    rows = []
    for w in workloads:
        say(f"cold start: {w.label}")
        rows.append(cold_start(w, backend, hide, repeats))
    return rows
