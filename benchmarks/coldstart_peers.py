"""Cold and warm start to the first step, ours (numba) beside Devito and pystencils, each in fresh processes.

Cold: every cache empty (ours: STENCILFORGE_CACHE_DIR, NUMBA_CACHE_DIR; Devito's JIT cache under TMPDIR;
pystencils' under XDG_CACHE_HOME), warm: a second process on the caches the first left. Ours: the bench's
`cold_start` (import, problem, compile, first pass of the problem's run). A peer: from before its import
to the end of its first step on the bench's case (the case's random fields are built before the clock).
Median of `--repeats`. Which stencilforge runs is the one on PYTHONPATH (the children take its tree).

    python3 benchmarks/coldstart_peers.py [--workloads heat2d,heat3d,wave3d] --out FILE
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from stencilforge.bench.coldstart import cold_start
from stencilforge.bench.loop import LoopWorkload

CHILD = """
import json, sys, time
from stencilforge.bench.peers import PEERS
from stencilforge.bench.workloads import Workload, build_case
name, shape, peer = json.loads(sys.argv[1])
case = build_case(Workload(name, tuple(shape), "float32"))
start = time.perf_counter()
runner = PEERS[peer].runner(case)
runner.run(1)
runner.sync()
print("PEER " + json.dumps(time.perf_counter() - start))
"""
WORKLOADS = {"heat2d": (4096, 4096), "heat3d": (256, 256, 256), "wave3d": (192, 192, 192)}


def peer_start(name: str, shape, peer: str, cache: Path) -> float:
    env = dict(os.environ, TMPDIR=str(cache), XDG_CACHE_HOME=str(cache))
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps([name, list(shape), peer])], env=env,
                          capture_output=True, text=True, timeout=900)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PEER "))
    return json.loads(line[5:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--workloads", default="heat2d,heat3d,wave3d")
    ap.add_argument("--peers", default="devito,pystencils", help="comma-separated, or none")
    args = ap.parse_args()
    rows = []
    for name in args.workloads.split(","):
        shape = WORKLOADS[name]
        ours = cold_start(LoopWorkload(name, shape, "float32"), "numba", repeats=args.repeats)
        rows.append({"workload": name, "shape": shape, "impl": "stencilforge numba", "cold_s": ours["samples"]["cold"],
                     "warm_s": ours["samples"]["warm"]})
        for peer in [p for p in args.peers.split(",") if p != "none"]:
            cold, warm = [], []
            for _ in range(args.repeats):
                with tempfile.TemporaryDirectory(prefix="sf-peer-start-") as tmp:
                    cold.append(peer_start(name, shape, peer, Path(tmp)))
                    warm.append(peer_start(name, shape, peer, Path(tmp)))
            rows.append({"workload": name, "shape": shape, "impl": peer, "cold_s": cold, "warm_s": warm})
    for r in rows:
        r["cold_median_s"], r["warm_median_s"] = (sorted(r[k])[(len(r[k]) - 1) // 2] for k in ("cold_s", "warm_s"))
        print(f"{r['workload']:7s} {r['impl']:19s} cold {r['cold_median_s']:.2f} s  warm {r['warm_median_s']:.2f} s")
    if args.out:
        Path(args.out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "load_average": os.getloadavg(),
                                              "cpu_count": os.cpu_count(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
