"""Run under mpiexec by test_mpi.py: every case decomposed through `sf.run(comm=...)`, fields gathered on rank 0 and saved.

usage: mpi_driver.py BACKEND GRID OUT.npz [HALO]
           BACKEND: numpy, numba, cuda or cuda:STRATEGY
           GRID: auto (least cut area), alt (the next best process grid), slabs (split along axis 0 only)
                 or single (one process, not decomposed: the run fuses steps where it can)
           HALO: auto, host, staged, nccl, mpi
       mpi_driver.py BACKEND fail-rank|fail-write|nan-rank|kept-blocks
"""

from __future__ import annotations

import json
import sys

import numpy as np

from stencilforge import problems
from stencilforge.backends import Launch, get_backend
from stencilforge.decomposed_simulation import DecomposedSimulation
from stencilforge.distributed import Decomposition, bind_device, fail_together, gather, world
from stencilforge.distributed.decomposition import _cut_area, _fits, factorizations
from stencilforge.distributed.outputs import Gathering, GlobalOutput
from stencilforge.errors import BlowUp, OutputError, StencilforgeError
from stencilforge.runner import run_with
from stencilforge.simulation import PassStepper, axis_operator
from stencilforge.timeloop import LoopOptions, run_stepper

# (label, problem, build parameters, loop options): small, uneven blocks, every problem and closure kind.
CASES = (
    ("heat2d", "heat2d", dict(shape=(13, 11)), dict(steps=12)),
    ("heat3d", "heat3d", dict(shape=(7, 6, 5), dtype="float64"), dict(steps=8)),
    ("poisson2d", "poisson2d", dict(shape=(12, 10)), dict(tol=2e-3, check_every=5)),
    ("wave3d", "wave3d", dict(shape=(17, 9, 9), radius=4), dict(steps=6)),
    ("wave3d_source", "wave3d", dict(shape=(12, 11, 9), radius=2, source=True, velocity="layered"), dict(steps=6)),
    ("derivatives_x4", "derivatives", dict(shape=(14, 26), axis=1, accuracy=4), dict(steps=2)),
    ("derivatives_y2", "derivatives", dict(shape=(22, 9), axis=0, accuracy=2, dtype="float32"), dict(steps=2)),
)


def minimum_extents(problem) -> tuple[int, ...]:
    """Fewest points a block holds per axis, as `DecomposedSimulation` asks of the process grid: the ghost width,
    and along a one-sided derivative's axis its closure rows (`AxisOperator.min_length`)."""
    need = [problem.analysis.ghost] * problem.grid.ndim
    for stage in problem.analysis.operators:
        need[stage.axis] = max(need[stage.axis], axis_operator(stage).min_length)
    return tuple(need)


def alternative_dims(nprocs: int, problem) -> tuple[int, ...] | None:
    """The fitting process grid that ranks next after the automatic choice, or None if there is none."""
    shape, need = problem.grid.shape, minimum_extents(problem)
    fitting = [d for d in factorizations(nprocs, len(shape)) if _fits(shape, d, need)]
    fitting.sort(key=lambda d: (_cut_area(shape, d), d))
    auto = Decomposition.create(nprocs, shape, need).dims
    others = [d for d in fitting if d != auto]
    return others[0] if others else None


def slab_dims(nprocs: int, problem) -> tuple[int, ...] | None:
    """Every rank a slab along axis 0, if the blocks are then large enough."""
    shape, need = problem.grid.shape, minimum_extents(problem)
    dims = (nprocs,) + (1,) * (len(shape) - 1)
    return dims if _fits(shape, dims, need) else None


def make_backend(spec: str):
    """numpy, numba, cuda, or cuda:STRATEGY."""
    name, _, strategy = spec.partition(":")
    return get_backend(name, **({"strategy": strategy} if strategy else {}))


def run_cases(backend_name: str, grid: str, out: str, halo: str = "auto") -> None:
    comm = world()
    if backend_name.startswith("cuda"):
        bind_device(comm)
    backend = make_backend(backend_name)
    saved, meta = {}, {}
    for label, name, params, loop in CASES:
        problem = problems.problem(name, **params)[0]
        if grid == "single":
            result = run_with(problem, None, backend=backend, **loop)
        else:
            procs = {"auto": lambda n, p: None, "alt": alternative_dims, "slabs": slab_dims}[grid](comm.size, problem)
            if grid != "auto" and procs is None:
                continue
            result = run_with(problem, None, backend=backend, comm=comm, procs=procs, halo=halo, **loop)
        if comm.rank == 0:  # the fields come back whole on rank 0
            saved.update({f"{label}/{field}": backend.to_host(arr) for field, arr in result.fields.items()})
        else:
            assert all(arr is None for arr in result.fields.values())
        s = result.summary
        meta[label] = {k: s.get(k) for k in ("procs", "steps", "residual", "error", "errors", "halo", "sweeps", "fused_steps")}
    if comm.rank == 0:
        np.savez(out, __meta__=np.array(json.dumps(meta)), **saved)


