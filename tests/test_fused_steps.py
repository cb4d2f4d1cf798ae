"""The time loop's several-steps-per-pass path, checked on the CPU with a backend whose fused pass is NumPy sweeps.

The CUDA kernels that fuse steps are checked against the oracle in
tests/test_cuda_gpu.py; here the question is the loop's: which steps it fuses
(none that a check or an observer must see, none where a wall reads the field), and that fused
runs end with the same fields, residuals and iteration counts.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from stencilforge import problems
from stencilforge.backends.base import Launch, fused_walls
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.boundary import Neumann, Periodic
from stencilforge.errors import StencilforgeError
from stencilforge.problem import Problem
from stencilforge.runner import run
from stencilforge.simulation import PassStepper, Simulation
from stencilforge.timeloop import LoopOptions, Result, fusion_window, never_fuses, run_stepper


def named(name, shape, **params) -> Problem:
    return problems.problem(name, shape=shape, **params)[0]


def run_loop(problem: Problem, backend, wait: bool = False, **opts) -> Result:
    """`problem` through the loop `sf.run` takes (`Simulation`, `PassStepper`, `run_stepper`), with any of the loop's
    options (observers among them); `wait`: a fused kernel compiling in the background is waited for before the
    first step, so every pass the loop may fuse is fused."""
    options = LoopOptions(**opts)
    sim = Simulation(problem, backend, background=True)

    def build():
        stepper = PassStepper(sim, never_fuses(options, problem.default_steps), fusion_window(options))
        if wait:
            compile_fused = stepper.compile

            def compile_and_wait():
                compile_fused()
                if sim.fused is not None:
                    sim.fused.wait()

            stepper.compile = compile_and_wait  # type: ignore[method-assign]
        return stepper

    return run_stepper(build, backend, options)


class FusedNumpy(NumpyBackend):
    """NumPy with a `sweep_fused` of `steps` sweeps: the state after step s takes the ghost cells of
    fields[fused_walls(s)] (step 1: out's), as the CUDA kernels do."""

    fuses_steps = True

    def __init__(self, steps=2):
        super().__init__()
        self.steps, self.passes = steps, 0

    def sweep_fused(self, sweep, grid, *, window=None):
        one = self.sweep(sweep, grid)
        (u,) = sweep.stencil_inputs

        def run(fields):
            self.passes += 1
            state = fields[u]
            for s in range(1, self.steps):
                middle = fields[fused_walls(s, sweep.out)].copy()
                one({**fields, u: state, sweep.out: middle})
                state = middle
            one({**fields, u: state})

        return Launch(run, steps=self.steps)


class Recorder:
    """Every field, ghost cells included, at each step it observes."""

    def __init__(self, every):
        self.every = every
        self.seen = []

    def __call__(self, step, t, fields, backend):
        self.seen.append((step, t, {k: np.array(a, copy=True) for k, a in fields.items()}))

    def close(self):
        pass


def same_record(a: Recorder, b: Recorder) -> bool:
    return [(s, t) for s, t, _ in a.seen] == [(s, t) for s, t, _ in b.seen] and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x) for (_, _, x), (_, _, y) in zip(a.seen, b.seen)
    )


@pytest.mark.parametrize(
    "name,shape",
    [
        ("poisson2d", (30, 41)),  # static walls
        ("heat2d", (30, 41)),  # time-dependent Dirichlet walls: the loop fills the middle step's ahead
        ("heat3d", (9, 10, 11)),
    ],
)
@pytest.mark.parametrize("steps", [2, 3, 4])
def test_fused_run_equals_the_single_step_run_at_every_observed_step(name, shape, steps):
    opts = dict(steps=37, check_every=10)
    plain_obs, fused_obs = Recorder(7), Recorder(7)
    plain = run_loop(named(name, shape), NumpyBackend(), observers=(plain_obs,), **opts)
    be = FusedNumpy(steps)
    fused = run_loop(named(name, shape), be, observers=(fused_obs,), **opts)
    assert plain_obs.seen and same_record(fused_obs, plain_obs)  # every buffer, its ghost cells too
    assert plain.fields and all(np.array_equal(fused.fields[k], plain.fields[k]) for k in plain.fields)
    assert fused.summary.get("residual") == plain.summary.get("residual")
    assert fused.summary["errors"] == plain.summary["errors"]
    # steps 1..37, events at multiples of 7 and 10: a pass n -> n+k only where none of n+1..n+k is an event
    # and n+k is not the last step, so every observed state (and u_next in it) is a single step's
    events = {m for m in range(1, 38) if m % 7 == 0 or m % 10 == 0}
    expected, n = 0, 0
    while n < 37:
        if n + steps < 37 and not events & set(range(n + 1, n + steps + 1)):
            expected, n = expected + 1, n + steps
        else:
            n += 1
    assert be.passes == expected > 0
    assert fused.summary["fused_steps"] == steps * expected and fused.summary["steps_per_pass"] == steps


