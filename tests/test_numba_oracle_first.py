"""A run's first steps while Numba compiles: NumPy's oracle steps (and writes the walls) until the kernel is
ready, with the same bits, so a cold run starts stepping at once; cached kernels and large grids compile first.
Likewise an equation's generated pass, where NumPy rounds its operations as the kernel does."""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pytest

import stencilforge as sf
from stencilforge import problems
from stencilforge.backends.numba import NumbaBackend, backend as numba_backend
from stencilforge.backends.numpy_ref import NumpyBackend, evaluate_sweep
from stencilforge.boundary import scale_with_numpy
from stencilforge.printers.numba import rounds_as_oracle
from stencilforge.runner import run
from stencilforge.simulation import Simulation

pytest.importorskip("numba")


@pytest.fixture
def held(monkeypatch, tmp_path):
    """An empty kernel cache, and background compiles that finish only when the test says so."""
    monkeypatch.setenv("STENCILFORGE_CACHE_DIR", str(tmp_path))
    futures: list[Future] = []

    def hold(self, kernel, signature, what, instead):
        futures.append(Future())
        return futures[-1]

    monkeypatch.setattr(NumbaBackend, "_in_background", hold)
    return futures


def _fields(step, seed=3):
    """Random ghosted arrays for every field the step's sweep reads or writes."""
    rng = np.random.default_rng(seed)
    names = [*step.sweep.inputs, step.sweep.out]
    lattice = step.lattice
    return {n: rng.uniform(-1, 1, lattice.padded_shape).astype(lattice.dtype) for n in dict.fromkeys(names)}


@pytest.mark.parametrize("name, shape, params", [("wave3d", (9, 21, 19), {"radius": 4}), ("heat2d", (23, 37), {}),
                                                 ("poisson2d", (17, 31), {})])
def test_numpy_steps_until_the_kernel_is_compiled_with_the_same_bits(held, name, shape, params):
    step = problems.linear_step(name, shape=shape, dtype="float32", **params)
    sweep, grid = step.sweep, step.lattice
    launch = NumbaBackend().sweep(sweep, grid, background=True)
    assert launch.fallback is not None and not launch.ready()
    before, after = _fields(step), _fields(step)
    ref = evaluate_sweep(sweep, grid, before)
    oracle, calls = launch.fallback, []
    launch.fallback = lambda f: (calls.append(1), oracle(f))
    launch(before)  # NumPy's step: the kernel's compile is still held
    assert calls == [1]
    held[0].set_result(None)
    launch(after)  # compiled now (Numba compiles it on this call, as the held thread would have)
    assert calls == [1] and launch.fallback is None and launch.ready()
    assert np.array_equal(before[sweep.out][grid.interior], ref)
    assert np.array_equal(after[sweep.out][grid.interior], ref)


def test_a_kernel_that_fails_to_compile_leaves_numpy_stepping(held):
    step = problems.linear_step("heat2d", shape=(11, 13), dtype="float64")
    launch = NumbaBackend().sweep(step.sweep, step.lattice, background=True)
    held[0].set_exception(RuntimeError("no"))
    oracle, calls = launch.fallback, []
    launch.fallback = lambda f: (calls.append(1), oracle(f))
    f = _fields(step)
    launch(f)
    launch(f)
    assert calls == [1, 1] and not launch.ready()
    f = _fields(step)
    launch(f)
    assert np.array_equal(f[step.sweep.out][step.lattice.interior], evaluate_sweep(step.sweep, step.lattice, _fields(step)))


def test_cached_kernels_and_large_grids_compile_before_stepping(held, monkeypatch):
    step = problems.linear_step("heat2d", shape=(11, 13), dtype="float64")
    NumbaBackend().sweep(step.sweep, step.lattice)  # compiles now, and leaves the kernel in the cache
    cached = NumbaBackend().sweep(step.sweep, step.lattice, background=True)
    assert cached.fallback is None and cached.ready()
    other = problems.linear_step("heat2d", shape=(11, 13), dtype="float32")
    monkeypatch.setattr(numba_backend, "ORACLE_STEP_BUDGET", other.lattice.cells * 5 - 1)  # one cell over: 5 entries
    assert NumbaBackend().sweep(other.sweep, other.lattice, background=True).fallback is None
    assert not held, "nothing compiled in the background"
    fresh = problems.linear_step("poisson2d", shape=(11, 13), dtype="float32")  # another kernel: not in the cache
    entries = sum(len(term.stencil.entries) for term in fresh.sweep.terms)
    monkeypatch.setattr(numba_backend, "ORACLE_STEP_BUDGET", fresh.lattice.cells * entries)  # at the budget: NumPy first
    assert NumbaBackend().sweep(fresh.sweep, fresh.lattice, background=True).fallback is not None and len(held) == 1


