"""A numba run's thread count on a machine another job keeps busy: the default (which leaves out the cores other
work holds, `resources.thread_count`) against every core and one thread, each alone and beside a busy process
(one Python loop), as the wall time of whole `stencilforge run` processes.

usage: python benchmarks/threads_under_load.py [--repeats 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

RUNS = {
    "heat2d 512^2 x 1000": ["heat2d", "--shape", "512,512", "--steps", "1000"],
    "gray_scott.py 256^2 x 1000": ["examples/gray_scott.py", "--shape", "256,256", "--steps", "1000"],
}


def run(args: list[str], threads: str | None) -> dict:
    cmd = [sys.executable, "-c", "from stencilforge.cli import main; main()", "run", *args, "--backend", "numba", "--json"]
    cmd += ["--threads", threads] if threads else []
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"}
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    summary = json.loads(proc.stdout)
    return {"process_s": time.perf_counter() - start, "wall_s": summary["wall_s"], "threads": summary["threads"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    cores = str(len(os.sched_getaffinity(0)))
    rows = []
    for load in ("idle", "one busy process"):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load != "idle" else None
        try:
            time.sleep(0.5 if busy else 0)
            for label, run_args in RUNS.items():
                for threads in (None, cores, "1"):
                    samples = [run(run_args, threads) for _ in range(args.repeats)]
                    row = {"run": label, "load": load, "threads_option": threads or "default",
                           "threads": samples[0]["threads"], "wall_s": statistics.median(s["wall_s"] for s in samples),
                           "samples": samples}
                    rows.append(row)
                    print(f"{label:28} {load:17} --threads {row['threads_option']:7} -> {row['threads']} threads, "
                          f"loop {row['wall_s']:.3f} s")
        finally:
            if busy:
                busy.kill()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cores": int(cores), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
