"""User equations on the GPU against the numpy oracle: NaN-poisoned outputs, odd shapes, 1D to 3D."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.printers.numpy import pass_kernel

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)

import cupy as cp  # noqa: E402

from test_equations import _random_problem, gray_scott, heat, terms, walls  # noqa: E402

UNIT = {"float32": 2.0**-24, "float64": 2.0**-53}
CUDA = CudaBackend()


def poisoned_run(problem, steps):
    """Steps on cuda with every not-yet-computed level NaN inside, so an unwritten cell shows."""
    sim = sf.Simulation(problem, CUDA)
    for levels in sim.levels.values():
        if len(levels) > 1:
            levels[-1][sim.lattice.interior] = cp.nan
    sim.step(steps)
    return {k: cp.asnumpy(v) for k, v in sim.fields.items()}


def close(gpu, ref, dtype, steps, scale=64):
    """Within a per-cell rounding bound: a few ulps of the largest value per step (exp/sin/tanh differ
    from numpy's by ulps, and no FMA contraction is allowed)."""
    for name, want in ref.items():
        got = gpu[name]
        assert np.isfinite(got).all(), f"{name}: unwritten or non-finite cells"
        bound = scale * steps * UNIT[dtype] * max(1.0, float(np.abs(want).max()))
        assert float(np.abs(got - want).max()) <= bound, (name, float(np.abs(got - want).max()), bound)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(64, 48), (37, 101)])
def test_gray_scott_cuda_matches_numpy(dtype, shape):
    p = gray_scott(shape=shape, dtype=dtype)
    ref = sf.run(p, backend=NumpyBackend(), steps=20).fields
    close(poisoned_run(p, 20), ref, dtype, 20)


@pytest.mark.parametrize("ndim,shape", [(1, (101,)), (2, (33, 70)), (3, (13, 17, 35))])
def test_heat_cuda_matches_numpy(ndim, shape):
    p, _ = heat(shape, dtype="float64", order=4)
    ref = sf.run(p, backend=NumpyBackend(), steps=10).fields
    close(poisoned_run(p, 10), ref, "float64", 10)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms, terms, walls, st.sampled_from(["none", "tanh", "min", "where", "abs"]),
       st.sampled_from(["float32", "float64"]), st.tuples(st.integers(5, 40), st.integers(5, 70)))
def test_generated_equations_cuda_match_numpy(u_terms, v_terms, wall, fn, dtype, shape):
    p = _random_problem(u_terms, v_terms, wall, fn, dtype, shape)
    ref = sf.run(p, backend=NumpyBackend(), steps=3).fields
    close(poisoned_run(p, 3), ref, dtype, 3)


class _GatherAfterPass(CudaBackend):
    """The GPU backend refilling every periodic/Neumann ghost cell with a gather, as before passes wrote them."""

    writes_ghost_images = False


def _image_cases():
    """Problems whose passes write ghost images: walls of every kind on odd shapes, a ghost width above half
    the grid, a second pass reading the first one's output at neighbours, and a field with a point source."""
    kinds = {"P": sf.Periodic(), "N": sf.Neumann()}
    cases = {}
    for sides, shape in (("PP", (37, 101)), ("NP", (6, 5)), ("PN", (33, 70)), ("NN", (3, 4)), ("PNP", (7, 9, 35)),
                         ("NPN", (13, 3, 6))):
        grid = sf.Grid(shape, spacing=1.0, dtype="float64")
        u, w = sf.Field("u", grid), sf.Field("w", grid)
        cond = tuple(kinds[k] for k in sides)
        far = tuple(2 if a == 0 else 0 for a in range(len(shape)))  # a reach of 2: ghost 2 along a 3-point axis
        eqs = [sf.Eq(u.next, u + 0.1 * sf.laplacian(u) + 0.05 * w[far] - 0.01 * u * w),
               sf.Eq(w.next, w + 0.1 * sf.laplacian(u.next) - 0.02 * sf.sin(u.next))]
        rng = np.random.default_rng(len(shape))
        cases[f"{sides}{shape}"] = sf.Problem(
            eqs, initial={u: rng.random(shape), w: rng.random(shape)}, boundary={u: cond, w: cond}, dt=0.1,
            sources=[sf.Source(w, tuple(0.0 for _ in shape), sf.sin(grid.t))] if sides == "PP" else ())
    return cases


