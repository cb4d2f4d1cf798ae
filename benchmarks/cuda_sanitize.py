"""A small case of every CUDA strategy, run once each: the workload for compute-sanitizer.

Usage: compute-sanitizer --tool memcheck python3 benchmarks/cuda_sanitize.py [STRATEGY ...]
Shapes are small (sanitizers slow kernels 10-100x) but not multiples of any tile; every
shape runs more planes than a `pipelined` ring holds, so its slots are reused.
Naming strategies (or `pair`, the fused two-step sweep) runs only those. Sweeps run on the
time loop's layout (`CudaBackend.field`: rows a pitch apart, the gaps never written), so
`--tool initcheck` also shows a kernel that reads between rows.
"""

from __future__ import annotations

import sys

import numpy as np

from stencilforge import problems
from stencilforge.backends.base import fused_walls
from stencilforge.backends.cuda import CudaBackend, codegen
from stencilforge.grid import Grid
from stencilforge.problems import derivatives as deriv, poisson2d
from stencilforge.stencil import Stencil


def main(only: list[str]) -> None:
    rng = np.random.default_rng(0)
    cases = [
        ("poisson2d", (37, 45), {}),
        ("heat2d", (37, 45), {}),
        ("heat2d", (37, 44), {}),  # rows of whole vectors: rows_vec itself runs
        ("heat3d", (11, 13, 37), {}),
        ("heat3d", (11, 13, 36), {}),  # rows of whole vectors: the vector kernels run, not their scalar fallback
        ("wave3d", (11, 13, 37), {"radius": 3}),
        ("wave3d", (17, 19, 40), {"radius": 8}),
    ]
    for strategy in codegen.SWEEP_STRATEGIES:
        if only and strategy not in only:
            continue
        be = CudaBackend(strategy=strategy)
        for name, shape, params in cases:
            setup = problems.linear_step(name, shape=shape, dtype="float32", **params)
            if strategy not in codegen.applicable_strategies(setup.sweep, "float32"):
                continue  # streaming_vec where no vector fits (its r=8 case has x extent 40: the vector kernel runs)
            lattice = setup.lattice
            fields = {n: be.field(rng.uniform(-1, 1, lattice.padded_shape).astype(np.float32), lattice.ghost)
                      for n in (*setup.sweep.inputs, setup.sweep.out)}
            step = be.sweep(setup.sweep, lattice)
            step(fields)
            be.synchronize()
            print(f"{step.strategy:9s} {name} {shape} ok", flush=True)
    be = CudaBackend()
    for shape, r, steps in (((37, 45), 1, 2), ((21, 70), 4, 2), ((37, 45), 1, 4), ((21, 70), 2, 5)) if not only or "pair" in only else ():
        grid = Grid(shape, (0.01, 0.02), np.dtype(np.float32), r, (0.0, 0.0))
        sweep = poisson2d.jacobi_sweep(Stencil.laplacian(2, r, grid.spacing), with_rhs=True)
        names = ("u", "f", "u_new") + tuple(fused_walls(s, "u_new") for s in range(2, steps))
        fields = {n: be.field(rng.uniform(-1, 1, grid.padded_shape).astype(np.float32), grid.ghost) for n in names}
        be.sweep_fused(sweep, grid, steps=steps)(fields)
        be.synchronize()
        print(f"fused {steps}   jacobi r={r} {shape} ok", flush=True)
    for tile in ((4, 3, 64), (64, 8, 128)) if not only or "pair" in only else ():
        setup = problems.linear_step("heat3d", shape=(11, 13, 37), dtype="float32")
        lattice = setup.lattice
        fields = {n: be.field(rng.uniform(-1, 1, lattice.padded_shape).astype(np.float32), lattice.ghost)
                  for n in (*setup.sweep.inputs, setup.sweep.out)}
        be.sweep_fused(setup.sweep, lattice, tile)(fields)
        be.synchronize()
        print(f"pair      heat3d {tile} ok", flush=True)
    for strategy in codegen.OPERATOR_STRATEGIES:
        if only and strategy not in only:
            continue
        be = CudaBackend(strategy=strategy)
        for axis in (0, 1):
            for acc in deriv.ACCURACIES:
                op = deriv.operator(axis, 0.01, acc, (1, 2))
                if strategy not in codegen.applicable_strategies(op, np.float64):
                    continue  # rows_vec along y
                for shape in ((70, 131), (70, 132)):  # an even row runs rows_vec's vector kernel, an odd one its fallback
                    u = be.asarray(rng.uniform(-1, 1, shape))
                    outs = [be.xp.empty_like(u) for _ in range(2)]
                    run = be.axis_operator(op, np.float64)
                    run(u, *outs)
                    be.synchronize()
                    print(f"{run.strategy:9s} derivatives axis={axis} accuracy={acc} {shape} ok", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