@pytest.mark.parametrize("full", [StencilforgeError("needs 1 MB more than the device holds"), MemoryError()])
def test_a_run_whose_middle_walls_do_not_fit_steps_singly_with_the_same_fields(caplog, full):
    """A device's pool refuses in one line; a host's allocation raises MemoryError."""

    class Full(FusedNumpy):
        """Memory for the fields, none left once the fused kernel is built."""

        built = False

        def sweep_fused(self, sweep, grid, *, window=None):
            self.built = True
            return super().sweep_fused(sweep, grid, window=window)

        def field(self, a, ghost):
            if self.built:
                raise full
            return super().field(a, ghost)

    plain = run(named("heat2d", (30, 41)), steps=20, backend=NumpyBackend())
    be = Full(4)
    with caplog.at_level("INFO", logger="stencilforge.simulation"):
        result = run(named("heat2d", (30, 41)), steps=20, backend=be)
    assert be.built and be.passes == 0 and "fused_steps" not in result.summary
    assert "one step per pass: the walls of its 2 middle steps do not fit" in caplog.text
    assert plain.fields and all(np.array_equal(result.fields[k], plain.fields[k]) for k in plain.fields)


def test_fused_run_converges_in_the_same_iterations():
    opts = dict(tol=1e-3, check_every=50)
    plain = run(named("poisson2d", (40, 50)), backend=NumpyBackend(), **opts).summary
    fused = run(named("poisson2d", (40, 50)), backend=FusedNumpy(), **opts).summary
    assert fused["fused_steps"] > 0
    assert (fused["iterations"], fused["residual"], fused["converged"]) == (plain["iterations"], plain["residual"], True)


@pytest.mark.parametrize(
    "name,opts",
    [
        ("wave3d", dict(steps=10)),  # a leapfrog: the output is not swapped with the stencil field
        ("poisson2d", dict(steps=10, fuse_steps=False)),
        ("poisson2d", dict(steps=10, check_every=1)),
    ],
)
def test_no_pairs_where_a_step_must_be_seen(name, opts):
    be = FusedNumpy()
    params = {"radius": 2} if name == "wave3d" else {}
    shape = (12, 13, 14) if name == "wave3d" else (20, 21)
    result = run(named(name, shape, **params), backend=be, **opts)
    assert result.summary["steps"] == 10
    assert be.passes == 0
    assert result.summary.get("fused_steps", 0) == 0


@pytest.mark.parametrize("bc", [Neumann(), Periodic()])
def test_no_pairs_where_the_walls_read_the_field(bc):
    be = FusedNumpy()
    poisson = named("poisson2d", (20, 21))
    (f,) = (field for field in poisson.analysis.fields if field.name == "f")
    (u,) = (field for field in poisson.analysis.fields if field.name == "u")
    walled = Problem(poisson.equations, initial={f: poisson.initial[("f", 0)]}, boundary={u: bc}, residual=poisson.residual,
                     residual_scale=poisson.residual_scale, name="poisson2d")
    result = run(walled, steps=10, backend=be)
    assert be.passes == 0 and "fused_steps" not in result.summary and result.summary["steps"] == 10


def test_which_sweeps_compose_with_their_swap():
    poisson = problems.linear_step("poisson2d", shape=(20, 21))
    wave = problems.linear_step("wave3d", shape=(12, 13, 14), radius=2)
    assert poisson.sweep.composes_with(poisson.swap)
    assert not poisson.sweep.composes_with(None)
    assert not poisson.sweep.composes_with(("u", "f"))
    assert not wave.sweep.composes_with(wave.swap)  # a leapfrog reads the level it overwrites


@pytest.mark.parametrize("opts", [dict(steps=2), dict(steps=50, check_every=2), dict(steps=50, observers=(Recorder(1),))])
def test_no_pair_kernel_is_built_for_a_run_that_would_never_take_one(opts):
    built = []

    class Counting(FusedNumpy):
        def sweep_fused(self, sweep, grid, *, window=None):
            built.append(sweep)
            return super().sweep_fused(sweep, grid, window=window)

    run_loop(named("heat2d", (12, 13)), Counting(), **opts)
    assert built == []
    run_loop(named("heat2d", (12, 13)), Counting(), steps=3)
    assert len(built) == 1