@pytest.mark.parametrize("case", sorted(_image_cases()))
def test_passes_writing_ghost_images_equal_a_gather_after_them(case):
    """Bitwise, ghost cells included, against the same kernels with gathers before the passes that read them
    (and at the end, where the passes leave written ghosts current and gathers leave them stale); and the oracle."""
    p = _image_cases()[case]
    assert len(p.analysis.passes) == 2
    with_images = sf.Simulation(p, CUDA, sweeps=False)  # u's pass is linear: as a sweep it would write no images
    assert with_images._images, "the passes should write their fields' ghost cells"
    gathered = sf.Simulation(p, _GatherAfterPass(), sweeps=False)
    for sim in (with_images, gathered):
        for levels in sim.levels.values():
            levels[-1][...] = cp.nan
        sim.step(7)
    for name in {name for name, _ in with_images._images}:  # where the passes wrote them, the ghosts are current
        gathered._fill(name, gathered._slot((name, 0)), gathered.t)
    for slot, arr in with_images.arrays().items():
        np.testing.assert_array_equal(cp.asnumpy(arr), cp.asnumpy(gathered.arrays()[slot]), err_msg=slot)
    ref = sf.run(p, backend=NumpyBackend(), steps=7).fields
    close({k: cp.asnumpy(v) for k, v in with_images.fields.items()}, ref, "float64", 7)


def _pair_cases():
    """Problems whose step runs as one pass: periodic (Gray-Scott, smaller than a tile too), Neumann with a
    one-level coefficient field read at neighbours, static Dirichlet walls with a box stencil of reach 2."""
    cases = {f"gray_scott {dtype} {shape}": gray_scott(shape=shape, dtype=dtype)
             for dtype in ("float32", "float64") for shape in ((64, 48), (37, 101), (5, 7))}
    for shape in ((70, 131), (9, 4)):
        grid = sf.Grid(shape, extent=(1.0, 1.3), dtype="float64")
        u, k = sf.Field("u", grid), sf.Field("k", grid, levels=1)
        cases[f"neumann {shape}"] = sf.Problem(
            [sf.Eq(u.next, u + 0.1 * (k[0, 1] * (u[0, 1] - u) - k * (u - u[0, -1]) + u[1, 0] - 2 * u + u[-1, 0])
                   + 0.05 * sf.sin(grid.t + grid.x))],
            initial={u: sf.cos(3 * grid.x) * grid.y, k: 1 + 0.5 * grid.x}, boundary={u: sf.Neumann(), k: sf.Neumann()}, dt=0.1)
        v = sf.Field("v", grid)
        cases[f"moving dirichlet {shape}"] = heat(shape, dtype="float64")[0]
        cases[f"dirichlet box r2 {shape}"] = sf.Problem(
            [sf.Eq(v.next, v + 0.05 * (v[2, -1] + v[-1, 2] + v[1, 1] + v[-2, -2] - 4 * v) - 0.02 * v**3)],
            initial={v: grid.x - grid.y}, boundary={v: sf.Dirichlet(1.0 + grid.x * grid.y)}, dt=0.1)
    return cases


def _variable_diffusion():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("variable_diffusion", Path(__file__).parent.parent / "examples" / "variable_diffusion.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build(shape=(45, 67))


def test_the_variable_diffusion_example_pairs_bitwise():
    """div(k grad u) with a discontinuous k and walls from the exact solution, which change in time."""
    p = _variable_diffusion()
    a, b = _pair_then_single(p, 5)
    np.testing.assert_array_equal(cp.asnumpy(a.fields["u"]), cp.asnumpy(b.fields["u"]))


def _pair_then_single(problem, pairs):
    """(fused, single-stepped) Simulations advanced the same steps (one, then `pairs` fused passes) from NaN-poisoned
    next levels."""
    a, b = sf.Simulation(problem, CUDA), sf.Simulation(problem, CUDA)
    assert a.build_fused() is None
    for sim in (a, b):
        for levels in sim.levels.values():
            if len(levels) > 1:
                levels[-1][sim.lattice.interior] = cp.nan  # the ghost cells hold static walls
    a.step(1)
    b.step(1 + sum(a.step_fused() for _ in range(pairs)))
    assert a.step_count == b.step_count and a.t == b.t
    return a, b


@pytest.mark.parametrize("case", sorted(_pair_cases()))
def test_two_steps_in_one_pass_equal_two_single_steps(case):
    """Bitwise, ghost cells included, and within the oracle's rounding bound."""
    p = _pair_cases()[case]
    a, b = _pair_then_single(p, 4)
    for sim in (a, b):  # Dirichlet ghost cells of a level just written are put on before the next step reads them
        for name in sim.levels:
            sim._fill(name, sim._slot((name, 0)), sim.t)
    for name in a.levels:
        np.testing.assert_array_equal(cp.asnumpy(a._slot((name, 0))), cp.asnumpy(b._slot((name, 0))), err_msg=name)
    a.step(1)  # a single step after a pair reads what the pair left
    b.step(1)
    for name in p.analysis.written:
        np.testing.assert_array_equal(cp.asnumpy(a.fields[name]), cp.asnumpy(b.fields[name]), err_msg=name)
    ref = sf.run(p, backend=NumpyBackend(), steps=a.step_count).fields
    dtype = p.grid.dtype.name
    close({k: cp.asnumpy(v) for k, v in a.fields.items() if k in ref}, {k: ref[k] for k in p.analysis.written}, dtype,
          a.step_count)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms, terms, walls, st.sampled_from(["none", "tanh", "min", "where", "abs"]),
       st.sampled_from(["float32", "float64"]), st.tuples(st.integers(5, 80), st.integers(5, 140)))
