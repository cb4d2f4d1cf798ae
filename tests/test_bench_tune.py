"""tune plumbing without a GPU: the cache's keys and versions, the search loop, the CPU refusal."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from typer.testing import CliRunner

import stencilforge as sf
from stencilforge import tuning as cache
from stencilforge.backends import available, get_backend
from stencilforge.bench.measure import MeasureOptions
from stencilforge.bench.tune import candidates, ranked, search
from stencilforge.bench.workloads import Workload, build_case
from stencilforge.cli import app
from stencilforge.errors import StencilforgeError
from stencilforge.ir.analysis import Pass
from stencilforge.tuning import cached_choice, shape_class, store_choice


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A fresh tune cache file; the Numba kernel cache under the same root is not needed by these tests."""
    monkeypatch.setenv("STENCILFORGE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def plans():
    return {
        "heat2d": build_case(Workload("heat2d", (20, 20), "float32")).plan,
        "heat3d": build_case(Workload("heat3d", (12, 12, 12), "float32")).plan,
        "fused": build_case(Workload("derivatives-fused", (20, 20), "float64")).plan,
        "wave3d": build_case(Workload("wave3d", (17, 17, 17), "float32")).plan,
    }


def test_round_trip_is_keyed_by_device_plan_shape_class_and_dtype(plans, own_cache):
    heat2d = plans["heat2d"]
    store_choice("NVIDIA H100 80GB HBM3", heat2d, (16384, 16384), "float32", "code", "streaming", (256, 256))
    assert cached_choice("NVIDIA H100 80GB HBM3", heat2d, (16384, 16384), "float32", "code") == ("streaming", (256, 256))
    assert cached_choice("NVIDIA H100 80GB HBM3", heat2d, (16000, 17000), "float32", "code") == ("streaming", (256, 256))
    assert cached_choice("NVIDIA H100 80GB HBM3", heat2d, (1024, 1024), "float32", "code") is None
    assert cached_choice("NVIDIA H100 80GB HBM3", heat2d, (16384, 16384), "float64", "code") is None
    assert cached_choice("NVIDIA H200", heat2d, (16384, 16384), "float32", "code") is None
    assert cached_choice("NVIDIA H100 80GB HBM3", plans["heat3d"], (16384, 16384), "float32", "code") is None


def test_coefficients_do_not_change_the_key_but_structure_does():
    a = build_case(Workload("heat2d", (100, 100), "float32")).plan
    b = build_case(Workload("heat2d", (4000, 4000), "float32")).plan  # other spacing, same stencil shape
    j = build_case(Workload("jacobi2d", (100, 100), "float32")).plan
    assert cache.plan_signature(a) == cache.plan_signature(b) != cache.plan_signature(j)


def test_a_winner_is_not_used_once_the_generated_code_changes(plans, own_cache, monkeypatch):
    """The key holds a digest of the kernels the plan generates: change a generator, lose the winner."""
    from stencilforge.backends.cuda import codegen
    from stencilforge.backends.cuda.tune import choose

    plan, shape = plans["heat3d"], (512, 512, 512)
    store_choice("dev", plan, shape, "float32", codegen.code_signature(plan, np.dtype("float32")), "tiled", (4, 8, 32))
    assert choose(plan, shape, np.dtype("float32"), "dev") == ("tiled", (4, 8, 32))
    from stencilforge.backends.cuda.schedules import rows

    original = rows.rows_sweep

    def changed(*args):
        kernel = original(*args)
        return dataclasses.replace(kernel, source=kernel.source + "// changed\n")

    monkeypatch.setattr(rows, "rows_sweep", changed)
    assert choose(plan, shape, np.dtype("float32"), "dev") != ("tiled", (4, 8, 32))
    assert codegen.code_signature(plans["heat2d"], np.dtype("float32")) == codegen.code_signature(
        build_case(Workload("heat2d", (4000, 4000), "float32")).plan, np.dtype("float32"))  # coefficients do not count


def test_operator_lookup_by_shape_and_a_corrupt_file(plans, own_cache):
    store_choice("dev", plans["fused"], (10000, 10000), "float64", "c", "pencil", (4, 128), {"date": "2026-01-01"})
    assert cached_choice("dev", plans["fused"], (10000, 10000), "float64", "c") == ("pencil", (4, 128))
    assert cached_choice("dev", plans["fused"], (1000, 1000), "float64", "c") is None
    cache.tune_file().write_text("{not json")
    assert cached_choice("dev", plans["fused"], (10000, 10000), "float64", "c") is None


def test_shape_class_rounds_each_axis_to_a_power_of_two():
    assert shape_class((16384, 16384)) == "16384x16384"
    assert shape_class((10000, 10000)) == "8192x8192"
    assert shape_class((512, 500, 520)) == "512x512x512"
    assert shape_class(None) == "any"


def test_candidates_cover_every_strategy_with_legal_block_sizes(plans):
    from stencilforge.backends.cuda import codegen

    scalar = tuple(s for s in codegen.SWEEP_STRATEGIES if s != "streaming_vec")  # heat's x radius 1 takes no vector
    cases = ((plans["heat2d"], scalar), (plans["heat3d"], scalar), (plans["wave3d"], codegen.SWEEP_STRATEGIES),
             (plans["fused"], codegen.OPERATOR_STRATEGIES))
    for plan, expected in cases:
        defaults, others = candidates(plan)
        cands = defaults + others
        assert {s for s, _ in cands} == set(expected)
        for s, t in cands:  # the code generator accepts every candidate, or refuses a radius-8 pipelined ring too big
            try:
                build = codegen.operator_kernel if s in codegen.OPERATOR_STRATEGIES and plan is plans["fused"] else codegen.sweep_kernel
                kernel = build(plan, s, "float32", t)
            except StencilforgeError as exc:
                assert plan is plans["wave3d"] and s == "pipelined" and "shared memory" in str(exc), (s, t, exc)
                continue
            assert kernel.block[0] * kernel.block[1] * kernel.block[2] <= codegen.MAX_THREADS
        assert all(len(t) == (1 if s == "flat" else plan.ndim) for s, t in cands)  # flat: threads per block
        assert len(set(cands)) == len(cands)


class _Garbage:
    """A backend whose sweep writes the right cells with the wrong values (a broken tile)."""

    def __init__(self):
        self.inner = get_backend("numpy")
        self.name = "numpy"

    def sweep(self, plan, grid, background=False):
        run = self.inner.sweep(plan, grid)

        def wrong(fields):
            run(fields)
            fields[plan.out][grid.interior] += 1.0

        return wrong

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_search_checks_then_sorts_by_time():
    case = build_case(Workload("heat2d", (48, 64), "float32"))
    engines = {"numba": lambda: get_backend("numba"), "numpy": lambda: get_backend("numpy"), "garbage": _Garbage}
    trials = [("garbage", None), ("numpy", None), ("numba", None)]
    rows, exhausted = search(case, trials, lambda s, t: engines[s](), MeasureOptions(repeats=2, target_s=0.002, max_steps=3), "numpy")
    assert not exhausted
    assert [r["status"] for r in rows] == ["ok", "ok", "wrong"]
    assert rows[0]["median_ms"] <= rows[1]["median_ms"]
    assert rows[2]["strategy"] == "garbage"


def test_candidates_put_every_default_first_then_the_tiles_of_one_strategy_after_another(plans):
    from stencilforge.backends.cuda import codegen

    defaults, others = candidates(plans["wave3d"])
    assert [s for s, _ in defaults] == list(codegen.applicable_strategies(plans["wave3d"], "float32"))
    assert all(t == codegen.default_tile(plans["wave3d"], s, "float32") for s, t in defaults)
    rest = [s for s, _ in others]
    runs = [s for i, s in enumerate(rest) if i == 0 or rest[i - 1] != s]
    assert len(runs) == len(set(runs)) > 1, "the other tiles come grouped by strategy"


def test_ranked_puts_the_tiles_of_the_fastest_strategies_first():
    rows = [{"status": "ok", "strategy": "auto", "resolved_strategy": "rows"},
            {"status": "ok", "strategy": "naive", "resolved_strategy": None},
            {"status": "wrong", "strategy": "tiled", "resolved_strategy": None}]
    trials = [("tiled", (1,)), ("naive", (1,)), ("pencil", (1,)), ("rows", (1,)), ("naive", (2,)), ("rows", (2,))]
    assert ranked(trials, rows) == [("rows", (1,)), ("rows", (2,)), ("naive", (1,)), ("naive", (2,)), ("tiled", (1,)), ("pencil", (1,))]


def test_search_asks_for_more_trials_once_the_first_have_run():
    case = build_case(Workload("heat2d", (48, 64), "float32"))
    engines = {"numba": lambda: get_backend("numba"), "numpy": lambda: get_backend("numpy"), "garbage": _Garbage}
    seen = []

    def then(rows):
        seen.append([(r["strategy"], r["status"]) for r in rows])
        return [("garbage", None)]

    rows, exhausted = search(case, [("numpy", None), ("numba", None)], lambda s, t: engines[s](),
                             MeasureOptions(repeats=2, target_s=0.002, max_steps=3), "numpy", then=then)
    assert not exhausted and len(seen) == 1
    assert sorted(seen[0]) == [("numba", "ok"), ("numpy", "ok")]
    assert [r["status"] for r in rows] == ["ok", "ok", "wrong"]


def test_search_stops_when_the_budget_is_spent():
    case = build_case(Workload("heat2d", (24, 24), "float32"))
    once = MeasureOptions(repeats=1, target_s=0.001, max_steps=1)
    rows, exhausted = search(case, [("numpy", None)] * 3, lambda s, t: get_backend("numpy"), once, "numpy", budget_s=0.0)
    assert exhausted and len(rows) == 1


def test_tune_on_a_machine_without_cuda_is_a_one_line_error(own_cache):
    if "cuda" in available():
        pytest.skip("a GPU is present")
    result = CliRunner().invoke(app, ["tune", "heat2d", "--shape", "64,64"])
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and "needs the cuda backend" in result.output
    assert result.output.strip().count("\n") == 0
    assert not cache.tune_file().exists()


@pytest.mark.parametrize("workload,problem", [("heat2d", "heat2d"), ("heat3d", "heat3d"), ("poisson2d", "poisson2d")])
def test_a_winner_tuned_on_the_bench_case_is_the_runs_choice(workload, problem, own_cache):
    """`stencilforge tune` measures the bench's case (output u_new); a run steps the problem's pass (output slot
    u_next): the winner is keyed by the plan's structure, not its field names, so the run takes it."""
    from stencilforge import problems
    from stencilforge.backends.cuda import codegen
    from stencilforge.backends.cuda.tune import choose
    from stencilforge.backends.numpy_ref import NumpyBackend
    from stencilforge.simulation import Simulation

    shape = (40, 48) if workload.endswith("2d") else (12, 16, 20)
    bench = build_case(Workload(workload, shape, "float32")).plan
    (run,) = Simulation(problems.problem(problem, shape, "float32")[0], NumpyBackend()).sweeps.values()
    assert run.out != bench.out
    tile = (2, 64) if len(shape) == 2 else (1, 2, 64)
    store_choice("dev", bench, shape, "float32", codegen.code_signature(bench, "float32"), "naive", tile)
    assert choose(run, shape, np.dtype("float32"), "dev") == ("naive", tile)


def test_a_problem_files_linear_passes_are_what_its_run_steps(own_cache):
    """`tune FILE.py` measures each linear pass as the run steps it (the same plan structure, so the same cache key),
    on random fields; a file with no linear pass is refused in one line, and without a GPU the search is refused."""
    from pathlib import Path

    from stencilforge.backends.numpy_ref import NumpyBackend
    from stencilforge.bench.workloads import pass_cases
    from stencilforge.convergence import load_problem_file
    from stencilforge.simulation import Simulation

    examples = Path(__file__).resolve().parents[1] / "examples"
    heat9 = load_problem_file(examples / "heat9.py").build(shape=(40, 40))
    (case,) = pass_cases(heat9)
    (run,) = Simulation(heat9, NumpyBackend()).sweeps.values()
    assert case.plan == run and case.grid.shape == (40, 40) and case.swap == (run.out, "u")
    assert all(np.isfinite(a).all() and a.shape == case.grid.padded_shape for a in case.fields.values())
    assert pass_cases(load_problem_file(examples / "gray_scott.py").build(shape=(16, 16))) == []
    if "cuda" not in available():
        for name in ("heat9.py", "gray_scott.py"):  # a linear pass; generated passes only
            cpu = CliRunner().invoke(app, ["tune", str(examples / name), "--shape", "40,40"])
            assert cpu.exit_code == 2 and "needs the cuda backend" in cpu.output and cpu.output.strip().count("\n") == 0
    assert not cache.tune_file().exists()


def _one_pass(problem):
    (p,) = [s for s in problem.analysis.stages if isinstance(s, Pass)]
    return p


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_a_generated_passs_variants_start_at_its_default_and_differ(ndim):
    from stencilforge.backends.cuda.backend import pass_kernel
    from stencilforge.backends.cuda.tune import pass_defaults, pass_variants
    from stencilforge.grid import Grid

    u = sf.Field("u", sf.Grid((12,) * ndim, extent=1.0, dtype="float32"))
    p = _one_pass(sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u) * u)], initial={u: 1.0}, boundary={u: sf.Periodic()}, dt=1e-3))
    variants = pass_variants(p, ndim, 14)
    assert variants[0] == pass_defaults(p, ndim, 14) and len(variants) > 10
    assert all(64 <= np.prod(v["block"]) <= 1024 for v in variants)
    lattice = Grid((12,) * ndim, (1.0,) * ndim, "float32", 1, (0.0,) * ndim)
    kernels = {(k.source, k.blocks, k.threads) for k in (pass_kernel(p, lattice, (), **v) for v in variants)}
    assert len(kernels) == len(variants)  # no kernel is timed twice under two spellings


