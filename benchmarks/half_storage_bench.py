"""Fields stored in float16 against float32, through the same generated passes, on one GPU.

Per workload: ms per step with float32 and with float16 storage (the same kernels'
schedule, the step as the time loop takes it: walls, pass, rotation), their ratio, the
seed's hand-scheduled float32 kernel alone for reference, and the errors of a smaller
run against the exact solution and against the float32 run. CUDA events, median of
repeats; copy bandwidth measured in the same run. wave3d is the seed problem's own
(float16: its increment form, stencilforge.problems.wave3d); wave3d-leapfrog writes the
wave as 2u - u.prev in both storages, with its squared speed stored (O(1), where (c dt)^2
would be a float16 subnormal) and dt^2 a constant.
Usage: python3 benchmarks/half_storage_bench.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math

import cupy as cp
import numpy as np
from equations_bench import copy_gbps, timed

import stencilforge as sf
from stencilforge import problems
from stencilforge.backends.cuda import CudaBackend
from stencilforge.grid import Grid
from stencilforge.problems import heat, wave3d
from stencilforge.problems.base import stable_dt
from stencilforge.problems.wave3d import dt_limit, standing_wave_frequency
from stencilforge.simulation import initial_array
from stencilforge.stencil import Stencil


def wave(n: int, storage=None, radius: int = 8) -> sf.Problem:
    """The seed's standing wave (c = 1, Dirichlet walls from the exact solution), as u.next = 2u - u.prev +
    dt^2 (c2 L u) with c2 a one-level field."""
    lattice = Grid.unit_box((n, n, n), "float32", ghost=radius)
    grid = sf.Grid((n, n, n), spacing=lattice.spacing, origin=lattice.lower, dtype="float32")
    lap = Stencil.laplacian(3, radius, lattice.spacing)
    dt = stable_dt(None, dt_limit(lap, 1.0), 0.5, "wave")
    u, c2 = sf.Field("u", grid, levels=3, storage=storage), sf.Field("c2", grid, levels=1, storage=storage)
    k = sf.Constant("dt2", dt * dt)
    omega = standing_wave_frequency(1.0)
    s0, s1, s2 = (sf.sin(np.pi * x) for x in grid.coordinates)
    standing = sf.cos(omega * grid.t) * s0 * s1 * s2
    return sf.Problem([sf.Eq(u.next, 2 * u - u.prev + k * (c2 * sf.laplacian(u, order=2 * radius)))],
                      initial={u: standing, c2: 1.0}, boundary={u: sf.Dirichlet(sf.cos(omega * grid.t) * (s0 * s1 * s2))},
                      exact={u: standing}, dt=dt, steps=200, name="wave3d")


WORKLOADS = {  # name: (builder(shape, storage), timed shape, error shape, error steps, seed problem, seed params)
    "heat2d": (lambda s, st: heat.problem(2, s, storage=st), (16384, 16384), (1024, 1024), 2000, "heat2d", {}),
    "heat3d": (lambda s, st: heat.problem(3, s, storage=st), (512, 512, 512), (128, 128, 128), 500, "heat3d", {}),
    "wave3d": (lambda s, st: wave3d.problem(s, storage=st)[0], (512, 512, 512), (128, 128, 128), 200, "wave3d", {"radius": 8}),
    "wave3d-leapfrog": (lambda s, st: wave(s[0], st), (512, 512, 512), (128, 128, 128), 200, "wave3d", {"radius": 8}),
}


def seed_kernel_ms(name: str, shape, params) -> tuple[float, str]:
    """The seed's lowered sweep alone (auto's hand-scheduled kernel) on the time loop's layout."""
    setup = problems.linear_step(name, shape=shape, dtype="float32", **params)
    backend, lattice = CudaBackend(), setup.lattice
    launch = backend.sweep(setup.sweep, lattice)
    fields = {n: backend.field(cp.asarray(initial_array(setup.problem, lattice, n.split("_")[0], 0, setup.values, 1.0)), lattice.ghost)
              for n in (*setup.sweep.inputs, setup.sweep.out)}
    return timed(lambda: launch(fields)) * 1e3, launch.strategy


def step_ms(p: sf.Problem, pair: bool) -> float | str:
    sim = sf.Simulation(p, CudaBackend())
    if pair:
        why = sim.build_fused()
        if why:
            return why
        return timed(sim.step_fused) / 2 * 1e3
    return timed(sim.step) * 1e3


def errors(build, shape, steps) -> dict:
    out = {}
    fields = {}
    for storage in ("float32", "float16"):
        r = sf.run(build(shape, storage), steps=steps, backend="cuda")
        out[f"{storage}_vs_exact"] = r.summary["errors"]["u"]
        fields[storage] = r.fields["u"]
    out["float16_vs_float32"] = float(cp.abs(fields["float16"].astype(cp.float64) - fields["float32"]).max())
    out["steps"], out["shape"] = steps, list(shape)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--only", nargs="*", default=list(WORKLOADS))
    args = ap.parse_args()
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    device = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    report = {"device": device, "copy_gbps": copy_gbps(), "workloads": {}}
    for name in args.only:
        build, shape, eshape, esteps, seed, params = WORKLOADS[name]
        row: dict = {"shape": list(shape), "cells": math.prod(shape)}
        for storage in ("float32", "float16"):
            p = build(shape, storage)
            row[storage] = {"bytes_per_cell": p.analysis.bytes_per_cell(), "single_ms": step_ms(p, False)}
            if len(shape) == 2:
                row[storage]["pair_ms"] = step_ms(p, True)
            del p
            cp.get_default_memory_pool().free_all_blocks()
        row["seed_kernel_ms"], row["seed_strategy"] = seed_kernel_ms(seed, shape, params)
        cp.get_default_memory_pool().free_all_blocks()
        row["errors"] = errors(build, eshape, esteps)
        report["workloads"][name] = row
        print(json.dumps({name: row}), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    gbps = report["copy_gbps"]
    print(f"\n{device}: copy {gbps:.0f} GB/s; ms per step (% of copy at each storage's own bytes)")
    for name, row in report["workloads"].items():
        cells = row["cells"]

        def pct(ms, b, cells=cells):
            return f"{ms:.3f} ({b * cells / (ms / 1e3) / 1e9 / gbps * 100:.1f}%)" if isinstance(ms, float) else str(ms)

        a, h = row["float32"], row["float16"]
        line = f"{name:15s} single f32 {pct(a['single_ms'], a['bytes_per_cell'])}  f16 {pct(h['single_ms'], h['bytes_per_cell'])}"
        if isinstance(a["single_ms"], float) and isinstance(h["single_ms"], float):
            line += f"  x{a['single_ms'] / h['single_ms']:.2f}"
        if "pair_ms" in a:
            line += f" | pair f32 {pct(a['pair_ms'], a['bytes_per_cell'])} f16 {pct(h['pair_ms'], h['bytes_per_cell'])}"
            if isinstance(a["pair_ms"], float) and isinstance(h["pair_ms"], float):
                line += f" x{a['pair_ms'] / h['pair_ms']:.2f}"
        line += f" | seed {row['seed_strategy']} {row['seed_kernel_ms']:.3f}"
        e = row["errors"]
        line += f" | err f32 {e['float32_vs_exact']:.2e} f16 {e['float16_vs_exact']:.2e} f16-f32 {e['float16_vs_float32']:.2e}"
        print(line)


if __name__ == "__main__":
    main()
