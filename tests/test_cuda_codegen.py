"""CUDA code generation without a GPU: every variant compiles for sm_90, errors are clear.

Compiles through NVRTC from cuda-bindings and the nvidia-cuda-nvrtc wheel,
which need no driver, so CI (no GPU) catches a generator change that breaks
any problem x strategy x dtype x radius.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import stencilforge as sf
from stencilforge import problems
from stencilforge.backends.cuda import choose, codegen
from stencilforge.backends.cuda.compile import cache_key, cached_cubin, compile_cubin
from stencilforge.backends.cuda.kernel import ARCH_LIMITS, FLAT_CELLS, HOPPER, Limits, literal, module_source
from stencilforge.backends.cuda.schedules.fused import PAIR_TILE, fused_applicable, fused_sweep
from stencilforge.backends.cuda.schedules.pipelined import MAX_AHEAD, pipelined_sweep
from stencilforge.backends.cuda.schedules.streaming_vec import vector_width
from stencilforge.backends.cuda.tune import fused_choice
from stencilforge.errors import StencilforgeError
from stencilforge.plan import AxisOperator, Sweep, Term
from stencilforge.problems import derivatives as deriv, poisson2d
from stencilforge.sources import problem_source
from stencilforge.stencil import Stencil

ARCH = "sm_90"
DTYPES = ("float32", "float64")


def _variants():
    """(id, linear step) for every configuration the CLI can build of the problems whose step is one sweep."""
    out = [(name, problems.linear_step(name)) for name in ("poisson2d", "heat2d", "heat3d")]
    out += [(f"wave3d-r{r}", problems.linear_step("wave3d", shape=(17, 17, 17), radius=r)) for r in range(1, 9)]
    return out


def _operators():
    ops = []
    for axis in (0, 1):
        for acc in deriv.ACCURACIES:
            for orders in ((1, 2), (1,), (2,)):
                ops.append((f"axis{axis}-acc{acc}-d{''.join(map(str, orders))}", deriv.operator(axis, 0.01, acc, orders)))
    return ops


def heat3d_r2() -> Sweep:
    """A 3D star sweep of radius 2 (the widest the 3D fused pair takes)."""
    return Sweep("u_new", (Term("u", Stencil.identity(3) + Stencil.laplacian(3, 2, (0.1, 0.1, 0.1)).scaled(1e-3)),))


def _modules():
    """One translation unit per (plan, dtype) holding every strategy's kernel: fewer NVRTC calls."""
    mods = []
    for vid, step in _variants():
        for dt in DTYPES:
            ks = [codegen.sweep_kernel(step.sweep, s, dt) for s in codegen.applicable_strategies(step.sweep, dt)]
            mods.append((f"{vid}-{dt}", module_source(ks, dt, vid)))
    for dt in DTYPES:
        pairs = []
        for r in range(1, 9):
            sweep = poisson2d.jacobi_sweep(Stencil.laplacian(2, r, (0.01, 0.02)), with_rhs=True)
            pairs.append(fused_sweep(sweep, dt, PAIR_TILE[2], f"sf_pair_r{r}"))
        pairs.append(fused_sweep(problems.linear_step("heat2d").sweep, dt, (3, 64), "sf_pair_heat2d"))
        for name, steps, tile in (("heat2d", 5, (16, 128)), ("poisson2d", 3, (5, 96))):  # auto's five steps; an odd tile
            blocks = fused_choice(problems.linear_step(name).sweep, dt)[2] if steps == 5 else None
            pairs.append(fused_sweep(problems.linear_step(name).sweep, dt, tile, f"sf_fused{steps}_{name}", steps, min_blocks=blocks))
        pairs.append(fused_sweep(problems.linear_step("heat3d").sweep, dt, PAIR_TILE[3], "sf_pair_heat3d"))
        pairs.append(fused_sweep(heat3d_r2(), dt, (5, 3, 64), "sf_pair_3d_r2"))
        mods.append((f"fused-r1..8-{dt}", module_source(pairs, dt, "fused steps")))
    for vid, op in _operators():
        for dt in DTYPES:
            ks = [codegen.operator_kernel(op, s, dt) for s in codegen.applicable_strategies(op, dt)]
            mods.append((f"{vid}-{dt}", module_source(ks, dt, vid)))
    return mods


MODULES = _modules()


