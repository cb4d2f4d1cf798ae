"""Fields stored in float16 on the GPU against the numpy oracle: bitwise where the float32 arithmetic is
(no transcendental functions), 2D (2-byte loads and 4-byte words) and 3D, walls of every kind."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.ir.analysis import slot_name
from stencilforge.ir.nodes import Call, walk
from stencilforge.problems import heat, wave3d

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

import cupy as cp  # noqa: E402

from test_equations import _random_problem, terms, walls  # noqa: E402
from test_equations_gpu import poisoned_run  # noqa: E402

FUNCTIONS = ["none", "min", "where", "abs", "tanh"]  # applied to u's right-hand side


TRANSCENDENTAL = {"sin", "cos", "exp", "log", "tanh"}


def _calls_transcendental(p) -> bool:
    """Whether an equation calls a function CUDA and NumPy may round differently in float32 (its results, and the
    fields later steps compute from them, may then differ by a float16 ulp)."""
    return any(isinstance(n, Call) and n.fn in TRANSCENDENTAL for eq in p.equations for n in walk(eq.expr))


def _equal_to_numpy(p, steps):
    ref = sf.run(p, backend=NumpyBackend(), steps=steps).fields
    got = poisoned_run(p, steps)
    for name in p.analysis.written:
        assert got[name].dtype == np.float16
        if not _calls_transcendental(p):
            np.testing.assert_array_equal(got[name], ref[name], err_msg=name)
        else:  # sin, exp, tanh differ from NumPy's by float32 ulps, which can move a value by one float16 ulp
            want = ref[name].astype(np.float64)
            assert (np.abs(got[name] - want) <= 2.0**-10 * np.maximum(1.0, np.abs(want))).all(), name


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms, terms, walls, st.sampled_from(FUNCTIONS), st.tuples(st.integers(5, 40), st.integers(5, 70)))
def test_half_generated_equations_cuda_match_numpy(u_terms, v_terms, wall, fn, shape):
    _equal_to_numpy(_random_problem(u_terms, v_terms, wall, fn, "float32", shape, storage="float16"), 3)


def test_half_problems_take_one_step_per_pass():
    """The two-step kernel was slower than single float16 steps (half-storage-h{100,200}-2026-11-24.json)."""
    p = heat.problem(2, (64, 48), storage="float16")
    assert sf.Simulation(p, CudaBackend()).build_fused() is not None
    assert sf.run(p, backend="cuda", steps=6).summary["steps_per_pass"] == 1


@pytest.mark.parametrize("shape", [(70, 131), (9, 4), (37, 101), (64, 48)])
def test_half_heat_with_moving_walls_matches_numpy(shape):
    """The exact solution's walls change in time: the GPU scales them in one scatter into float16 ghost cells."""
    _equal_to_numpy(heat.problem(2, shape, storage="float16"), 7)


@pytest.mark.parametrize("shape,radius,source", [((20, 17, 23), 4, False), ((18, 19, 26), 8, False), ((21, 18, 19), 2, True)])
def test_half_wave_increment_form_matches_numpy(shape, radius, source):
    """wave3d in float16: one pass writes d and then u from the rounded d; moving walls, or a source on both."""
    _equal_to_numpy(wave3d.problem(shape, radius=radius, storage="float16", source=source)[0], 6)


@pytest.mark.parametrize("shape", [(13, 17, 35), (40, 33, 129), (12, 9, 30), (5, 6, 8)])
def test_half_3d_passes_match_numpy(shape):
    """heat3d and a two-field reaction-diffusion system in float16: 2-byte loads on rows of an odd number of
    padded cells, 4-byte words on even ones."""
    _equal_to_numpy(heat.problem(3, shape, storage="float16"), 5)
    grid = sf.Grid(shape, extent=1.0, dtype="float32")
    u, v = sf.Field("u", grid, storage="float16"), sf.Field("v", grid, storage="float16")
    k = 0.1 * grid.spacing[0] ** 2
    rng = np.random.default_rng(0)
    p = sf.Problem([sf.Eq(u.next, u + k * sf.laplacian(u) - 0.1 * u * v * v), sf.Eq(v.next, v + k * sf.laplacian(v) + 0.1 * u * v * v)],
                   initial={u: rng.random(shape), v: rng.random(shape)}, boundary={u: sf.Periodic(), v: sf.Neumann()}, dt=1.0)
    _equal_to_numpy(p, 4)


@pytest.mark.parametrize("shape", [(64, 48), (9, 4), (33, 70), (3, 2)])
@pytest.mark.parametrize("walls", ["periodic", "neumann", "dirichlet"])
def test_word_passes_equal_two_byte_passes(shape, walls):
    """The same pass printed with 4-byte words and with 2-byte loads, bitwise, ghost cells included (the
    word pass writes ghost images of periodic and Neumann fields), from NaN-poisoned outputs."""
    from stencilforge.backends.cuda.tune import PASS_HALF

    p = _random_problem([("u", (1, -1), 0.5, True), ("v", (0, 1), -0.3, False)], [("u", (-1, 0), 0.2, True)],
                        walls, "where", "float32", shape, storage="float16")
    (pas,) = p.analysis.passes
    results = []
    for schedule in ({"block": (128, 2), "rows": 4, "words": True}, PASS_HALF[2]):
        sim = sf.Simulation(p, CudaBackend())
        images = {slot_name(s): w for s, w in sim._images.items()}
        run = sim.backend.equation_pass(pas, sim.lattice, p.constants, images=images, **schedule)
        for levels in sim.levels.values():
            if len(levels) > 1:
                levels[-1][...] = cp.nan
        run(sim.arrays(), sim.params, 0.0)
        results.append({k: cp.asnumpy(v) for k, v in sim.arrays().items()})
    for slot in results[0]:
        np.testing.assert_array_equal(results[0][slot].view(np.uint16), results[1][slot].view(np.uint16), err_msg=slot)
