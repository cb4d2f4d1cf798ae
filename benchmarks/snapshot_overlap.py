"""How much do streamed snapshots slow a GPU run? heat2d 8192^2 float32, a snapshot every 10 steps.

Runs the same problem without outputs, with snapshots to a discarding sink
(device->pinned copies on the second stream only), and with snapshots to an
HDF5 file (the full path: copy, writer thread, disk), each `--repeats` times,
and prints one JSON line with medians. Times are end to end: the loop plus the
drain of snapshots still in flight when it ends. Also measured: one step, and
the device->pinned copy bandwidth, which bound what any overlap can achieve:
a snapshot cannot leave the GPU faster than PCIe carries it.

    python benchmarks/snapshot_overlap.py                       # the issue's case
    python benchmarks/snapshot_overlap.py --every 10 100 --steps 400 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from stencilforge import problems
from stencilforge.backends import get_backend
from stencilforge.io.hdf5 import H5Sink
from stencilforge.io.meta import RunInfo
from stencilforge.io.snapshots import Ledger, StreamingObserver
from stencilforge.simulation import PassStepper, Simulation
from stencilforge.timeloop import LoopOptions, run_stepper


class Clock:
    """An observer that never fires and notes when the loop closes it (first and last in the tuple)."""

    every = 1 << 62

    def __call__(self, step, t, fields, backend):
        pass

    def close(self):
        self.closed_at = time.perf_counter()


class NullSink:
    """Receives snapshots and throws them away: isolates the GPU side of the pipeline from the disk."""

    def __init__(self):
        self.path, self.count = Path("/dev/null"), 0

    def append(self, step, t, arrays):
        self.count += 1

    def close(self):
        pass


def timed_run(problem, backend, steps, make_observer=None):
    """End-to-end seconds: loop wall time plus the drain of the writer after the loop."""
    first, last = Clock(), Clock()
    observers = (first, make_observer(), last) if make_observer else (first, last)
    opts = LoopOptions(steps=steps, observers=observers, check_every=steps)
    result = run_stepper(lambda: PassStepper(Simulation(problem, backend, background=True)), backend, opts)
    return result.summary["wall_s"] + (last.closed_at - first.closed_at), result.summary


def copy_bandwidth(cp, nbytes: int, repeats: int = 5) -> float:
    """Device -> pinned host GB/s on a non-blocking stream, as the snapshot copies run."""
    import cupyx

    src = cp.empty(nbytes, dtype=cp.uint8)
    dst = cupyx.empty_pinned(nbytes, dtype="uint8")
    stream = cp.cuda.Stream(non_blocking=True)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(repeats + 1):
        start.record(stream)
        cp.cuda.runtime.memcpyAsync(dst.ctypes.data, src.data.ptr, nbytes, cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        stop.record(stream)
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return nbytes / statistics.median(times[1:]) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs="+", default=[8192, 8192])
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--every", type=int, nargs="+", default=[10])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--buffers", type=int, default=3)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--scratch", default=None, help="directory for the HDF5 files (deleted after each run)")
    args = ap.parse_args()

    backend = get_backend(args.backend)
    setup = problems.linear_step("heat2d", shape=tuple(args.shape), dtype=args.dtype)
    grid, dt = setup.lattice, setup.problem.dt.value
    names = ("u",)
    layout = {name: (grid.shape, grid.dtype) for name in names}
    regions = {name: grid.interior for name in names}
    info = RunInfo.of(SimpleNamespace(name="heat2d", grid=grid, params=setup.params), backend.name, "benchmarks/snapshot_overlap.py")
    snapshot_bytes = grid.cells * grid.dtype.itemsize * len(names)
    scratch = Path(tempfile.mkdtemp(prefix="sf-overlap-", dir=args.scratch))

    timed_run(setup.problem, backend, 20)  # compile and warm up
    report = {
        "benchmark": "snapshot_overlap", "problem": "heat2d", "shape": list(grid.shape), "dtype": grid.dtype.name,
        "backend": backend.name, "steps": args.steps, "repeats": args.repeats, "buffers": args.buffers,
        "snapshot_mb": snapshot_bytes / 1e6, "results": [],
    }
    if backend.name == "cuda":
        import cupy as cp

        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        report["device"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        report["d2h_gbps"] = copy_bandwidth(cp, snapshot_bytes)
    try:
        base_times = [timed_run(setup.problem, backend, args.steps)[0] for _ in range(args.repeats)]
        base = statistics.median(base_times)
        step_s = base / args.steps
        report.update(baseline_s=base, step_ms=step_s * 1e3)
        for every in args.every:
            def null_observer(every=every):
                return StreamingObserver(NullSink(), layout, regions, every, Ledger(), "snapshot", args.buffers)

            def h5_observer(every=every):
                sink = H5Sink(scratch / "overlap.h5", info, layout, every, 0.0, dt)
                return StreamingObserver(sink, layout, regions, every, Ledger(), "snapshot", args.buffers)

            null_times, h5_times, loop_times = [], [], []
            for _ in range(args.repeats):
                null_times.append(timed_run(setup.problem, backend, args.steps, null_observer)[0])
                total, summary = timed_run(setup.problem, backend, args.steps, h5_observer)
                h5_times.append(total)
                loop_times.append(summary["wall_s"])
                shutil.rmtree(scratch)
                scratch.mkdir()
            entry = {
                "every": every,
                "snapshots": args.steps // every,
                "copy_only_s": statistics.median(null_times),
                "hdf5_s": statistics.median(h5_times),
                "hdf5_loop_only_s": statistics.median(loop_times),
            }
            entry["copy_only_slowdown"] = entry["copy_only_s"] / base - 1
            entry["hdf5_slowdown"] = entry["hdf5_s"] / base - 1
            if "d2h_gbps" in report:
                # however well it overlaps, every `every` steps one snapshot must cross PCIe
                transfer = snapshot_bytes / (report["d2h_gbps"] * 1e9)
                entry["pcie_bound_slowdown"] = max(0.0, transfer / (every * step_s) - 1)
            entry["within_10pct"] = entry["hdf5_slowdown"] <= 0.10
            report["results"].append(entry)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