@pytest.mark.parametrize("vid,source", MODULES, ids=[m[0] for m in MODULES])
def test_every_variant_compiles_for_sm90(nvrtc, vid, source):
    cubin = compile_cubin(source, ARCH, vid)
    assert cubin[:4] == b"\x7fELF"


def test_compile_error_names_kernel_and_strategy(nvrtc):
    bad = "typedef float real;\nextern \"C\" __global__ void k(real* a) { a[0] = undefined_name; }\n"
    with pytest.raises(StencilforgeError, match=r"kernel k \(strategy tiled\).*undefined_name") as info:
        compile_cubin(bad, ARCH, "kernel k (strategy tiled)")
    assert "\n" not in str(info.value)


def test_disk_cache_is_keyed_and_reused(nvrtc, tmp_path, monkeypatch):
    monkeypatch.setenv("STENCILFORGE_CACHE_DIR", str(tmp_path))
    source = MODULES[0][1]
    path = cached_cubin(source, ARCH, "first")
    assert path.parent == tmp_path / "cuda" and path.exists()
    stamp = path.stat().st_mtime_ns
    assert cached_cubin(source, ARCH, "again") == path
    assert path.stat().st_mtime_ns == stamp
    assert cached_cubin(source, "sm_80", "other arch") != path


def test_cache_key_covers_source_arch_and_compiler():
    keys = {
        cache_key("a", "sm_90", (13, 0)),
        cache_key("b", "sm_90", (13, 0)),
        cache_key("a", "sm_80", (13, 0)),
        cache_key("a", "sm_90", (13, 1)),
    }
    assert len(keys) == 4


# ---------------------------------------------------------------- no compiler needed


@pytest.mark.parametrize("name", problems.NAMES)
@pytest.mark.parametrize("strategy", ["auto", "naive", "rows", "tiled", "streaming", "pipelined", "pencil"])
def test_kernel_source_without_gpu(name, strategy):
    problem = problems.problem(name)[0]
    derivatives = name == "derivatives"  # one-sided derivatives: the axis operator's kernels
    applies = (strategy in ("auto", "naive", "rows", "pencil")) if derivatives else strategy != "pencil"
    if not applies:
        with pytest.raises(StencilforgeError, match="does not apply"):
            problem_source(problem, "cuda", strategy)
        return
    src = problem_source(problem, "cuda", strategy)
    assert "__global__" in src and "typedef" in src
    assert ("one-sided derivatives of u" if derivatives else ": u_next, a sweep, strategy") in src
    if strategy != "auto":
        assert f"strategy {strategy}," in src


def test_unknown_strategy_is_refused():
    with pytest.raises(StencilforgeError, match=r"--strategy chooses among the CUDA schedules \(naive, .*\) of a linear pass"):
        problem_source(problems.problem("heat2d")[0], "cuda", "warp")


def _auto_choices():
    """(id, dtype, plan, strategy, tile) that auto picks for every plan the CLI builds, a stencil without its
    centre cell, a 3D radius-2 star and a 27-point box, on a small and a large interior in each dtype."""
    box = Stencil.from_dict({(i, j, k): 1.0 for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)})
    plans = [(vid, step.sweep) for vid, step in _variants()] + _operators()
    plans += [
        ("laplace-no-centre", poisson2d.jacobi_sweep(Stencil.laplacian(2, 1, (0.1, 0.1)), with_rhs=False)),
        ("heat3d-r2", heat3d_r2()),
        ("box27", Sweep("o", (Term("u", box),))),
    ]
    shapes = {2: ((64, 96), (16384, 16384)), 3: ((24, 32, 40), (512, 512, 512))}
    return [
        (f"{vid}-{dt}-{'x'.join(map(str, shape))}", dt, plan, *choose(plan, shape, np.dtype(dt)))
        for dt in DTYPES
        for vid, plan in plans
        for shape in shapes[plan.ndim]
    ]


def _kernel(plan, strategy: str, dtype: str, tile):
    build = codegen.operator_kernel if isinstance(plan, AxisOperator) else codegen.sweep_kernel
    return build(plan, strategy, dtype, tile)


def test_auto_picks_an_applicable_strategy_that_builds_with_its_tile():
    for cid, dtype, plan, strategy, tile in _auto_choices():
        assert strategy in codegen.applicable_strategies(plan, dtype), cid
        assert _kernel(plan, strategy, dtype, tile).tile == tuple(tile), cid


