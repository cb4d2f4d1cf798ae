"""bench's small-problem rows on the CPU: a step through sf.run against the same update as a plain NumPy loop,
checked against ours before a ratio is reported."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from stencilforge.bench import small
from stencilforge.bench.small import SmallWorkload, small_rows
from stencilforge.cli import app


def test_cli_rows_ours_and_the_numpy_loops_agree_then_compare(tmp_path):
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(app, ["bench", "--backend", "numba", "--problems", "small", "--repeats", "1", "--no-cold-start",
                                      "--json", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["small"]
    assert [(r["label"], r["impl"]) for r in rows[::2]] == [(w.label, "stencilforge numba") for w in small.MATRIX]
    assert {r["impl"] for r in rows[1::2]} == {"NumPy loop"} and {r["status"] for r in rows} == {"ok"}
    for ours, peer in zip(rows[::2], rows[1::2]):
        assert peer["label"] == ours["label"] and peer["relative_difference"] <= small.AGREE
        assert peer["ours_faster_by"] == peer["us_per_step"] / ours["us_per_step"] and peer["steps"] == ours["steps"] > 0
    assert rows[-2]["passes_per_step"] == 52 and rows[0]["passes_per_step"] == 1
    assert "pressure_loop 39² NumPy loop" in result.output


def test_a_loop_that_takes_another_number_of_steps_is_reported_wrong(monkeypatch):
    loop = small._diffusion_loop
    monkeypatch.setattr(small, "_diffusion_loop", lambda u, steps: loop(u, steps - 1))
    ours, peer = small_rows([SmallWorkload("diffusion", (16, 16))], "numpy", ("numpy",), 1)
    assert ours["status"] == "ok" and peer["status"] == "wrong" and peer["relative_difference"] > small.AGREE
    assert "differs from ours" in peer["note"]


def test_gpu_peers_do_not_apply_on_the_cpu_and_none_leaves_ours_alone():
    w = [SmallWorkload("diffusion", (81,))]
    assert [r["impl"] for r in small_rows(w, "numpy", ("cupy", "jax"), 1)] == ["stencilforge numpy"]
    assert [r["impl"] for r in small_rows(w, "numpy", (), 1)] == ["stencilforge numpy"]