def test_walls_written_by_numpy_until_the_writer_is_compiled(held, monkeypatch):
    by_numpy = []
    monkeypatch.setattr(numba_backend, "scale_with_numpy", lambda *args: (by_numpy.append(1), scale_with_numpy(*args)))
    scale = NumbaBackend().wall_scaler()
    rng = np.random.default_rng(0)
    field = np.full((6, 7, 8), np.nan, dtype=np.float32)
    values = rng.uniform(-1, 1, (6, 7, 1))
    scale(field[:, :, :1], values, 0.3)  # a strided box: NumPy writes it while its kernel compiles
    expected = np.full_like(field, np.nan)
    expected[:, :, :1] = values * 0.3
    assert np.array_equal(field, expected, equal_nan=True) and by_numpy == [1]
    (box,) = held
    box.set_result(None)
    field[:] = np.nan
    scale(field[:, :, 7:], values, 0.3)  # the same kind of box: the kernel now
    expected[:] = np.nan
    expected[:, :, 7:] = values * 0.3
    assert np.array_equal(field, expected, equal_nan=True) and by_numpy == [1]
    scale(field[:1], rng.uniform(-1, 1, (1, 7, 8)), 2.0)  # a contiguous box is another kind: compiles too
    assert len(held) == 2


def test_a_cold_run_gives_the_oracles_fields(monkeypatch, tmp_path):
    """Real background compiles on an empty cache (a run short enough to end while they may still run)."""
    monkeypatch.setenv("STENCILFORGE_CACHE_DIR", str(tmp_path))
    problem = problems.problem("heat3d", shape=(12, 14, 16), dtype="float32")[0]
    ours = run(problem, steps=7, backend=NumbaBackend()).fields
    oracle = run(problem, steps=7, backend=NumpyBackend()).fields
    assert oracle and all(np.array_equal(ours[k], oracle[k]) for k in oracle)


def test_numpy_applies_an_axis_operator_until_its_kernel_is_compiled(held):
    from stencilforge.backends.numpy_ref import evaluate_axis_operator
    from stencilforge.problems import derivatives

    op = derivatives.operator(1, 0.37, 4)
    shape = (13, 29)
    u = np.random.default_rng(2).uniform(-1, 1, shape)
    launch = NumbaBackend().axis_operator(op, np.float64, shape, background=True)
    oracle, calls = launch.fallback, []
    launch.fallback = lambda *a: (calls.append(1), oracle(*a))
    ref = [np.full(shape, np.nan) for _ in op.outputs]
    evaluate_axis_operator(op, u, ref)
    before, after = ([np.full(shape, np.nan) for _ in op.outputs] for _ in range(2))
    launch(u, *before)  # NumPy: the compile is held
    held[0].set_result(None)
    launch(u, *after)  # the kernel
    assert calls == [1] and launch.fallback is None
    assert all(np.array_equal(b, r) and np.array_equal(a, r) for b, a, r in zip(before, after, ref))


def test_a_backends_background_compiles_run_in_the_order_asked_and_leave_no_thread():
    import threading
    import time

    order: list[str] = []

    class Kernel:
        def __init__(self, name: str, pause: float):
            self.name, self.pause = name, pause

        def compile(self, signature):
            time.sleep(self.pause)
            order.append(self.name)

    backend = NumbaBackend()
    first = backend._in_background(Kernel("step", 0.3), (), "step", "-")
    second = backend._in_background(Kernel("pair", 0.0), (), "pair", "-")
    second.result(timeout=30)
    assert first.done() and order == ["step", "pair"]
    for thread in [t for t in threading.enumerate() if t.name == "stencilforge-compile"]:
        thread.join(timeout=30)
        assert not thread.is_alive()