def test_auto_choices_compile_for_sm90(nvrtc):
    for dtype in DTYPES:
        kernels = {}
        for _, dt, plan, strategy, tile in _auto_choices():
            if dt == dtype:
                k = _kernel(plan, strategy, dtype, tile)
                name = f"sf_auto_{len(kernels)}"
                kernels.setdefault(k.source, dataclasses.replace(k, name=name, source=k.source.replace(f" {k.name}(", f" {name}(")))
        cubin = compile_cubin(module_source(list(kernels.values()), dtype, f"auto choices, {dtype}"), ARCH, "auto choices")
        assert cubin[:4] == b"\x7fELF"


def test_rows_vec_is_along_x_only():
    with pytest.raises(StencilforgeError, match="rows_vec applies to derivatives along x"):
        codegen.operator_kernel(deriv.operator(0, 0.01, 4, (1,)), "rows_vec", np.float64)
    d1 = deriv.operator(1, 0.01, 4, (1,))
    assert "rows_vec" in codegen.applicable_strategies(d1, np.float64)
    kernel = codegen.operator_kernel(d1, "rows_vec", np.float32)
    assert kernel.vector == 4 and kernel.cover == (1, 1024) and "make_float4(" in kernel.source
    assert codegen.operator_kernel(d1, "rows_vec", np.float64).vector == 2


def test_flat_operator_launches_one_block_row_over_every_cell_below_its_cell_limit():
    kernel = codegen.operator_kernel(deriv.operator(1, 0.01, 4, (1, 2)), "flat", np.float64)
    assert kernel.flat and kernel.block == (128, 1, 1) and kernel.grid((7, 300)) == (17, 1, 1)
    assert "const double inv_n1" in kernel.source
    assert kernel.fits((7, 300)) and kernel.fits((2**16 - 1, 2**15)) and not kernel.fits((2**16, 2**15))  # 2^31 cells: rows runs
    vec = codegen.operator_kernel(deriv.operator(1, 0.01, 4, (1,)), "rows_vec", np.float64)
    assert vec.fits((3, 1000)) and not vec.fits((3, 1001))
    with pytest.raises(StencilforgeError, match="flat needs a tile of 1 positive integers"):
        codegen.operator_kernel(deriv.operator(1, 0.01, 4, (1,)), "flat", np.float64, (1, 128))


