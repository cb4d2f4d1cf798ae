"""Check and time kernel variants in one process, or launch each once for `ncu`.

A variant is problem:strategy[:tile], e.g. heat3d:streaming:64x8x64. Each
variant is first checked against the float64 numpy oracle on a small shape
that is no multiple of any tile (for the vector strategies its x extent is a multiple
of 4, or the scalar fallback would be checked), then timed on the large grid: random inputs,
3 warm-up launches, median of 7 repeats x 10 launches between CUDA events. Fields take the layout the time loop and the
bench give a sweep (`CudaBackend.field`: rows on 128-byte lines). The device's memcpy bandwidth is measured in the same run. `peer` as the
strategy is the bench's naive CUDA peer.

    PYTHONPATH=src python3 benchmarks/cuda_profile.py time VARIANT ... [--json F]
    ncu --kernel-name regex:'sf_|peer_' ... python3 benchmarks/cuda_profile.py ncu VARIANT ...

`--dtype float64` runs every variant in double precision (default float32).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys

import cupy as cp
import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from cuda_bench import copy_bandwidth, timed  # noqa: E402

from stencilforge import problems  # noqa: E402
from stencilforge.backends.cuda import CudaBackend  # noqa: E402
from stencilforge.backends.numpy_ref import evaluate_sweep  # noqa: E402
from stencilforge.bench.peers import naive_sweep_source  # noqa: E402
from stencilforge.grid import Grid  # noqa: E402

LARGE = {"heat3d": (512, 512, 512), "wave3d": (512, 512, 512), "heat2d": (16384, 16384), "poisson2d": (16384, 16384)}
SMALL = {"heat3d": (37, 45, 131), "wave3d": (21, 35, 133), "heat2d": (203, 1537), "poisson2d": (203, 1537)}
PARAMS = {"wave3d": {"radius": 8}}
DTYPE = {"name": "float32"}  # set once from --dtype


def parse(spec: str):
    parts = spec.split(":")
    tile = tuple(int(t) for t in parts[2].split("x")) if len(parts) > 2 and parts[2] else None
    return parts[0], parts[1], tile


def runner(name, strategy, tile, shape):
    """(setup, grid, step(fields)) for one variant on `shape`."""
    setup = problems.linear_step(name, shape=shape, dtype=DTYPE["name"], **PARAMS.get(name, {}))
    sweep, grid = setup.sweep, setup.lattice
    if strategy == "peer":
        kernel = cp.RawKernel(naive_sweep_source(sweep, grid), "peer_naive")
        blocks = (grid.cells + 255) // 256
        return setup, lambda f: kernel((blocks,), (256,), (f[sweep.out], *(f[n] for n in sweep.inputs)))
    return setup, CudaBackend(strategy=strategy, tile=tile).sweep(sweep, grid)


def check(name, strategy, tile) -> float:
    """Largest |gpu - oracle| / max|oracle| on the small shape; NaN-poisoned output."""
    small = SMALL[name] if strategy not in ("streaming_vec", "rows_vec") else SMALL[name][:-1] + (SMALL[name][-1] // 4 * 4,)
    setup, step = runner(name, strategy, tile, small)
    sweep, grid = setup.sweep, setup.lattice
    rng = np.random.default_rng(1)
    host = {n: rng.uniform(-1, 1, grid.padded_shape) for n in set(sweep.inputs) | {sweep.out}}
    dt = np.dtype(DTYPE["name"])
    put = place(strategy)
    dev = {n: put(cp.asarray(a.astype(dt)), grid.ghost) for n, a in host.items()}
    if sweep.out not in sweep.inputs:
        dev[sweep.out][...] = np.nan
    step(dev)
    got = cp.asnumpy(dev[sweep.out])[grid.interior].astype(np.float64)
    g64 = Grid(grid.shape, grid.spacing, np.dtype(np.float64), grid.ghost, grid.lower)
    ref = evaluate_sweep(sweep, g64, {n: a.astype(dt).astype(np.float64) for n, a in host.items()})
    err = np.abs(got - ref).max() / np.abs(ref).max()
    return float(err) if np.isfinite(err) else float("inf")


FIELDS: dict = {}


def place(strategy):
    """The peer indexes dense arrays; our sweeps take the backend's layout."""
    return (lambda a, ghost: a) if strategy == "peer" else CudaBackend().field


def large_fields(name, setup, strategy):
    key = (name, setup.lattice.padded_shape, strategy == "peer")
    if key not in FIELDS:
        FIELDS.clear()
        cp.get_default_memory_pool().free_all_blocks()
        sweep = setup.sweep
        put = place(strategy)
        f = {n: put(cp.random.uniform(-1, 1, setup.lattice.padded_shape, dtype=DTYPE["name"]), setup.lattice.ghost)
             for n in set(sweep.inputs) | {sweep.out}}
        if "vel" in f:
            f["vel"] *= 1e-4
        FIELDS[key] = f
    return FIELDS[key]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("time", "ncu"))
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--json")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    args = ap.parse_args()
    DTYPE["name"] = args.dtype
    if args.mode == "ncu":
        for spec in args.variants:
            name, strategy, tile = parse(spec)
            setup, step = runner(name, strategy, tile, LARGE[name])
            step(large_fields(name, setup, strategy))
            cp.cuda.Device().synchronize()
            print("launched", spec, flush=True)
        return
    ceiling = copy_bandwidth()["memcpy_gbps"]
    rows = []
    for spec in args.variants:
        name, strategy, tile = parse(spec)
        try:
            err = check(name, strategy, tile)
            setup, step = runner(name, strategy, tile, LARGE[name])
            fields = large_fields(name, setup, strategy)
            sec = timed(functools.partial(step, fields))
        except Exception as exc:  # a variant the generator refuses is reported, the others still run
            print(f"{spec:34s} failed: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
            continue
        bpc = setup.sweep.bytes_per_cell(np.dtype(args.dtype).itemsize)
        gbps = setup.lattice.cells * bpc / sec / 1e9
        rows.append({"variant": spec, "ms": sec * 1e3, "teff_gbps": gbps, "pct_copy": 100 * gbps / ceiling, "max_rel_err": err})
        print(f"{spec:34s} {sec * 1e3:8.3f} ms {gbps:7.0f} GB/s {100 * gbps / ceiling:5.1f}%  err {err:.1e}", flush=True)
    print(f"\nmemcpy {ceiling:.0f} GB/s; sorted:")
    for r in sorted(rows, key=lambda r: (r["variant"].split(":")[0], -r["pct_copy"])):
        flag = "" if r["max_rel_err"] < (1e-5 if args.dtype == "float32" else 1e-12) else "  WRONG"
        print(f"{r['variant']:34s} {r['ms']:8.3f} ms {r['pct_copy']:5.1f}%{flag}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"memcpy_gbps": ceiling, "dtype": args.dtype, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
