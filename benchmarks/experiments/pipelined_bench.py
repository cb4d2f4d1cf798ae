"""`pipelined` against `streaming` on one GPU: checked against streaming's output, timed, % of copy bandwidth.

Usage (repo root, PYTHONPATH=src):
  python3 benchmarks/experiments/pipelined_bench.py [--out results.json] [--only heat3d|wave3d|heat2d]
  python3 benchmarks/experiments/pipelined_bench.py --sanitize     (small shapes, depths 1..3, odd tiles; for compute-sanitizer)

Timing: benchmarks/cuda_bench.py's `timed` (CUDA events, 3 warm-up, median of 7 x 10 launches), random
inputs, copy bandwidth measured in the same run. A pipelined variant is a (tile, planes ahead) pair
built with codegen.pipelined_sweep and launched through the backend's launcher.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cuda_bench import copy_bandwidth, timed  # noqa: E402

from stencilforge import problems  # noqa: E402
from stencilforge.backends.cuda import CudaBackend, codegen  # noqa: E402
from stencilforge.grid import Grid  # noqa: E402

F32 = "float32"
# (case, problem, small shape for the plan, big shape, params, pipelined variants (tile, ahead or None))
CASES = [
    ("heat3d", "heat3d", (32, 32, 32), (512, 512, 512), {}, [
        ((64, 4, 128), None), ((64, 4, 128), 2), ((64, 4, 128), 4), ((64, 4, 128), 8),
        ((64, 8, 64), None), ((64, 2, 256), None), ((128, 4, 128), None), ((32, 8, 128), None), ((64, 4, 256), None),
    ]),
    ("wave3d", "wave3d", (32, 32, 32), (512, 512, 512), {"radius": 8}, [
        ((64, 16, 32), None), ((64, 16, 32), 1), ((64, 16, 32), 2), ((64, 16, 32), 4), ((64, 16, 32), 6),
        ((128, 16, 32), None), ((64, 8, 64), None), ((32, 16, 64), None), ((128, 8, 64), None), ((128, 16, 64), None),
    ]),
    ("heat2d", "heat2d", (64, 64), (16384, 16384), {}, [
        ((64, 256), None), ((64, 256), 4), ((64, 256), 12), ((256, 256), None), ((64, 512), None), ((128, 1024), None),
    ]),
]
SANITIZE = [
    ("heat3d", (37, 13, 41), {}, [((16, 4, 32), 1), ((16, 4, 32), 2), ((5, 3, 40), 3), ((64, 4, 128), None)]),
    ("wave3d", (37, 19, 45), {"radius": 8}, [((16, 16, 32), 1), ((16, 8, 16), 3), ((7, 5, 33), None)]),
    ("wave3d", (30, 21, 35), {"radius": 3}, [((9, 8, 32), 1), ((9, 8, 32), 2)]),
    ("heat2d", (37, 300), {}, [((8, 64), 1), ((8, 64), 3), ((64, 256), None)]),
    ("poisson2d", (37, 300), {}, [((8, 64), 2)]),
]


def launcher(be: CudaBackend, kernel: codegen.Kernel, grid: Grid, fields: dict):
    launch = be._launcher(kernel, grid.dtype)
    blocks = kernel.grid(grid.shape)
    args = tuple(fields[n] for n in kernel.args) + tuple(np.int32(n) for n in grid.shape) + (np.int32(grid.ghost),)
    return lambda: launch(blocks, args)


def fresh(sweep, grid, seed: int) -> dict:
    rs = cp.random.RandomState(seed)
    fields = {n: rs.uniform(-1, 1, grid.padded_shape, dtype=cp.float64).astype(grid.dtype) for n in set(sweep.inputs) | {sweep.out}}
    if "vel" in fields:
        fields["vel"] *= 1e-4  # keeps repeated in-place wave updates finite
    if sweep.out not in sweep.inputs:
        fields[sweep.out].fill(np.nan)
    return fields


def reference(sweep, grid, seed: int):
    """Streaming's interior output for the inputs of `seed` (what every variant is compared with)."""
    fields = fresh(sweep, grid, seed)
    CudaBackend(strategy="streaming").sweep(sweep, grid)(fields)
    out = fields[sweep.out][grid.interior].copy()
    del fields
    return out


def agrees(got, want) -> tuple[bool, float]:
    scale = float(cp.abs(want).max()) or 1.0
    diff = float(cp.abs(got - want).max()) if bool(cp.isfinite(got).all()) else float("inf")
    return diff <= 1e-5 * scale, diff / scale


def attributes(be, kernel, dtype) -> tuple[int | None, int | None]:
    """Registers per thread and resident blocks per SM, as the driver sees them (None where CuPy cannot tell)."""
    fn = be._function(kernel, dtype)
    regs = getattr(fn, "num_regs", None)
    try:
        blocks = int(cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.ptr, kernel.block[0] * kernel.block[1], kernel.dynamic_smem))
    except Exception:  # a CuPy without the driver binding: report nothing rather than guess
        blocks = None
    return regs, blocks


def variant(sweep, dtype, tile, ahead):
    """The kernel, its depth, and the bytes of one ring stage (every stencil box and pointwise tile of a plane)."""
    k = codegen.pipelined_sweep(sweep, dtype, tile, f"sf_pipelined_{sweep.out}", ahead)
    depth = int(k.source.split(" planes in flight")[0].rsplit(" ", 1)[-1])
    radii = codegen._field_radii(sweep)
    plane = tile[1:]
    cells = sum(math.prod(t + 2 * r for t, r in zip(plane, radii[f][1:])) for f in radii)
    points = sum(1 for n in sweep.inputs if n not in radii)
    return k, depth, (cells + math.prod(plane) * points) * np.dtype(dtype).itemsize