def test_every_schedule_of_a_generated_pass_compiles_for_sm90(nvrtc):
    """A sample of each layout (rows, planes, columns; the first variants a search tries) through NVRTC."""
    from stencilforge.backends.cuda.backend import pass_kernel
    from stencilforge.backends.cuda.compile import compile_cubin
    from stencilforge.backends.cuda.tune import pass_variants
    from stencilforge.grid import Grid
    from stencilforge.printers.cuda import OPTIONS

    u = sf.Field("u", sf.Grid((10, 12, 14), extent=1.0, dtype="float32"))
    v = sf.Field("v", u.grid)
    problem = sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u) * v), sf.Eq(v.next, v - 0.1 * sf.laplacian(v) * u)],
                         initial={u: 1.0, v: 1.0}, boundary={u: sf.Periodic(), v: sf.Periodic()}, dt=1e-3)
    p = _one_pass(problem)
    lattice = Grid((10, 12, 14), (1.0, 1.0, 1.0), "float32", 1, (0.0, 0.0, 0.0))
    variants = pass_variants(p, 3, lattice.padded_shape[-1])
    sample = variants[:6] + [v for v in variants if v["planes_per_thread"] == 8][:2] + [v for v in variants if v["rows"] == 1][:2]
    for schedule in sample:
        k = pass_kernel(p, lattice, problem.constants, **schedule)
        assert compile_cubin(k.source, "sm_90", k.what, OPTIONS)


