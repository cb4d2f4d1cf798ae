"""Kernel timings of the cuda backend against the device's copy bandwidth, measured in the same run.

Each case: random device inputs (several times the L2 size), 3 warm-up
launches, then 7 repeats of 10 launches between CUDA events; the median
repeat gives seconds per sweep. T_eff = interior cells x Sweep/AxisOperator
bytes_per_cell / seconds. The plan comes from problems.linear_step at a small shape
(the stencil structure is what matters; coefficient values are literals and
do not change the instruction count), the grid is the large one.

Usage: PYTHONPATH=src python3 benchmarks/cuda_bench.py --out results.json [--only wave3d]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics

import cupy as cp
import numpy as np

from stencilforge import problems
from stencilforge.backends.cuda import CudaBackend
from stencilforge.backends.cuda.compile import nvrtc_version
from stencilforge.grid import Grid
from stencilforge.problems import derivatives as deriv

WARMUP, REPEATS, INNER = 3, 7, 10


def timed(fn) -> float:
    """Median seconds per call over REPEATS x INNER calls, after WARMUP calls."""
    for _ in range(WARMUP):
        fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(REPEATS):
        start.record()
        for _ in range(INNER):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / INNER)
    return statistics.median(times)


def _interleave(rows: dict, nbytes: int, ceiling_gbps: float, passes: int, step, seconds) -> dict:
    """% of `ceiling_gbps` per named row of (what to run, its outputs), `passes` times with the rows
    interleaved: each row's outputs are NaN-poisoned, `step(what)` runs it once, its outputs are compared
    bit for bit with the first row's ("DIFFERENT" marks a mismatch), then `seconds(what)` times it."""
    ref, table = None, {}
    for _ in range(passes):
        for name, (what, outputs) in rows.items():
            for o in outputs:
                o[...] = np.nan
            step(what)
            got = [cp.asnumpy(o) for o in outputs]
            ref = ref or got
            table.setdefault(name, []).append(100 * nbytes / seconds(what) / 1e9 / ceiling_gbps)
            if not all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, ref)):
                table[name].append("DIFFERENT")
    return table


def interleaved(runs: dict, outputs: list, nbytes: int, ceiling_gbps: float, passes: int = 3) -> dict:
    """Named launches writing the same `outputs`, each timed by `timed`."""
    return _interleave({k: (run, outputs) for k, run in runs.items()}, nbytes, ceiling_gbps, passes, lambda run: run(), timed)


def interleaved_runners(rows: dict, nbytes: int, ceiling_gbps: float, passes: int = 3) -> dict:
    """Named (bench Runner, its outputs), each timed by the bench's own loop (`time_runner`)."""
    from stencilforge.bench.measure import MeasureOptions, time_runner

    opts = MeasureOptions()

    def step(runner) -> None:
        runner.run(1)
        runner.sync()

    return _interleave(rows, nbytes, ceiling_gbps, passes, step, lambda runner: time_runner(runner, opts).median)


def print_interleaved(title: str, table: dict) -> None:
    print(f"\n{title} (% of copy, passes in order)")
    for name, pcts in sorted(table.items(), key=lambda kv: -sum(p for p in kv[1] if isinstance(p, float))):
        print(f"{name:36s} " + " / ".join(f"{p:5.1f}" if isinstance(p, float) else p for p in pcts), flush=True)


def copy_bandwidth(nbytes: int = 2 << 30) -> dict:
    """Device-to-device memcpy and an elementwise copy; bytes read + written per second."""
    out = _copy_rates(nbytes)  # its arrays are freed on return
    cp.get_default_memory_pool().free_all_blocks()
    return out


def _copy_rates(nbytes: int) -> dict:
    src = cp.random.random(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    stream = cp.cuda.get_current_stream()

    def memcpy():
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr)

    def elementwise():
        cp.copyto(dst, src)

    return {"memcpy_gbps": 2 * nbytes / timed(memcpy) / 1e9, "elementwise_gbps": 2 * nbytes / timed(elementwise) / 1e9}


def sweep_case(name, small, shape, dtype, strategy, tile=None, **params) -> dict:
    step = problems.linear_step(name, shape=small, dtype=dtype, **params)
    sweep = step.sweep
    grid = Grid.unit_box(shape, dtype, ghost=step.lattice.ghost)
    be = CudaBackend(strategy=strategy, tile=tile)
    run = be.sweep(sweep, grid)
    fields = {}
    for n in set(sweep.inputs) | {sweep.out}:
        fields[n] = cp.random.uniform(-1, 1, grid.padded_shape, dtype=cp.float64).astype(grid.dtype)
    if "vel" in fields:
        fields["vel"] *= 1e-4  # keeps repeated in-place wave updates finite
    seconds = timed(lambda: run(fields))
    ok = bool(cp.isfinite(fields[sweep.out]).all())
    fields.clear()
    cp.get_default_memory_pool().free_all_blocks()
    bpc = sweep.bytes_per_cell(grid.dtype.itemsize)
    return record(name, shape, dtype, run, seconds, grid.cells, bpc, ok, params)