def test_generated_equations_two_steps_in_one_pass(u_terms, v_terms, wall, fn, dtype, shape):
    p = _random_problem(u_terms, v_terms, wall, fn, dtype, shape)
    a, b = _pair_then_single(p, 2)
    for name in p.analysis.written:
        np.testing.assert_array_equal(cp.asnumpy(a._slot((name, 0))), cp.asnumpy(b._slot((name, 0))), err_msg=name)


def test_the_loop_takes_two_step_passes_on_the_gpu():
    p = gray_scott(shape=(64, 48), dtype="float32")
    paired = sf.run(p, backend="cuda", steps=31)
    single = sf.run(p, backend="cuda", steps=31, check_every=1)  # looked at every step: one step per pass
    assert paired.summary["steps_per_pass"] == 2 and single.summary["steps_per_pass"] == 1
    for name in ("u", "v"):
        np.testing.assert_array_equal(cp.asnumpy(paired.fields[name]), cp.asnumpy(single.fields[name]))


class _RowsAlongY(CudaBackend):
    """The GPU backend computing rows along y in 3D whatever the pass reads."""

    def equation_pass(self, p, lattice, constants, images=None, **kw):
        return super().equation_pass(p, lattice, constants, images, block=(128, 2))


@pytest.mark.parametrize("shape", [(37, 13, 70), (3, 5, 33)])
def test_planes_per_thread_equal_rows_along_y(shape):
    """A 3D pass reading two fields above and below: bitwise, ghost cells included, odd plane counts."""
    grid = sf.Grid(shape, spacing=1.0, dtype="float32")
    u, v = sf.Field("u", grid), sf.Field("v", grid)
    uvv = u * v * v
    p = sf.Problem([sf.Eq(u.next, u + 0.1 * (u[1, 0, 0] + u[-1, 0, 0] + u[0, 1, -1] - 3 * u) - uvv),
                    sf.Eq(v.next, v + 0.05 * sf.laplacian(v) + uvv - 0.1 * v)],
                   initial={u: 1 - 0.5 * sf.sin(0.3 * grid.x) * sf.cos(0.2 * grid.y), v: 0.25 + 0.1 * sf.sin(0.2 * grid.z)},
                   boundary={u: sf.Periodic(), v: sf.Neumann()}, dt=0.1)
    a, b = sf.Simulation(p, CUDA), sf.Simulation(p, _RowsAlongY())
    for sim in (a, b):
        for levels in sim.levels.values():
            levels[-1][sim.lattice.interior] = cp.nan
        sim.step(5)
    for slot, arr in a.arrays().items():
        np.testing.assert_array_equal(cp.asnumpy(arr), cp.asnumpy(b.arrays()[slot]), err_msg=slot)
    ref = sf.run(p, backend=NumpyBackend(), steps=5).fields
    close({n: cp.asnumpy(a.fields[n]) for n in ("u", "v")}, ref, "float32", 5)