def test_a_generated_passs_key_is_its_structure_not_its_coefficients(own_cache):
    from stencilforge.backends.cuda.backend import pass_kernel
    from stencilforge.grid import Grid

    def key(coefficient, shape=(4096, 4096), nonlinear=True):
        u = sf.Field("u", sf.Grid(shape, extent=1.0, dtype="float32"))
        rhs = u + coefficient * sf.laplacian(u) * (u if nonlinear else 1)
        p = _one_pass(sf.Problem([sf.Eq(u.next, rhs)], initial={u: 1.0}, boundary={u: sf.Periodic()}, dt=1e-3))
        lattice = Grid(shape, (1.0, 1.0), "float32", 1, (0.0, 0.0))
        return cache.pass_key("dev", pass_kernel(p, lattice, ()).source, shape, "float32")

    assert key(0.1) == key(0.25) == key(0.25, (4000, 4100))
    assert len({key(0.1), key(0.1, nonlinear=False), key(0.1, (1024, 1024))}) == 3
    schedule = {"block": (64, 4), "rows": 2, "vector": 1, "planes_per_thread": None, "words": False}
    cache.store_entry(key(0.1), {"schedule": {**schedule, "block": [64, 4]}})
    assert cache.cached_pass_schedule(key(0.3)) == schedule and cache.cached_pass_schedule(key(0.1, (512, 512))) is None
