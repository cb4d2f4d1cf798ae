"""bench plumbing on tiny sizes with the CPU backends: JSON, statistics, T_eff, roofline, peer checks, --quick."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from stencilforge.backends.base import Launch, fused_walls
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.bench.measure import MeasureOptions, time_runners, wall_clock
from stencilforge.bench.peers import PEERS, Peer, SlicingRunner, sweep_step
from stencilforge.bench.suite import (
    BackendRunner,
    BenchOptions,
    FusedRunner,
    Impl,
    measure_impl,
    oracle_error,
    oracle_error_fused,
    run_bench,
)
from stencilforge.bench.workloads import Workload, build_case
from stencilforge.cli import app

FAST = MeasureOptions(repeats=3, target_s=0.002, max_steps=5)
TINY = (
    Workload("poisson2d", (33, 40), "float32"),
    Workload("jacobi2d", (33, 40), "float32"),
    Workload("wave3d", (18, 19, 20), "float32"),
    Workload("derivatives-fused", (21, 30), "float64"),
)


@pytest.fixture(scope="module")
def report():
    return run_bench(BenchOptions(TINY, backend="numba", peers=("numpy",), measure=FAST, copy_bytes=2**20))


def test_report_has_device_versions_commit_and_ceilings(report):
    for key in ("schema", "date", "git", "device", "versions", "ceilings", "workloads", "results", "options"):
        assert key in report
    assert report["device"]["name"] and "driver" in report["device"]
    assert report["versions"]["stencilforge"] and report["versions"]["numpy"]
    assert report["ceilings"]["copy"]["gbps"] > 0
    assert set(report["ceilings"]["peak_gflops"]) >= {"float32", "float64"}
    json.dumps(report)


def test_every_row_is_checked_then_timed_with_sane_statistics(report):
    rows = report["results"]
    assert {(r["workload"], r["impl"]) for r in rows} == {(w.name, i) for w in TINY for i in ("stencilforge", "numpy")}
    for r in rows:
        assert r["status"] == "ok", r
        assert r["check"]["oracle_error"] <= r["check"]["tolerance"]
        assert 0 < r["min_ms"] <= r["median_ms"] <= r["max_ms"]
        assert len(r["samples_ms"]) == r["repeats"] == FAST.repeats
        assert r["steps_per_repeat"] >= 1


def test_teff_counts_the_plans_compulsory_bytes(report):
    expected = {"poisson2d": 12, "jacobi2d": 8, "wave3d": 16, "derivatives-fused": 24}
    for r in report["results"]:
        assert r["bytes_per_cell"] == expected[r["workload"]]
        seconds = r["median_ms"] / 1e3
        assert r["teff_gbps"] == pytest.approx(r["cells"] * r["bytes_per_cell"] / seconds / 1e9)
        assert r["gcells_per_s"] == pytest.approx(r["cells"] / seconds / 1e9)
        assert r["gflops"] == pytest.approx(r["cells"] * r["flops_per_cell"] / seconds / 1e9)
        assert r["pct_copy"] == pytest.approx(100 * r["teff_gbps"] / report["ceilings"]["copy"]["gbps"])
        assert r["arithmetic_intensity"] == pytest.approx(r["flops_per_cell"] / r["bytes_per_cell"])


def test_inputs_are_random_and_shared(report):
    case = build_case(TINY[2])
    for name, a in case.fields.items():
        assert np.all(a != 0) and np.unique(a).size > a.size // 2, name
    again = build_case(TINY[2])
    assert all(np.array_equal(case.fields[k], again.fields[k]) for k in case.fields)


def _off_by_a_bit(case):
    """A peer that scales every update by 1.001: plausible-looking, wrong."""
    step = sweep_step(case)

    def wrong(fields):
        new = step(fields)
        new[case.swap[0]][case.grid.interior] *= np.float32(1.001)
        return new

    return SlicingRunner(case, {k: v.copy() for k, v in case.fields.items()}, wrong, np.array, lambda: None, wall_clock)


def test_a_peer_that_disagrees_is_reported_wrong_not_timed():
    bad = Peer("bad-peer", "cpu", "deliberately wrong", _off_by_a_bit)
    rep = run_bench(BenchOptions((TINY[1],), backend="numpy", peers=("numpy",), extra_peers=(bad,), measure=FAST, copy_bytes=2**20))
    rows = {r["impl"]: r for r in rep["results"]}
    assert rows["numpy"]["status"] == "ok"
    wrong = rows["bad-peer"]
    assert wrong["status"] == "wrong"
    assert "median_ms" not in wrong and wrong["time_vs_best_ours"] is None
    assert wrong["check"]["oracle_error"] > wrong["check"]["tolerance"]
    assert "not timed" in wrong["note"]


def test_oracle_check_sees_a_single_bad_cell():
    case = build_case(Workload("heat3d", (40, 41, 42), "float32"))
    runner = PEERS["numpy"].runner(case)
    runner.run(1)
    result = runner.latest()
    assert oracle_error(case, result) < 1e-6
    result["u"][1, 1, 1] += 1.0  # a corner box covers it
    assert oracle_error(case, result) > 1e-3


def test_cli_writes_json_and_roofline(tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "roofline.png"
    result = CliRunner().invoke(app, [
        "bench", "--backend", "numba", "--problems", "heat2d,heat3d", "--size", "2d=40x50", "--size", "3d=17x18x19",
        "--peers", "numpy", "--repeats", "2", "--no-cold-start", "--json", str(out), "--plot", str(png),
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert [w["label"] for w in data["workloads"]] == ["heat2d 40x50 float32", "heat3d 17x18x19 float32"]
    assert data["command"][0] == "stencilforge"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "heat3d 17x18x19 float32" in result.output


def test_cli_rejects_bad_options_in_one_line():
    runner = CliRunner()
    for args in (["--problems", "nope"], ["--size", "heat2d"], ["--peers", "nope"], ["--backend", "numba", "--strategies", "tiled"],
                 ["--backend", "numba", "--strategies", "streamng"]):
        result = runner.invoke(app, ["bench", "--backend", "numba", *args] if "--backend" not in args else ["bench", *args])
        assert result.exit_code == 2, (args, result.output)
        assert result.output.strip().count("\n") == 0 and result.output.startswith("error:"), result.output


def test_quick_preset_runs_on_cpu(tmp_path):
    out = tmp_path / "quick.json"
    args = ["bench", "--quick", "--backend", "numba", "--problems", "jacobi2d,derivatives-fused", "--json", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert {r["status"] for r in data["results"]} == {"ok"}
    assert data["options"]["repeats"] == 3
    assert [w["shape"] for w in data["workloads"]] == [[2048, 2048], [1000, 1000]]


def test_make_table_renders_ours_peers_and_copy_and_updates_in_place(report, tmp_path):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("make_table", Path(__file__).parents[1] / "benchmarks" / "make_table.py")
    make_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_table)
    src = tmp_path / "run.json"
    src.write_text(json.dumps(report))
    block = make_table.render([src])
    assert re.search(r"\| jacobi2d 33x40 float32 \| 8 \| (numba|fused) \|", block) and "numpy" in block and "GB/s" in block
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\n## Other section\n\nkept\n")
    make_table.update(doc, block)
    make_table.update(doc, block)
    text = doc.read_text()
    assert text.count("## Benchmarks") == 1 and text.count(make_table.START) == 1 and "kept" in text


class FusedSweeps(NumpyBackend):
    """A NumPy `sweep_fused` of `steps` sweeps (the state after step s keeping the ghost cells of
    fields[fused_walls(s)]), or a broken one (a middle step left out)."""

    fuses_steps = True

    def __init__(self, steps=2, broken=False):
        super().__init__()
        self.steps, self.broken = steps, broken

    def sweep_fused(self, sweep, grid):
        one = self.sweep(sweep, grid)
        (u,) = sweep.stencil_inputs

        def run(fields):
            state = fields[u]
            for s in range(1, self.steps - self.broken):
                middle = fields[fused_walls(s, sweep.out)].copy()
                one({**fields, u: state, sweep.out: middle})
                state = middle
            one({**fields, u: state})

        return Launch(run, steps=self.steps)


@pytest.mark.parametrize("name", ["poisson2d", "jacobi2d"])
@pytest.mark.parametrize("steps", [2, 4])
def test_fused_passes_are_checked_against_the_oracle_over_a_pass_then_timed(name, steps):
    case = build_case(Workload(name, (70, 90), "float64"))
    opts = BenchOptions((case.workload,), backend="numpy", measure=FAST)
    ref_row, ref = measure_impl(case, Impl("stencilforge", "ours", "numpy", lambda c: BackendRunner(c, NumpyBackend())), None, opts, 1.0,
                                "numpy")
    assert ref_row["status"] == "ok"
    good, _ = measure_impl(case, Impl("stencilforge", "ours", "fused", lambda c: FusedRunner(c, FusedSweeps(steps))), ref, opts, 1.0,
                           "numpy")
    assert good["status"] == "ok" and good["check"]["oracle_error"] < 1e-12
    assert good["check"]["reference_error"] == (0.0 if steps == 2 else None)  # the other rows hold two steps
    bad, _ = measure_impl(case, Impl("stencilforge", "ours", "fused", lambda c: FusedRunner(c, FusedSweeps(steps, broken=True))), ref,
                          opts, 1.0, "numpy")
    assert bad["status"] == "wrong" and "median_ms" not in bad


@pytest.mark.parametrize("steps", [2, 3])
def test_fused_oracle_sees_a_single_bad_cell(steps):
    case = build_case(Workload("poisson2d", (70, 90), "float64"))
    runner = FusedRunner(case, FusedSweeps(steps))
    runner.run(steps)
    result = runner.latest()
    assert oracle_error_fused(case, result, steps) < 1e-12
    result["u"][70, 1] += 1.0  # the last interior row, second column: the bottom-left corner box
    assert oracle_error_fused(case, result, steps) > 1e-3


def test_workloads_that_cannot_fuse_are_skipped():
    case = build_case(Workload("wave3d", (18, 19, 20), "float32"))
    row, _ = measure_impl(case, Impl("stencilforge", "ours", "fused", lambda c: FusedRunner(c, FusedSweeps())), None,
                          BenchOptions((case.workload,), measure=FAST), 1.0, "numpy")
    assert row["status"] == "skipped" and "does not fuse steps" in row["note"]


def test_numba_bench_times_several_steps_per_pass_where_they_apply(report):
    """Checked against the oracle over one pass, bit for bit; against the other rows only where a pass is two steps."""
    fused = {r["workload"]: r for r in report["results"] if r["strategy"] == "fused"}
    assert set(fused) == {"poisson2d", "jacobi2d"}  # wave3d is a leapfrog, derivatives no sweep
    for row in fused.values():
        assert row["status"] == "ok" and row["check"]["oracle_error"] == 0.0 and row["median_ms"] > 0
        assert row["check"]["reference_error"] is None  # six steps a pass


@pytest.mark.parametrize("name", ["devito", "pystencils"])
def test_cpu_compiler_peers_are_skipped_with_a_note_when_not_installed(name, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda module, *a: None if module == name else real(module, *a))
    rep = run_bench(BenchOptions((TINY[1],), backend="numpy", peers=(name,), measure=FAST, copy_bytes=2**20))
    (row,) = [r for r in rep["results"] if r["impl"] == name]
    assert row["status"] == "skipped" and f"{name} is not installed" in row["note"]


@pytest.mark.parametrize("name", ["devito", "pystencils", "pystencils-gpu"])
def test_stencil_compiler_peers_compute_our_update(name):
    """Where the library is installed (never required), pystencils' CUDA target where CuPy has a GPU: each
    workload kind passes the bench's checks against the oracle and ours, two steps in, the axis operators
    with their closure rows on odd shapes, along x and along y."""
    pytest.importorskip(name.removesuffix("-gpu"))
    if name.endswith("-gpu"):
        cupy = pytest.importorskip("cupy")
        if not cupy.is_available():
            pytest.skip("CuPy has no GPU here")
    operators = (TINY[3], Workload("derivatives", (23, 37), "float64"), Workload("derivatives-fused", (17, 45), "float64"),
                 Workload("derivatives-y", (29, 19), "float64"))
    workloads = (Workload("poisson2d", (19, 22), "float64"), Workload("wave3d", (17, 18, 19), "float32"), *operators)
    rep = run_bench(BenchOptions(workloads, backend="numpy", peers=(name,), measure=FAST, copy_bytes=2**20))
    rows = {r["label"]: r for r in rep["results"] if r["impl"] == name}
    assert {r["status"] for r in rows.values()} == {"ok"} and len(rows) == len(workloads), rows
    assert rows[workloads[0].label]["check"]["reference_error"] < 1e-12
    for w in operators:
        check = rows[w.label]["check"]
        assert check["oracle_error"] < 1e-12 and check["reference_error"] < 1e-12, (w.label, check)
    assert (np.array([1e-310]) * 1.0)[0] != 0, "the peer left flush-to-zero on in this process"


def test_bench_tables_fit_80_columns_without_wrapping_a_cell(report):
    from rich.console import Console

    from stencilforge.bench.report import heading, results_tables

    widest = dict(report["results"][-1], impl="stencilforge", kind="ours", workload="derivatives-fused",
                  label="derivatives-fused 10000x10000 float64", shape=[10000, 10000], dtype="float64", strategy="auto",
                  resolved_strategy="streaming_vec", tile=[96, 8, 32],
                  median_ms=1234.567, teff_gbps=12345.6, pct_copy=174.3, time_vs_best_ours=123.45)
    skipped = dict(widest, status="skipped", note="this backend does not fuse two steps of this sweep")
    wide = dict(report, results=[*report["results"], widest, skipped])
    console = Console(width=80, record=True)
    for table in results_tables(wide):
        console.print(table)
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= 80
    assert any("derivatives-fused 10000² float64, 24 B/cell" in line for line in lines)
    assert any("sf auto->streaming_vec 96x8x32" in line and "1234.567" in line and "174.3" in line for line in lines)
    assert any(f"skipped [{len(wide['results'])}]" in line for line in lines)
    assert "copy bandwidth" in heading(report)


class _Recorder:
    """A runner whose clock notes who was timed and reports a speed that drifts with every call, as a
    shared machine's does: each call is 10% slower than the one before, whoever makes it."""

    def __init__(self, name: str, log: list, cost: float):
        self.name, self.log, self.cost = name, log, cost

    def clock(self, run, sync, steps: int) -> float:
        self.log.append(self.name)
        return steps * self.cost * 1.1 ** len(self.log)

    def run(self, steps: int) -> None:
        pass

    def sync(self) -> None:
        pass

    def latest(self) -> dict:
        return {}


def test_repeats_are_taken_in_rounds_so_drift_falls_on_every_row_alike():
    log: list = []
    fast, slow = _Recorder("fast", log, 1e-3), _Recorder("slow", log, 2e-3)
    a, b = time_runners([fast, slow], MeasureOptions(repeats=4, target_s=0.01))
    assert log[4:] == ["fast", "slow"] * 4  # after each one's calibration, one sample of each per round
    ratios = [s / f for f, s in zip(a.samples, b.samples)]
    assert all(1.9 < r < 2.3 for r in ratios), ratios  # in a round, the drift between the two is one call