def fail_rank(backend_name: str) -> None:
    """The last rank raises inside its third sweep: every rank must exit, with that rank's message."""
    comm = world()
    backend = get_backend(backend_name)

    class Failing:
        name, xp = backend.name, backend.xp

        def __getattr__(self, attr):
            return getattr(backend, attr)

        def sweep(self, plan, grid, background=False):
            inner = backend.sweep(plan, grid)
            calls = [0]

            def run(fields):
                calls[0] += 1
                if comm.rank == comm.size - 1 and calls[0] == 3:
                    raise RuntimeError("injected failure in a sweep")
                inner(fields)

            return Launch(run)

    with fail_together(comm):
        run_with(problems.problem("heat2d", shape=(16, 16))[0], None, backend=Failing(), steps=50, comm=comm)


def say_error(line: str) -> None:
    """One write per line: print() writes the text and the newline apart, and mpiexec merges the
    ranks' stderr, so two ranks' lines could interleave."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def split_heat(backend):
    """heat2d (16 x 16) as each rank of a decomposed run holds it: this rank's block, stepped by hand."""
    return DecomposedSimulation(problems.problem("heat2d", shape=(16, 16))[0], backend, None, world())


def nan_rank(backend_name: str) -> None:
    """A NaN in the last rank's block: the collective finite check stops every rank with one message."""
    backend = get_backend(backend_name)
    sim = split_heat(backend)
    if sim.cart.rank == sim.cart.size - 1:
        sim.state()["u"][-3, -3] = np.nan  # an interior cell of the block (ghost width 1)
    try:
        run_stepper(lambda: PassStepper(sim), backend, LoopOptions(steps=50, check_every=5))
    except StencilforgeError as exc:
        if sim.cart.rank == 0:
            say_error(f"error: {exc}")
        sys.exit(2)


def growing():
    """Forward Euler heat above its stability limit: it grows until it overflows."""
    import stencilforge as sf

    grid = sf.Grid((12, 10), extent=1.0)
    u = sf.Field("u", grid)
    dt = 0.75 * min(grid.spacing) ** 2
    return sf.Problem([sf.Eq(u.next, u + dt * sf.laplacian(u))], initial={u: sf.sin(3 * grid.x) * grid.y},
                      boundary={u: sf.Dirichlet(0.0)}, dt=dt, name="growing")


def kept_blocks(backend_name: str) -> None:
    """A blow-up split over two ranks, its linear pass as the backend's sweep and as its generated kernel: each rank's
    finite_fields is its block of the last finite state, which gathered is what one process ends with after that
    many steps."""
    import stencilforge as sf

    comm, engine = world(), get_backend(backend_name)
    decomp = Decomposition.create(comm.size, (12, 10), (1, 1), (comm.size, 1))
    for path in ("sweep", "generated"):
        generated = path == "generated"
        try:
            sf.run(growing(), backend=engine, generated=generated, comm=comm, procs=(comm.size, 1), steps=100000, check_every=20)
        except BlowUp as exc:
            whole = gather(comm, decomp, exc.finite_fields["u"])
            if comm.rank == 0:
                alone = sf.run(growing(), backend=engine, generated=generated, steps=exc.last_finite)
                assert bool(alone.summary["sweeps"]) != generated, alone.summary["sweeps"]
                same = np.array_equal(whole, alone.fields["u"])
                print(f"{path}: last finite step {exc.last_finite}, kept blocks equal one process's: {same}")


def fail_write(backend_name: str) -> None:
    """Rank 0's writer fails at the second snapshot: every rank stops at that step, none waits."""
    comm = world()

    class FailingWriter:
        def __init__(self):
            self.calls = 0

        def __call__(self, step, t, fields, backend):
            self.calls += 1
            if self.calls == 2:
                raise OutputError(f"writing snapshot at step {step} failed: injected")

        def close(self):
            pass

    backend = get_backend(backend_name)
    sim = split_heat(backend)
    output = GlobalOutput(FailingWriter() if comm.rank == 0 else None, 2, ("u",), False)
    state = sim.state()  # rank 0 assembles the whole grid's arrays
    gathering = Gathering(output, sim.cart, sim.decomp, sim.lattice.ghost, {"u": sim.whole.padded_shape}, {"u": state["u"].dtype})
    try:
        run_stepper(lambda: PassStepper(sim), backend, LoopOptions(steps=50, observers=(gathering,)))
    except StencilforgeError as exc:
        say_error(f"error: rank {comm.rank}: {exc}")
        sys.exit(2)


if __name__ == "__main__":
    if sys.argv[2] == "fail-rank":
        fail_rank(sys.argv[1])
    elif sys.argv[2] == "fail-write":
        fail_write(sys.argv[1])
    elif sys.argv[2] == "nan-rank":
        nan_rank(sys.argv[1])
    elif sys.argv[2] == "kept-blocks":
        kept_blocks(sys.argv[1])
    else:
        run_cases(*sys.argv[1:])
