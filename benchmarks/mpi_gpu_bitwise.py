"""Bitwise rank-count independence of the cuda backend: every problem of tests/mpi_driver.py on 1, 2 and 4 GPUs.

usage: python benchmarks/mpi_gpu_bitwise.py OUT.json MAX_RANKS
Each configuration is one `mpiexec -n N tests/mpi_driver.py cuda:STRATEGY GRID ...`;
its gathered fields are compared with the one-GPU run of the same strategy, and the
`auto` ones also with one process through the plain time loop, which fuses steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "mpi_driver.py"
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
LAUNCH_TIMEOUT_S = 120


def launch(n: int, out: Path, *args: str) -> tuple[int, str, float]:
    """(exit code, end of stderr, seconds) of one driver run; a run past LAUNCH_TIMEOUT_S counts as failed."""
    cmd = [MPIEXEC, "-n", str(n), sys.executable, str(DRIVER), args[0], args[1], str(out), *args[2:]]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {LAUNCH_TIMEOUT_S} s", time.perf_counter() - t
    return proc.returncode, proc.stderr[-2000:], time.perf_counter() - t


def load(path: Path):
    with np.load(path) as data:
        return json.loads(str(data["__meta__"])), {k: data[k] for k in data.files if k != "__meta__"}


def main(out_json: str, max_ranks: int) -> None:
    configs = []
    for strategy in ("naive", "auto"):
        for n, grid, halo in ((2, "auto", "auto"), (2, "slabs", "auto"), (4, "auto", "auto"), (4, "alt", "auto"),
                              (4, "slabs", "auto"), (4, "auto", "staged")):
            if n <= max_ranks and (strategy == "naive" or grid != "alt"):
                configs.append((strategy, n, grid, halo))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        refs = {}
        for strategy in ("naive", "auto"):
            path = Path(tmp) / f"ref-{strategy}.npz"
            backend = "cuda" if strategy == "auto" else f"cuda:{strategy}"
            rc, err, _ = launch(1, path, backend, "auto", "auto")
            if rc != 0:
                raise SystemExit(f"one-GPU reference ({strategy}) failed: {err}")
            refs[strategy] = load(path)
        path = Path(tmp) / "ref-plain.npz"  # one process, no decomposition: the loop fuses steps where it can
        rc, err, _ = launch(1, path, "cuda", "single", "auto")
        if rc != 0:
            raise SystemExit(f"one-GPU plain reference failed: {err}")
        plain_meta, plain = load(path)
        for strategy, n, grid, halo in configs:
            path = Path(tmp) / f"{strategy}-{n}-{grid}-{halo}.npz"
            backend = "cuda" if strategy == "auto" else f"cuda:{strategy}"
            rc, err, seconds = launch(n, path, backend, grid, halo)
            row = {"strategy": strategy, "ranks": n, "grid": grid, "halo": halo, "rc": rc, "seconds": seconds}
            if rc != 0:
                row["error"] = err
                rows.append(row)
                print(json.dumps(row), flush=True)
                continue
            ref_meta, ref = refs[strategy]
            meta, got = load(path)
            cases = {}
            for label, m in meta.items():
                keys = [k for k in got if k.startswith(label + "/")]
                equal = all(np.array_equal(got[k], ref[k], equal_nan=True) for k in keys)
                cases[label] = {
                    "procs": m["procs"], "halo": m["halo"], "sweeps": m["sweeps"],
                    "ref_sweeps": ref_meta[label]["sweeps"], "bitwise_equal": bool(equal),
                }
                if strategy == "auto":
                    cases[label]["plain_fused_steps"] = plain_meta[label].get("fused_steps")
                    cases[label]["equal_to_plain"] = all(np.array_equal(got[k], plain[k], equal_nan=True) for k in keys)
            row["cases"] = cases
            row["ranks_used"] = all(int(np.prod(c["procs"])) == n for c in cases.values())
            row["all_equal"] = row["ranks_used"] and all(c["bitwise_equal"] and c.get("equal_to_plain", True) for c in cases.values())
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(out_json, "w") as f:
        json.dump({"configs": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