def test_flat_row_index_needs_one_correction_step_below_its_cell_limit():
    """The kernel's row index: trunc(c * fl(1 / n1)) in double is within one of c // n1 for every
    c < FLAT_CELLS, so its single correction step gives the exact quotient."""
    rng = np.random.default_rng(7)
    n1 = np.concatenate([np.arange(1, 4000), rng.integers(4000, 2**31, 20000), 2 ** np.arange(31), [3, 10000, 46341]])
    for c in (rng.integers(0, FLAT_CELLS, n1.size), FLAT_CELLS - 1 - rng.integers(0, 1000, n1.size)):
        n = n1.astype(np.int64)
        c = (c // n) * n + rng.integers(-1, 2, n.size)  # near multiples of n1 too, where truncation is closest to wrong
        c = np.clip(c, 0, FLAT_CELLS - 1)
        q = np.trunc(c.astype(np.float64) * (1.0 / n1.astype(np.float64))).astype(np.int64)
        assert (np.abs(q - c // n) <= 1).all()


def test_rows_vec_applies_to_sweeps_whose_x_neighbours_lie_in_the_cells_row():
    heat3d, heat2d = problems.linear_step("heat3d", shape=(9, 9, 9)).sweep, problems.linear_step("heat2d", shape=(9, 9)).sweep
    assert "rows_vec" in codegen.applicable_strategies(heat3d, np.float32)
    assert "rows_vec" in codegen.applicable_strategies(heat2d, np.float32)
    for box in ({(0, 1, 1): 1.0, (0, 0, 0): 1.0}, {(1, -1): 1.0, (0, 0): 1.0}):
        off_row = Sweep("o", (Term("u", Stencil.from_dict(box)),))
        assert "rows_vec" not in codegen.applicable_strategies(off_row, np.float32)
        with pytest.raises(StencilforgeError, match="rows_vec needs a sweep whose x neighbours"):
            codegen.sweep_kernel(off_row, "rows_vec", np.float32)
    assert codegen.sweep_kernel(heat3d, "rows_vec", np.float32).vector == 4
    assert codegen.sweep_kernel(heat2d, "rows_vec", np.float64).vector == 2


def test_auto_takes_rows_vec_only_where_it_was_measured():
    """float32 one-field 3D sweeps of radius 1 (heat3d); float64, two fields and wider stencils keep rows."""
    picks = {(name, dt, r): choose(problems.linear_step(name, shape=(20, 20, 20), dtype=dt, **({"radius": r} if r else {})).sweep,
                                   (512, 512, 512), dt)[0]
             for name, r in (("heat3d", 0), ("poisson3d", 0), ("wave3d", 2)) for dt in ("float32", "float64")}
    assert picks == {("heat3d", "float32", 0): "rows_vec", ("heat3d", "float64", 0): "rows", ("poisson3d", "float32", 0): "rows",
                     ("poisson3d", "float64", 0): "rows", ("wave3d", "float32", 2): "rows", ("wave3d", "float64", 2): "rows"}


def test_auto_takes_rows_vec_for_float32_2d_stars_in_a_tile_for_the_devices_bandwidth_per_sm():
    from stencilforge.backends.cuda.facts import DeviceFacts

    h100, h200 = DeviceFacts("NVIDIA H100 80GB HBM3", 132, 3013.0), DeviceFacts("NVIDIA H200", 132, 4254.0)
    for name in ("heat2d", "poisson2d"):
        sweep = problems.linear_step(name, shape=(64, 64), dtype="float32").sweep
        assert choose(sweep, (16384, 16384), "float32", facts=h100) == ("rows_vec", (1, 128))
        assert choose(sweep, (16384, 16384), "float32", facts=h200) == ("rows_vec", (4, 128))
        assert choose(sweep, (16384, 16384), "float32") == ("rows_vec", (1, 128))  # no device: the default tile
        assert choose(problems.linear_step(name, shape=(64, 64), dtype="float64").sweep, (16384, 16384), "float64")[0] == "rows"
    laplace = poisson2d.jacobi_sweep(Stencil.laplacian(2, 1, (0.01, 0.01)), with_rhs=False)  # one field, no centre
    assert choose(laplace, (16384, 16384), "float32", facts=h100) == ("rows", (4, 512))
    assert choose(laplace, (16384, 16384), "float32", facts=h200) == ("rows_vec", (4, 128))


def test_streaming_refuses_off_column_offsets():
    box = Stencil.from_dict({(1, 1): 1.0, (0, 0): 1.0})
    with pytest.raises(StencilforgeError, match="streaming needs"):
        codegen.sweep_kernel(Sweep("o", (Term("u", box),)), "streaming", np.float32)


@pytest.mark.parametrize(
    "strategy,tile,match",
    [
        ("naive", (2, 64, 64), "threads per block"),
        ("tiled", (8, 8), "needs a tile of 3"),
        ("tiled", (1, 2, 3, 4), "needs a tile of 3"),
        ("tiled", (0, 8, 32), "positive"),
        ("streaming", (8, 64, 64), "threads per block"),
        ("pipelined", (8, 64, 64), "threads per block"),
        ("pipelined", (64, 8), "needs a tile of 3"),
        ("streaming_vec", (8, 16, 512), "threads per block"),
    ],
)
def test_tile_validation(strategy, tile, match):
    """A tile is checked against a schedule that applies (streaming_vec: to wave3d r2, whose x radius is even)."""
    sweep = problems.linear_step("wave3d", shape=(17, 17, 17), radius=2).sweep if strategy == "streaming_vec" else \
        problems.linear_step("heat3d").sweep
    with pytest.raises(StencilforgeError, match=match):
        codegen.sweep_kernel(sweep, strategy, np.float32, tile)


@pytest.mark.parametrize(
    "radius,dtype,width", [(8, "float32", 4), (6, "float32", 2), (4, "float64", 2), (2, "float32", 2), (3, "float32", 0)]
)
def test_vector_width_divides_the_x_radius(radius, dtype, width):
    """4 floats or 2 doubles (16 bytes) where the x radius allows, so halo chunks never straddle a vector."""
    wave = problems.linear_step("wave3d", shape=(17, 17, 17), radius=radius).sweep
    assert vector_width(wave, dtype) == width
    if not width:
        with pytest.raises(StencilforgeError, match="streaming_vec needs a 3D sweep with an even x radius"):
            codegen.sweep_kernel(wave, "streaming_vec", dtype)
        return
    kernel = codegen.sweep_kernel(wave, "streaming_vec", dtype, (256, 4, 128))
    assert kernel.vector == width and kernel.block == (128 // width, 4, 1) and kernel.cover == (256, 4, 128)
    vt = {("float32", 4): "float4", ("float32", 2): "float2", ("float64", 2): "double2"}[(dtype, width)]
    assert f"__shared__ {vt} s_u" in kernel.source and f"make_{vt}(r0, " in kernel.source


def test_applicable_strategies_drop_the_vector_ones_where_no_vector_fits():
    wave8, wave3 = (problems.linear_step("wave3d", shape=(17, 17, 17), radius=r).sweep for r in (8, 3))
    assert "streaming_vec" in codegen.applicable_strategies(wave8, "float64")
    assert "streaming_vec" not in codegen.applicable_strategies(wave3, "float32")
    assert "streaming_vec" not in codegen.applicable_strategies(problems.linear_step("heat2d").sweep, "float32")
    assert "rows_vec" in codegen.applicable_strategies(deriv.operator(1, 0.01, 4, (1,)), "float64")
    assert codegen.applicable_strategies(deriv.operator(0, 0.01, 4, (1,)), "float64") == ("naive", "flat", "rows", "pencil")
    for plan in (wave8, wave3, deriv.operator(0, 0.01, 2, (1, 2))):  # every one offered generates
        for s in codegen.applicable_strategies(plan, "float32"):
            (codegen.operator_kernel if isinstance(plan, AxisOperator) else codegen.sweep_kernel)(plan, s, "float32")


def test_streaming_vec_refuses_what_it_cannot_vectorise():
    wave = problems.linear_step("wave3d", shape=(17, 17, 17), radius=8).sweep
    with pytest.raises(StencilforgeError, match="x extent is a multiple of 4"):
        codegen.sweep_kernel(wave, "streaming_vec", np.float32, (64, 4, 66))
    for plan in (problems.linear_step("heat3d").sweep, problems.linear_step("heat2d").sweep):
        with pytest.raises(StencilforgeError, match="streaming_vec needs a 3D sweep with an even x radius"):
            codegen.sweep_kernel(plan, "streaming_vec", np.float32)


def test_shared_memory_limit_is_checked():
    wave = problems.linear_step("wave3d", shape=(17, 17, 17), radius=8).sweep
    with pytest.raises(StencilforgeError, match="shared memory"):
        codegen.sweep_kernel(wave, "tiled", np.float64, (1, 1, 1024))
    with pytest.raises(StencilforgeError, match="strategy pipelined with tile .* shared memory"):
        codegen.sweep_kernel(wave, "pipelined", np.float64, (64, 1, 1024))


@pytest.mark.parametrize("name,params", [("heat3d", {}), ("heat2d", {}), ("wave3d", {"radius": 8})])
@pytest.mark.parametrize("dtype", DTYPES)
def test_pipelined_ring_fits_and_waits_for_its_depth(name, params, dtype):
    """Default depth: at least 1 plane in flight, the ring within the opt-in limit, one wait per plane."""
    sweep = problems.linear_step(name, **params).sweep
    kernel = codegen.sweep_kernel(sweep, "pipelined", dtype)
    ahead = int(re.search(r"(\d+) planes in flight", kernel.source).group(1))
    assert 1 <= ahead <= MAX_AHEAD
    assert 0 < kernel.dynamic_smem <= HOPPER.smem_per_block
    assert f"cp.async.wait_group {ahead - 1};" in kernel.source
    assert kernel.source.count("cp.async.wait_group") == kernel.source.count("__syncthreads();")


@pytest.mark.parametrize("name,params", [("heat3d", {}), ("heat2d", {}), ("wave3d", {"radius": 8}), ("wave3d", {"radius": 4})])
@pytest.mark.parametrize("dtype", DTYPES)
def test_shared_memory_plans_within_the_architectures_limits(nvrtc, name, params, dtype):
    """A ring or tile sized for a Hopper must not ask an Ampere (163 KB per block) for more than it has:
    `pipelined` takes a shallower ring there, and each kernel compiles for its architecture."""
    sweep = problems.linear_step(name, **params).sweep
    for arch, limits in ARCH_LIMITS.items():
        kernel = codegen.sweep_kernel(sweep, "pipelined", dtype, limits=limits)
        assert 0 < kernel.dynamic_smem <= limits.smem_per_block
        compile_cubin(module_source([kernel], dtype, "limits"), arch, f"{name} pipelined for {arch}")
    rings = {arch: codegen.sweep_kernel(sweep, "pipelined", dtype, limits=limits).dynamic_smem for arch, limits in ARCH_LIMITS.items()}
    assert rings["sm_80"] <= rings["sm_90"]


def test_a_ring_deeper_than_a_smaller_device_allows_is_cut_to_fit():
    """wave3d r8 on tiles whose Hopper ring an A100 cannot hold: float32 on 16 x 32 gets a shallower
    ring there; float64 on 8 x 64 fits no depth and is refused, as is a `tiled` box over the limit."""
    wave = problems.linear_step("wave3d", shape=(17, 17, 17), radius=8).sweep
    ampere = ARCH_LIMITS["sm_80"]
    deep = pipelined_sweep(wave, np.float32, (64, 16, 32), "k", HOPPER)
    cut = pipelined_sweep(wave, np.float32, (64, 16, 32), "k", ampere)
    assert cut.dynamic_smem < deep.dynamic_smem
    assert int(re.search(r"(\d+) planes in flight", cut.source).group(1)) < int(re.search(r"(\d+) planes in flight", deep.source).group(1))
    assert pipelined_sweep(wave, np.float64, (64, 8, 64), "k", HOPPER).dynamic_smem > ampere.smem_per_block
    with pytest.raises(StencilforgeError, match=f"limit {ampere.smem_per_block}"):
        codegen.sweep_kernel(wave, "pipelined", np.float64, (64, 8, 64), limits=ampere)
    assert ampere.smem_per_block < codegen.sweep_kernel(wave, "tiled", np.float64, (1, 4, 64), limits=HOPPER).dynamic_smem
    with pytest.raises(StencilforgeError, match=f"limit {ampere.smem_per_block}"):
        codegen.sweep_kernel(wave, "tiled", np.float64, (1, 4, 64), limits=ampere)


def test_limits_are_read_from_the_device():
    """The backend asks the runtime for cudaDevAttrMaxSharedMemoryPerBlockOptin (97), ...PerMultiprocessor
    (81) and cudaDevAttrReservedSharedMemoryPerBlock (111) of the current device."""
    asked = []

    class Runtime:
        @staticmethod
        def deviceGetAttribute(attr, device):
            asked.append((attr, device))
            return {97: 101376, 81: 102400, 111: 1024}[attr]

    class Cuda:
        runtime = Runtime

        class Device:
            id = 3

    class CuPy:
        cuda = Cuda

    assert Limits.of_device(CuPy) == Limits(101376, 102400, 1024)
    assert asked == [(97, 3), (81, 3), (111, 3)]


def test_pipelined_depth_is_explicit_or_refused():
    wave = problems.linear_step("wave3d", shape=(17, 17, 17), radius=8).sweep
    one = pipelined_sweep(wave, np.float32, (64, 16, 32), "k", HOPPER, ahead=1)
    four = pipelined_sweep(wave, np.float32, (64, 16, 32), "k", HOPPER, ahead=4)
    box, tile = 32 * 48, 16 * 32  # radius-8 in-plane halo around 16 x 32; u_prev and vel are pointwise
    assert one.dynamic_smem == (10 * box + 2 * 2 * tile) * 4
    assert four.dynamic_smem == (13 * box + 5 * 2 * tile) * 4
    with pytest.raises(StencilforgeError, match="at least 1 plane in flight"):
        pipelined_sweep(wave, np.float32, (64, 16, 32), "k", HOPPER, ahead=0)


@pytest.mark.parametrize("value", [0.1, -1 / 3, 1e-30, 12345.678, 2.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_literals_round_trip_to_the_oracle_value(value, dtype):
    text = literal(value, dtype).rstrip("f")
    assert dtype(float(text)) == dtype(value)


def test_grid_covers_awkward_shapes():
    sweep = problems.linear_step("heat3d").sweep
    k = codegen.sweep_kernel(sweep, "streaming", np.float32, (64, 16, 32))
    assert k.grid((129, 67, 255)) == (8, 5, 3)
    k = codegen.sweep_kernel(sweep, "naive", np.float32, (2, 4, 32))
    assert k.grid((1, 1, 1)) == (1, 1, 1)
    k = codegen.sweep_kernel(sweep, "pipelined", np.float32, (64, 16, 32))
    assert k.grid((129, 67, 255)) == (8, 5, 3)


@pytest.mark.parametrize("strategy", ["naive", "pencil"])
@pytest.mark.parametrize("axis", [0, 1])
def test_fused_derivatives_are_one_kernel_writing_both_outputs(strategy, axis):
    op = deriv.operator(axis, 0.01, 2, (1, 2))
    kernel = codegen.operator_kernel(op, strategy, np.float64)
    assert kernel.args == ("u", "d1", "d2")
    assert kernel.source.count("__global__") == 1
    assert "f_d1[c] =" in kernel.source and "f_d2[c] =" in kernel.source


def test_fusion_refuses_what_it_cannot_fuse():
    assert fused_applicable(problems.linear_step("poisson2d").sweep) is None
    assert fused_applicable(problems.linear_step("poisson2d").sweep, 9) is None
    assert "reaches 9 lanes" in fused_applicable(problems.linear_step("poisson2d").sweep, 10)
    assert fused_applicable(problems.linear_step("heat3d").sweep) is None
    assert "two steps per pass, not 3" in fused_applicable(problems.linear_step("heat3d").sweep, 3)
    wide3d = Sweep("o", (Term("u", Stencil.laplacian(3, 3)),))
    assert "radius up to 2" in fused_applicable(wide3d)
    box = Stencil.from_dict({(1, 1): 1.0, (0, 0): 1.0})
    assert "star" in fused_applicable(Sweep("o", (Term("u", box),)))
    two = Sweep("o", (Term("u", Stencil.laplacian(2)), Term("v", Stencil.laplacian(2))))
    assert "exactly one field" in fused_applicable(two)
    with pytest.raises(StencilforgeError, match="whole warps"):
        fused_sweep(problems.linear_step("poisson2d").sweep, np.float32, (4, 100), "k")
    with pytest.raises(StencilforgeError, match="needs 3 positive sizes"):
        fused_sweep(problems.linear_step("heat3d").sweep, np.float32, (8, 256), "k")


def test_fused_grid_counts_the_useful_lanes():
    k = fused_sweep(problems.linear_step("poisson2d").sweep, np.float32, (8, 256), "k")
    assert k.cover == (8, 8 * 30) and k.grid((1000, 1537)) == (7, 125, 1)
    k4 = fused_sweep(problems.linear_step("poisson2d").sweep, np.float32, (8, 256), "k", 4)
    assert k4.cover == (8, 8 * 26) and k4.args[-2:] == ("_walls2", "_walls3") and k4.strategy == "rows, 4 steps"
    k3 = fused_sweep(problems.linear_step("heat3d").sweep, np.float32, (64, 8, 128), "k")  # 4 warps along y
    assert k3.block == (32, 4, 1) and k3.cover == (64, 32, 30) and k3.grid((129, 67, 255)) == (9, 3, 3)


def test_fused_steps_follow_the_measured_rule():
    from stencilforge.backends.cuda.tune import FUSED_2D_R1, FUSED_2D_R1_BLOCKS, fused_choice

    for name in ("heat2d", "poisson2d"):
        sweep = problems.linear_step(name).sweep
        for dtype in (np.float32, np.float64):
            steps, tile, blocks = fused_choice(sweep, dtype)
            assert (steps, tile) == FUSED_2D_R1 and blocks == FUSED_2D_R1_BLOCKS[np.dtype(dtype).itemsize]
            kernel = fused_sweep(sweep, dtype, tile, "k", steps, min_blocks=blocks)
            assert kernel.strategy == f"rows, {steps} steps" and f"__launch_bounds__({tile[1]}, {blocks})" in kernel.source
    assert fused_choice(Sweep("o", (Term("u", Stencil.laplacian(2, 2)),))) == (2, PAIR_TILE[2], None)
    assert fused_choice(problems.linear_step("heat3d").sweep) == (2, PAIR_TILE[3], None)


@pytest.mark.parametrize("ndim", [2, 3])
def test_every_offered_strategy_builds_a_box_stencil(ndim):
    """applicable_strategies offers only what sweep_kernel builds (the 9-point box cannot march)."""
    from fractions import Fraction

    w = {(0, 0): Fraction(-10, 3)}
    w.update({o: Fraction(2, 3) for o in ((1, 0), (-1, 0), (0, 1), (0, -1))})
    w.update({o: Fraction(1, 6) for o in ((1, 1), (1, -1), (-1, 1), (-1, -1))})
    st = Stencil.from_dict(w if ndim == 2 else {(0,) + o: c for o, c in w.items()})
    sweep = Sweep("u_new", (Term("u", st),))
    for dtype in (np.dtype(np.float32), np.dtype(np.float64)):
        offered = codegen.applicable_strategies(sweep, dtype)
        assert "naive" in offered and "rows" in offered
        for strategy in offered:
            assert codegen.sweep_kernel(sweep, strategy, dtype).source


@pytest.mark.parametrize("bad", [dict(factor=("v", "v")), dict(field=3), dict(factor="not a name"), dict(stencil={(0, 0): 1})])
def test_terms_refuse_what_no_backend_can_run(bad):
    args = dict(field="u", stencil=Stencil.identity(2), factor=None)
    args.update(bad)
    with pytest.raises(StencilforgeError):
        Term(**args)


def _linear_heat(shape) -> sf.Problem:
    grid = sf.Grid(shape, extent=1.0)
    u = sf.Field("u", grid)
    return sf.Problem([sf.Eq(u.next, u + 0.1 * min(grid.spacing) ** 2 * sf.laplacian(u))], initial={u: sf.sin(3.0 * grid.x)},
                      boundary={u: sf.Dirichlet(0.0)}, dt=1e-3, steps=4, name=f"heat{len(shape)}d")


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_registered_schedule_builds_where_it_applies_and_says_why_where_not(dtype):
    """The registry is what applies: a schedule whose `applies` passes builds a kernel under its own name, one
    that does not is refused with the reason it gives (a 1D sweep, a box stencil, an odd radius, derivatives along y)."""
    from stencilforge.backends.cuda.schedules import OPERATORS, SWEEPS

    box = Sweep("u_new", (Term("u", Stencil.from_dict({(1, 1): 0.5, (0, 0): 0.25, (-1, 0): 0.25})),))
    line = Sweep("u_new", (Term("u", Stencil.from_dict({(-1,): 0.25, (0,): 0.5, (1,): 0.25})),))
    plans = [(step.sweep, SWEEPS) for _, step in _variants()] + [(box, SWEEPS), (line, SWEEPS)]
    plans += [(op, OPERATORS) for _, op in _operators()]
    refused = set()
    for plan, registry in plans:
        offered = codegen.applicable_strategies(plan, dtype)
        for s in registry:
            why = s.applies(plan, dtype)
            assert (why is None) == (s.name in offered), s.name
            if why is None:
                kernel = (codegen.operator_kernel if registry is OPERATORS else codegen.sweep_kernel)(plan, s.name, dtype)
                assert f" {kernel.name}(" in kernel.source and kernel.name.startswith(f"sf_{s.name}_")
                assert tuple(kernel.tile) == codegen.default_tile(plan, s.name, dtype)
            else:
                refused.add(s.name)
                with pytest.raises(StencilforgeError, match=re.escape(why)):
                    (codegen.operator_kernel if registry is OPERATORS else codegen.sweep_kernel)(plan, s.name, dtype)
    assert {"rows_vec", "streaming", "streaming_vec", "pipelined", "naive"} <= refused
    assert codegen.applicable_strategies(line, dtype) == ()


def test_a_linear_pass_is_a_sweep_where_a_schedule_applies_unless_generated_is_asked_for():
    """1D linear passes and strategy `generated` run the generated pass; a 2D linear pass runs its sweep."""
    sweep2d, heat2d = problems.linear_step("heat2d").sweep, _linear_heat((33, 40))
    assert codegen.takes_sweep(sweep2d, "float64", "auto") and codegen.takes_sweep(sweep2d, "float64", "rows")
    assert not codegen.takes_sweep(sweep2d, "float64", "generated")
    line = Sweep("u_new", (Term("u", Stencil.from_dict({(-1,): 0.25, (0,): 0.5, (1,): 0.25})),))
    assert not codegen.takes_sweep(line, "float32", "auto")
    swept, generated = problem_source(heat2d, "cuda", "auto"), problem_source(heat2d, "cuda", "generated")
    assert "u_next, a sweep, strategy" in swept and "a sweep" not in generated
    assert "__global__" in generated and "pass 1: u_next; grid" in generated
    one = problem_source(_linear_heat((50,)), "cuda", "auto")
    assert "a sweep" not in one and "pass 1: u_next; grid" in one
    with pytest.raises(StencilforgeError, match="strategy 'generated' does not apply to a derivative operator"):
        problem_source(problems.problem("derivatives")[0], "cuda", "generated")


@pytest.mark.parametrize("ctype", ["float", "double"])
def test_the_device_exact_sum_compiles_for_sm90(nvrtc, ctype):
    from stencilforge.reductions import window_source

    assert compile_cubin(window_source(ctype), ARCH, f"exact sums of {ctype}")[:4] == b"\x7fELF"