@pytest.mark.parametrize("ndim,storage", [(1, None), (2, None), (3, None), (2, "float16"), (3, "float16")])
def test_a_pass_on_a_block_reads_the_blocks_global_coordinates(ndim, storage):
    """A decomposed rank's block, its first point away from the grid's: x, y and z are those of the block's
    global points, as the oracle forms them (the kernels once formed them from the block's local indices,
    which only GPU ranks past the first showed); float16 storage takes the word-per-thread kernel."""
    from stencilforge.distributed import BlockGrid

    dtype = "float32" if storage else "float64"
    grid = sf.Grid((40, 30, 50)[:ndim], extent=(1.0, 0.8, 1.3)[:ndim], dtype=dtype)
    u = sf.Field("u", grid, storage=storage or dtype)
    forcing = sum((a + 1) * c for a, c in enumerate(grid.coordinates)) + sf.sin(3 * grid.coordinates[-1])
    p = sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u) + 0.5 * forcing)], boundary={u: sf.Periodic()}, dt=0.1)
    (pas,) = p.analysis.passes
    block = BlockGrid((6, 10, 12)[:ndim], grid.spacing, np.dtype(dtype), p.analysis.ghost, grid.origin,
                      start=(17, 9, 21)[:ndim])
    rng = np.random.default_rng(ndim)
    stored = np.float16 if storage else np.dtype(dtype)
    host = {"u": rng.random(block.padded_shape).astype(stored), "u_next": np.full(block.padded_shape, np.nan, stored)}
    pass_kernel(pas, block)(host, {}, 0.25)
    device = {k: cp.asarray(v) for k, v in host.items() if k == "u"}
    device["u_next"] = cp.full(block.padded_shape, cp.nan, stored)
    CUDA.equation_pass(pas, block, p.constants)(device, {}, 0.25)
    got, want = (np.asarray(a["u_next"][block.interior], np.float64) for a in ({"u_next": cp.asnumpy(device["u_next"])}, host))
    tolerance = 2.0**-10 if storage else 64 * UNIT[dtype]
    assert np.isfinite(got).all() and np.allclose(got, want, rtol=tolerance, atol=tolerance * 4), float(np.abs(got - want).max())


def test_a_1d_linear_equation_runs_on_cuda_as_generated_passes():
    """One linear equation in 1D lowers to a sweep, which the CUDA schedules do not take (2D and 3D): `sf.run`
    steps it as a generated pass instead of refusing it."""
    p, _ = heat((101,), dtype="float64")
    got = sf.run(p, backend="cuda", steps=10)
    ref = sf.run(p, backend=NumpyBackend(), steps=10)
    assert got.summary["sweeps"] == {} and list(ref.summary["sweeps"]) == ["u_next"]
    close({k: cp.asnumpy(v) for k, v in got.fields.items()}, ref.fields, "float64", 10)


def test_walls_per_side_on_cuda_match_numpy():
    """Inflow at one end of x, outflow at the other, periodic in y (`test_boundary.channel`), NaN-poisoned."""
    from test_boundary import channel

    p = channel(shape=(37, 101))
    ref = sf.run(p, backend=NumpyBackend(), steps=40).fields
    close(poisoned_run(p, 40), ref, "float64", 40)


@pytest.mark.parametrize("shape", [(37, 101), (50,)])
def test_strategy_generated_runs_a_linear_pass_as_its_generated_kernel(shape):
    """`--strategy generated` (the registry's generic printer) gives what `generated=True` gives, bit for bit; auto
    runs the 2D pass as a sweep and the 1D one, which no sweep schedule takes, as a generated pass."""
    grid = sf.Grid(shape, extent=1.0)
    u = sf.Field("u", grid)
    problem = sf.Problem([sf.Eq(u.next, u + 0.1 * min(grid.spacing) ** 2 * sf.laplacian(u))], initial={u: sf.sin(3.0 * grid.x) + grid.x},
                         boundary={u: sf.Dirichlet(0.0)}, dt=1e-3, steps=7, name="heat")
    asked = sf.run(problem, backend=CudaBackend(strategy="generated"))
    flag = sf.run(problem, backend="cuda", generated=True)
    auto = sf.run(problem, backend="cuda")
    assert asked.summary["sweeps"] == {} and bool(auto.summary["sweeps"]) == (len(shape) == 2)
    np.testing.assert_array_equal(cp.asnumpy(cp.asarray(asked.fields["u"])), cp.asnumpy(cp.asarray(flag.fields["u"])))
    oracle = sf.run(problem, backend="numpy").fields["u"]
    np.testing.assert_allclose(cp.asnumpy(cp.asarray(asked.fields["u"])), oracle, rtol=0, atol=1e-13)