def _equation():
    """One pass of two fields reading coordinates, t, sqrt, abs, a select and a division: operations NumPy's oracle rounds
    as the kernel does; walls of fixed values, so no gather compiles beside the pass."""
    grid = sf.Grid((13, 11), extent=(1.3, 0.7), dtype="float32")
    u, v = sf.Field("u", grid), sf.Field("v", grid)
    c = sf.Constant("c", 1e-4)
    shape = c * (grid.x * grid.y - 0.3 * grid.t * grid.x + sf.sqrt(abs(u)) / (1 + v ** 2))
    eqs = [sf.Eq(u.next, u + c * sf.laplacian(u) + shape), sf.Eq(v.next, sf.where(u > 0.5, v, v + c * u * v))]
    walls = sf.Dirichlet(0.25)
    return sf.Problem(eqs, initial={u: grid.x * (1 - grid.y), v: grid.y}, boundary={u: walls, v: walls}, dt=1e-3)


def test_numpy_takes_an_equations_first_passes_until_its_kernel_is_compiled_with_the_same_bits(held):
    problem = _equation()  # float32; float64's bits: the random equations of test_equations.py
    (p,) = problem.analysis.passes
    assert rounds_as_oracle(p)
    sim = Simulation(problem, NumbaBackend(), background=True)
    (_, launch), = sim.passes
    assert launch.fallback is not None and not launch.ready() and len(held) == 1
    oracle, calls = launch.fallback, []
    launch.fallback = lambda *args: (calls.append(1), oracle(*args))
    sim.step(2)  # NumPy's passes: the kernel's compile is still held
    assert calls == [1, 1]
    held[0].set_result(None)
    sim.step(3)  # the kernel now (Numba compiles it on its first call, as the held thread would have)
    assert calls == [1, 1] and launch.fallback is None
    ref = Simulation(problem, NumpyBackend())
    ref.step(5)
    for name, values in ref.fields.items():
        assert np.isfinite(values).all() and np.array_equal(sim.fields[name], values), name


def test_passes_numpy_rounds_otherwise_are_not_taken_by_numpy():
    """exp, log, sin, cos and tanh round differently in NumPy's loops; min and max treat NaN differently."""
    grid = sf.Grid((8, 8), extent=1.0)
    u = sf.Field("u", grid)
    for fn, exact in [(sf.sqrt, True), (sf.absolute, True), (sf.exp, False), (sf.log, False), (sf.sin, False), (sf.cos, False),
                      (sf.tanh, False), (lambda e: sf.minimum(e, 0.5), False), (lambda e: sf.maximum(e, 0.5), False)]:
        problem = sf.Problem([sf.Eq(u.next, u + 1e-3 * fn(u))], initial={u: 1.0}, boundary={u: sf.Periodic()}, dt=1e-3)
        (p,) = problem.analysis.passes
        assert rounds_as_oracle(p) is exact, fn


def test_a_run_leaves_no_compile_running_after_it_returns(monkeypatch):
    """A kernel still compiling in the background when the run's steps are done is waited for (and cached) before
    sf.run returns, so no thread of the run keeps a core busy afterwards; a backend with none waits for nothing."""
    import threading
    import time as clock

    import stencilforge as sf
    from stencilforge.backends.numba import NumbaBackend
    from stencilforge.problems.heat import problem

    class Slow:
        def compile(self, signature):
            clock.sleep(1.0)

    engine = NumbaBackend()
    sf.run(problem(2, (16, 16)), steps=2, backend=engine)  # its own kernels compiled and loaded: the next run is quick
    engine._in_background(Slow(), (), "a slow kernel", "nothing")
    assert any(t.name == "stencilforge-compile" and t.is_alive() for t in threading.enumerate())
    sf.run(problem(2, (16, 16)), steps=2, backend=engine)
    assert not any(t.name == "stencilforge-compile" and t.is_alive() for t in threading.enumerate())
    sf.run(problem(2, (16, 16)), steps=2, backend="numpy")
