"""Run under mpiexec by test_mpi.py: every case decomposed, fields gathered to rank 0 and saved.

usage: mpi_driver.py BACKEND GRID OUT.npz [HALO [OVERLAP]]
           BACKEND: numpy, numba, cuda or cuda:STRATEGY
           GRID: auto (least cut area), alt (the next best process grid) or slabs (split along axis 0 only)
           HALO: auto, host, staged, nccl, mpi     OVERLAP: auto, on or off
       mpi_driver.py BACKEND fail-rank|nan-rank|kept-blocks
"""

from __future__ import annotations

import json
import sys

import numpy as np

from stencilforge import problems
from stencilforge.backends import Launch, get_backend
from stencilforge.distributed import Decomposition, bind_device, fail_together, gather, run_decomposed, world
from stencilforge.distributed.decomposition import _cut_area, _fits, factorizations
from stencilforge.distributed.outputs import GlobalOutput
from stencilforge.distributed.runner import minimum_extents
from stencilforge.errors import BlowUp, OutputError, StencilforgeError
from stencilforge.timeloop import LoopOptions, run

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


def alternative_dims(nprocs: int, setup) -> tuple[int, ...] | None:
    """The fitting process grid that ranks next after the automatic choice, or None if there is none."""
    shape, need = setup.grid.shape, minimum_extents(setup)
    fitting = [d for d in factorizations(nprocs, len(shape)) if _fits(shape, d, need)]
    fitting.sort(key=lambda d: (_cut_area(shape, d), d))
    auto = Decomposition.create(nprocs, shape, need).dims
    others = [d for d in fitting if d != auto]
    return others[0] if others else None


def slab_dims(nprocs: int, setup) -> tuple[int, ...] | None:
    """Every rank a slab along axis 0, if the blocks are then large enough."""
    shape, need = setup.grid.shape, minimum_extents(setup)
    dims = (nprocs,) + (1,) * (len(shape) - 1)
    return dims if _fits(shape, dims, need) else None


def make_backend(spec: str):
    """numpy, numba, cuda, or cuda:STRATEGY."""
    name, _, strategy = spec.partition(":")
    return get_backend(name, **({"strategy": strategy} if strategy else {}))


def run_cases(backend_name: str, grid: str, out: str, halo: str = "auto", overlap: str = "auto") -> None:
    comm = world()
    if backend_name.startswith("cuda"):
        bind_device(comm)
    backend = make_backend(backend_name)
    saved, meta = {}, {}
    for label, name, params, loop in CASES:
        setup = problems.build(name, **params)
        if grid == "single":  # one process through the plain time loop, which fuses steps where it can
            if comm.size != 1:
                raise SystemExit("grid 'single' runs on one rank")
            result = run(setup, backend, LoopOptions(**loop))
            saved.update({f"{label}/{field}": backend.to_host(a) for field, a in result.fields.items()})
            meta[label] = {k: result.summary.get(k) for k in ("steps", "residual", "error", "strategy", "fused_steps")}
            continue
        procs = {"auto": lambda n, s: None, "alt": alternative_dims, "slabs": slab_dims}[grid](comm.size, setup)
        if grid != "auto" and procs is None:
            continue
        result = run_decomposed(
            setup, backend, LoopOptions(**loop), procs=procs, comm=comm, halo=halo,
            overlap={"auto": None, "on": True, "off": False}[overlap],
        )
        s = result.summary
        decomp = Decomposition(tuple(s["shape"]), tuple(s["procs"]))
        for field, local in result.fields.items():
            full = gather(comm, decomp, backend.to_host(local))
            if comm.rank == 0:
                saved[f"{label}/{field}"] = full
        meta[label] = {k: s.get(k) for k in ("procs", "steps", "residual", "error", "halo", "overlap", "strategy")}
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
        run_decomposed(problems.build("heat2d", shape=(16, 16)), Failing(), LoopOptions(steps=50), comm=comm)


def say_error(line: str) -> None:
    """One write per line: print() writes the text and the newline apart, and mpiexec merges the
    ranks' stderr, so two ranks' lines could interleave."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def nan_rank(backend_name: str) -> None:
    """A NaN in the last rank's block: the collective finite check stops every rank with one message."""
    comm = world()
    setup = problems.build("heat2d", shape=(16, 16))
    setup.fields["u"][-3, -3] = np.nan
    try:
        run_decomposed(setup, get_backend(backend_name), LoopOptions(steps=50, check_every=5), comm=comm)
    except StencilforgeError as exc:
        if comm.rank == 0:
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
    """A blow-up split over two ranks, as a lowered sweep and as generated passes: each rank's finite_fields is its
    block of the last finite state, which gathered is what one process ends with after that many steps."""
    import stencilforge as sf
    from stencilforge.problems.base import lowered

    comm, engine = world(), get_backend(backend_name)
    decomp = Decomposition.create(comm.size, (12, 10), (1, 1), (comm.size, 1))
    runs = {  # (split over the ranks, in one process)
        "sweep": (lambda **o: run_decomposed(lowered(growing()), engine, LoopOptions(keep_finite=True, **o), (comm.size, 1), comm),
                  lambda steps: run(lowered(growing()), engine, LoopOptions(steps=steps))),
        "passes": (lambda **o: sf.run(growing(), backend=engine, generated=True, comm=comm, procs=(comm.size, 1), **o),
                   lambda steps: sf.run(growing(), backend=engine, generated=True, steps=steps)),
    }
    for path, (split, alone) in runs.items():
        try:
            split(steps=100000, check_every=20)
        except BlowUp as exc:
            whole = gather(comm, decomp, exc.finite_fields["u"])
            if comm.rank == 0:
                same = np.array_equal(whole, alone(exc.last_finite).fields["u"])
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

    output = GlobalOutput(FailingWriter() if comm.rank == 0 else None, 2, ("u",), False)
    try:
        setup = problems.build("heat2d", shape=(16, 16))
        run_decomposed(setup, get_backend(backend_name), LoopOptions(steps=50), comm=comm, outputs=[output])
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