class CompilingNumpy(FusedNumpy):
    """FusedNumpy whose fused kernel finishes compiling when `until` (a step count) is reached, or fails."""

    def __init__(self, until: int | None, failure: Exception | None = None):
        super().__init__(steps=2)
        self.until, self.failure, self.singles = until, failure, 0

    def sweep(self, sweep, grid, background=False):
        one = super().sweep(sweep, grid)

        def run(fields):
            self.singles += 1
            one(fields)

        return Launch(run)

    def sweep_fused(self, sweep, grid, *, window=None):
        from concurrent.futures import Future

        launch = super().sweep_fused(sweep, grid, window=window)
        launch.compiling = self.compiling = Future()
        if self.failure is not None:
            self.compiling.set_exception(self.failure)
        return launch

    def observe(self, step, t, fields, backend):
        if step == self.until:
            self.compiling.set_result(None)


@pytest.mark.parametrize("name", ["heat2d", "poisson2d"])
def test_single_steps_until_the_fused_kernel_is_compiled_then_pairs_with_the_same_bits(name):
    """A kernel compiling in the background (numba's pair): the loop steps singly until it is ready, then
    pairs; the fields are the single steps' bits either way (heat2d's walls change in time)."""
    be = CompilingNumpy(until=10)
    observer = dataclasses.make_dataclass("Every", [("every", int)], namespace={"__call__": lambda s, *a: be.observe(*a),
                                                                               "close": lambda s: None})(10)
    fused = run_loop(named(name, (12, 17)), be, steps=41, check_every=1000, observers=(observer,))
    single = run_loop(named(name, (12, 17)), NumpyBackend(), steps=41, check_every=1000)
    assert single.fields and all(np.array_equal(fused.fields[k], single.fields[k]) for k in single.fields)
    # steps 1..10 single (ready after the observer at 10); then 4 pairs to 18, 19 and 20 single (20 is observed),
    # the same from 20 and 30, and 41 single (the last): 12 pairs, 17 single steps (a pair runs two sweeps)
    assert be.passes == 12 and fused.summary["fused_steps"] == 24 and be.singles - 2 * be.passes == 17


def test_a_fused_kernel_that_failed_to_compile_leaves_single_steps_or_is_raised_when_waited_for():
    be = CompilingNumpy(until=None, failure=StencilforgeError("compile failed"))
    result = run(named("heat2d", (12, 17)), steps=20, backend=be)
    assert be.passes == 0 and be.singles == 20 and not result.summary.get("fused_steps")
    with pytest.raises(StencilforgeError, match="compile failed"):
        run_loop(named("heat2d", (12, 17)), be, wait=True, steps=20)


@pytest.mark.parametrize("walls", ["moving", "per side", "periodic"])
@pytest.mark.parametrize("steps", [2, 3])
def test_a_problems_linear_step_fuses_in_sf_run_with_the_single_steps_bits(walls, steps):
    """`sf.run` steps a linear equation as its sweep and several of them per pass where the walls are Dirichlet:
    moving walls of the middle states come from the output's ghost cells and carriers of their own, walls that
    read the field (periodic) keep single steps; the fields are the single steps' bits either way."""
    import stencilforge as sf

    grid = sf.Grid((13, 17), extent=1.0)
    u = sf.Field("u", grid)
    wall = {"moving": sf.Dirichlet(grid.t * (1 + grid.y)), "periodic": sf.Periodic(),
            "per side": (sf.Dirichlet(1.0), (sf.Dirichlet(sf.cos(grid.t) * grid.y), sf.Dirichlet(0.5)))}[walls]
    p = sf.Problem([sf.Eq(u.next, u + 0.001 * sf.laplacian(u))], initial={u: sf.sin(3 * grid.x) * grid.y},
                   boundary={u: wall}, dt=0.05)
    fused = FusedNumpy(steps)
    got = sf.run(p, backend=fused, steps=23, check_every=10)
    want = sf.run(p, backend=NumpyBackend(), steps=23, check_every=10)
    np.testing.assert_array_equal(got.fields["u"], want.fields["u"])
    assert (got.summary.get("fused_steps", 0) > 0) == (walls != "periodic") and (fused.passes > 0) == (walls != "periodic")
