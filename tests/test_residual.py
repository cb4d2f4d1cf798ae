"""The residual a run drives below `tol`: ||residual||_2 / ||scale||_2 with the squares summed exactly, the bits of
whole-array NumPy code summed with math.fsum (the oracle here), on numpy and numba, for a named problem and for a
residual of the time and the coordinates."""

from __future__ import annotations

import math

import numpy as np
import pytest

import stencilforge as sf
from stencilforge import problems
from stencilforge.printers.numpy import coordinates, evaluate, widened
from stencilforge.reductions import local_part, squares_part


def array_code_residual(sim: sf.Simulation) -> float:
    """||residual||_2 / ||scale||_2 as whole-array NumPy code over the interior, summed exactly (math.fsum)."""
    lat = sim.lattice
    g, shape = lat.ghost, lat.shape

    def access(node):
        arr = sim._slot((node.field.name, node.level))
        return widened(arr[tuple(slice(g + o, g + o + n) for o, n in zip(node.offset, shape))], lat.dtype)

    def norm(e):
        value = evaluate(e, dtype=lat.dtype, xp=np, coordinate=coordinates(lat, np), access=access, params=sim.params, t=sim.t)
        value = np.broadcast_to(np.asarray(value, dtype=np.float64), shape)
        return math.sqrt(math.fsum((value * value).ravel()))

    scale = sim.problem.residual_scale
    return norm(sim.problem.residual) / (norm(scale) if scale is not None else math.sqrt(math.prod(shape)))


def timed_problem(dtype: str) -> sf.Problem:
    grid = sf.Grid((23, 31), extent=1.0, dtype=dtype)
    u = sf.Field("u", grid)
    x, y, t = grid.x, grid.y, grid.t
    return sf.Problem([sf.Eq(u.next, u + 0.2 * min(grid.spacing) ** 2 * sf.laplacian(u))], initial={u: sf.sin(3 * x) * y},
                      boundary={u: sf.Neumann()}, residual=u - sf.exp(-t) * sf.sin(3 * x) * y + 0.1 * sf.d(u, "x"), dt=1e-4)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_residual_has_the_array_codes_bits_summed_exactly(backend, dtype, monkeypatch):
    from stencilforge import reductions

    monkeypatch.setattr(reductions, "LOOP_VALUES", 1000)  # the compiled loop's sums, as a large grid takes them
    rng = np.random.default_rng(11)
    named = problems.problem("poisson2d", (37, 45), dtype)[0]
    for problem in (named, timed_problem(dtype)):
        sim = sf.Simulation(problem, backend)
        sim.step(3)
        sim.set_field("u", rng.standard_normal(problem.grid.shape).astype(dtype))
        got = sim.residual()
        assert got > 0 and math.isfinite(got)
        assert got == array_code_residual(sim), problem.name
        sim.step(2)
        assert sim.residual() == array_code_residual(sim)  # the pass reads the state of now, at its time


def test_a_residual_that_overflows_is_not_finite_and_raises_nothing():
    sim = sf.Simulation(problems.problem("poisson2d", (21, 21), "float32")[0], "numba")
    field = np.zeros((21, 21), dtype=np.float32)
    field[4, 7] = np.finfo(np.float32).max
    sim.set_field("u", field)
    assert not math.isfinite(sim.residual())


def test_squares_part_is_local_part_of_the_squares():
    rng = np.random.default_rng(5)
    for values in (rng.standard_normal((17, 9)).astype(np.float32), rng.standard_normal(1000) * 1e150, np.array([1e200, 2.0]),
                   np.zeros(4), np.array([np.nan, 1.0])):
        v = values.astype(np.float64)
        with np.errstate(over="ignore"):
            want = local_part(v * v)
        got = squares_part(values)
        assert type(got) is type(want) and (got == want or (math.isnan(got) and math.isnan(want)))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_run_computes_a_steady_scale_once_and_a_changing_one_at_every_check(backend):
    from stencilforge.simulation import PassStepper

    named = problems.problem("poisson2d", (21, 26), "float64")[0]
    grid = sf.Grid((21, 26), extent=1.0)
    u, f = sf.Field("u", grid), sf.Field("f", grid, levels=1)
    changing = sf.Problem([sf.Eq(u.next, u + 0.2 * min(grid.spacing) ** 2 * (sf.laplacian(u) - f))],
                          initial={u: sf.sin(3 * grid.x) * grid.y, f: grid.x}, boundary={u: sf.Dirichlet(0.0)},
                          residual=f - sf.laplacian(u), residual_scale=u + f, dt=1.0, name="scaled by u")
    for problem, steady in ((named, True), (changing, False)):
        sim = sf.Simulation(problem, backend)
        stepper = PassStepper(sim)
        norms, norm = [], sim._norm
        sim._norm = lambda which, norms=norms, norm=norm: norms.append(which) or norm(which)  # counts the scale's passes (1)
        got = []
        for _ in range(3):
            sim.step(4)
            got.append(stepper.residual(sim.step_count))
        assert norms.count(1) == (1 if steady else 3) and norms.count(0) == 3, problem.name
        assert got[-1] == sim.residual() == array_code_residual(sim), problem.name
        assert (sim.steady_scale() is not None) is steady, problem.name


def test_a_pass_over_fields_in_the_sweeps_layout_indexes_rows_by_their_pitch(nvrtc):
    """The residual's pass on fields laid out for sweeps (rows a pitch of whole cache lines apart) reads them where
    they lie: its row stride is the pitch, the planes' follow from it, and the kernel compiles."""
    from stencilforge.backends.cuda.backend import pass_kernel
    from stencilforge.backends.cuda.compile import compile_cubin
    from stencilforge.ir.analysis import pass_of
    from stencilforge.printers.cuda import OPTIONS

    problem = problems.problem("poisson3d", (19, 23, 30), "float32")[0]
    p = pass_of(sf.Eq(sf.Field("residual", problem.grid, levels=1), problem.residual))
    lattice = sf.Simulation(problem, "numpy").lattice
    plain, pitched = (pass_kernel(p, lattice, problem.constants, pitch=pitch).source for pitch in (None, 64))
    assert "s1 = s2 * (n2 + 2 * g)" in plain and "s1 = s2 * (int)64" in pitched and "s0 = s1 * (n1 + 2 * g)" in pitched
    assert compile_cubin(pitched, "sm_90", "a pitched pass", OPTIONS)[:4] == b"\x7fELF"