def bench(only: str | None, out_path: str | None) -> None:
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    copy = copy_bandwidth()
    ceiling = max(copy.values())
    print(f"device {props['name'].decode()}, copy bandwidth: memcpy {copy['memcpy_gbps']:.0f} GB/s, elementwise {copy['elementwise_gbps']:.0f} GB/s", flush=True)
    rows = []
    for case, name, small, shape, params, variants in CASES:
        if only and case != only:
            continue
        setup = problems.build(name, shape=small, dtype=F32, **params)
        sweep = setup.sweep
        grid = Grid.unit_box(shape, F32, ghost=setup.grid.ghost)
        bpc = sweep.bytes_per_cell(4)
        want = reference(sweep, grid, 1)
        configs = [("streaming", codegen.default_tile(sweep, "streaming"), None)] + [("pipelined", t, a) for t, a in variants]
        for strategy, tile, ahead in configs:
            be = CudaBackend(strategy=strategy, tile=tile)
            row = {"case": case, "strategy": strategy, "tile": list(tile), "ahead": ahead}
            try:
                fields = fresh(sweep, grid, 1)
                if strategy == "streaming":
                    kernel = codegen.sweep_kernel(sweep, strategy, F32, tile)
                    row.update(smem_kb=0)
                else:
                    kernel, depth, stage = variant(sweep, F32, tile, ahead)
                    row.update(ahead=depth, smem_kb=kernel.dynamic_smem / 1024, stage_kb=stage / 1024)
                step = launcher(be, kernel, grid, fields)
                regs, blocks = attributes(be, kernel, F32)
                row.update(regs=regs, blocks_per_sm=blocks)
                if strategy == "pipelined" and blocks is not None:
                    row["in_flight_kb"] = blocks * depth * stage / 1024
                step()
                ok, rel = agrees(fields[sweep.out][grid.interior], want)
                row.update(check=ok, rel_diff=rel)
                seconds = timed(step)
                row.update(ms=seconds * 1e3, teff_gbps=grid.cells * bpc / seconds / 1e9)
                row["pct_copy"] = 100 * row["teff_gbps"] / ceiling
                del fields
            except Exception as exc:  # a refused tile (shared memory) or a failed compile is a row, not the end
                row.update(error=f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
            cp.get_default_memory_pool().free_all_blocks()
            rows.append(row)
            print(line(row), flush=True)
        del want
        cp.get_default_memory_pool().free_all_blocks()
    print(f"\n{'case':7s} {'strategy':9s} {'tile':15s} {'ahead':>5s} {'smem KB':>7s} {'regs':>4s} {'blk/SM':>6s} {'flight KB/SM':>12s} {'ms':>8s} {'GB/s':>7s} {'% copy':>6s} check")
    for r in rows:
        print(line(r))
    if out_path:
        with open(out_path, "w") as fh:
            json.dump({"device": props["name"].decode(), "copy": copy, "ceiling_gbps": ceiling, "rows": rows}, fh, indent=1)


def line(r: dict) -> str:
    if "error" in r:
        return f"{r['case']:7s} {r['strategy']:9s} {str(tuple(r['tile'])):15s} {str(r['ahead']):>5s}  {r['error'][:90]}"
    flight = "" if r.get("in_flight_kb") is None else f"{r['in_flight_kb']:.0f}"
    blocks = "" if r.get("blocks_per_sm") is None else str(r["blocks_per_sm"])
    regs = "" if r.get("regs") is None else str(r["regs"])
    ahead = "" if r["ahead"] is None else str(r["ahead"])
    return (f"{r['case']:7s} {r['strategy']:9s} {str(tuple(r['tile'])):15s} {ahead:>5s} {r['smem_kb']:7.1f} {regs:>4s} {blocks:>6s} {flight:>12s} "
            f"{r['ms']:8.3f} {r['teff_gbps']:7.0f} {r['pct_copy']:6.1f} {'ok' if r['check'] else 'WRONG %.1e' % r['rel_diff']}")


def sanitize() -> None:
    """Small cases whose rings wrap many times, at the tightest depths: for memcheck, racecheck, synccheck."""
    bad = 0
    for name, shape, params, variants in SANITIZE:
        setup = problems.build(name, shape=shape, dtype=F32, **params)
        sweep, grid = setup.sweep, setup.grid
        want = reference(sweep, grid, 2)
        for tile, ahead in variants:
            be = CudaBackend(strategy="pipelined", tile=tile)
            kernel, depth, _ = variant(sweep, F32, tile, ahead)
            fields = fresh(sweep, grid, 2)
            launcher(be, kernel, grid, fields)()
            cp.cuda.get_current_stream().synchronize()
            ok, rel = agrees(fields[sweep.out][grid.interior], want)
            bad += not ok
            print(f"pipelined {name} {shape} tile={tile} ahead={depth}: {'ok' if ok else 'WRONG %.1e' % rel}", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--only", choices=[c[0] for c in CASES])
    ap.add_argument("--sanitize", action="store_true")
    a = ap.parse_args()
    if a.sanitize:
        sanitize()
    else:
        bench(a.only, a.out)