def operator_case(axis, orders, shape, dtype, strategy, tile=None) -> dict:
    op = deriv.operator(axis, 1.0 / (shape[axis] - 1), 2, orders)
    be = CudaBackend(strategy=strategy, tile=tile)
    run = be.axis_operator(op, np.dtype(dtype))
    arrays = [cp.random.uniform(-1, 1, shape, dtype=cp.float64).astype(dtype)]
    arrays += [cp.empty_like(arrays[0]) for _ in orders]
    seconds = timed(lambda: run(*arrays))
    ok = all(bool(cp.isfinite(o).all()) for o in arrays[1:])
    arrays.clear()
    cp.get_default_memory_pool().free_all_blocks()
    cells = shape[0] * shape[1]
    name = f"derivatives axis={axis} d{''.join(map(str, orders))}"
    return record(name, shape, dtype, run, seconds, cells, op.bytes_per_cell(np.dtype(dtype).itemsize), ok, {})


def record(name, shape, dtype, run, seconds, cells, bpc, ok, params) -> dict:
    return {
        "case": name,
        "shape": list(shape),
        "dtype": str(dtype),
        "strategy": run.strategy,
        "tile_used": str(tuple(run.tile)),
        "params": params,
        "seconds": seconds,
        "bytes_per_cell": bpc,
        "gcells_per_s": cells / seconds / 1e9,
        "teff_gbps": cells * bpc / seconds / 1e9,
        "finite": ok,
    }


def cases(only: str | None):
    f32 = "float32"
    out = []
    for strategy in ("naive", "tiled", "streaming", "streaming_l1", "pipelined"):
        out.append(("poisson2d", lambda s=strategy: sweep_case("poisson2d", (64, 64), (16384, 16384), f32, s)))
        out.append(("heat2d", lambda s=strategy: sweep_case("heat2d", (64, 64), (16384, 16384), f32, s)))
        out.append(("heat3d", lambda s=strategy: sweep_case("heat3d", (32, 32, 32), (512, 512, 512), f32, s)))
        out.append(("wave3d", lambda s=strategy: sweep_case("wave3d", (32, 32, 32), (512, 512, 512), f32, s, radius=8)))
    for tile in ((64, 16, 32), (128, 8, 32), (64, 4, 128), (32, 8, 64)):
        out.append(("wave3d", lambda t=tile: sweep_case("wave3d", (32, 32, 32), (512, 512, 512), f32, "streaming_l1", t, radius=8)))
    for tile in ((128, 4, 128), (64, 16, 32), (32, 8, 64)):
        out.append(("heat3d", lambda t=tile: sweep_case("heat3d", (32, 32, 32), (512, 512, 512), f32, "streaming_l1", t)))
    for tile in ((256, 128), (128, 512), (32, 256)):
        out.append(("heat2d", lambda t=tile: sweep_case("heat2d", (64, 64), (16384, 16384), f32, "streaming_l1", t)))
        out.append(("poisson2d", lambda t=tile: sweep_case("poisson2d", (64, 64), (16384, 16384), f32, "streaming_l1", t)))
    for strategy in ("streaming", "streaming_l1", "pipelined", "naive"):
        out.append(("wave3d", lambda s=strategy: sweep_case("wave3d", (32, 32, 32), (1024, 1024, 1024), f32, s, radius=8)))
    for axis in (0, 1):
        for orders in ((1,), (1, 2)):
            for strategy in ("naive", "pencil"):
                out.append(
                    ("derivatives", lambda a=axis, o=orders, s=strategy: operator_case(a, o, (10000, 10000), "float64", s))
                )
    return [fn for name, fn in out if only is None or name == only]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only")
    args = ap.parse_args()
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    copy = copy_bandwidth()
    ceiling = max(copy.values())
    results = []
    for fn in cases(args.only):
        r = fn()
        r["fraction_of_copy"] = r["teff_gbps"] / ceiling
        results.append(r)
        print(f"{r['case']:28s} {str(tuple(r['shape'])):20s} {r['dtype']:8s} {r['strategy']:9s} {r['tile_used']:16s} "
              f"{r['seconds'] * 1e3:9.3f} ms {r['teff_gbps']:8.1f} GB/s {100 * r['fraction_of_copy']:5.1f}%", flush=True)
    doc = {
        "device": props["name"].decode(),
        "sm_count": props["multiProcessorCount"],
        "l2_bytes": props["l2CacheSize"],
        "commit": os.environ.get("SF_COMMIT", "unknown"),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cupy": cp.__version__,
        "nvrtc": nvrtc_version(),
        "method": f"CUDA events, {WARMUP} warm-up, median of {REPEATS} repeats x {INNER} launches, random inputs",
        "copy_bandwidth": copy,
        "ceiling_gbps": ceiling,
        "results": results,
    }
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"\ndevice {doc['device']}  copy bandwidth: memcpy {copy['memcpy_gbps']:.0f} GB/s, "
          f"elementwise {copy['elementwise_gbps']:.0f} GB/s")


if __name__ == "__main__":
    main()
