"""bench's projection rows on the CPU: a step with a solve inside, ours against NumPy with SciPy's CG and LU,
checked against each other before a ratio is reported."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from stencilforge.bench import projection
from stencilforge.bench.projection import ProjectionWorkload, projection_rows
from stencilforge.cli import app


def test_cli_rows_ours_and_numpy_scipy_peers_agree_then_compare(tmp_path):
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(app, ["bench", "--backend", "numba", "--problems", "projection", "--size", "projection=31x31",
                                      "--repeats", "2", "--no-cold-start", "--json", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())["projection"]
    assert [r["impl"] for r in rows] == ["stencilforge numba", "NumPy + SciPy CG", "NumPy + SciPy LU"]
    assert {r["status"] for r in rows} == {"ok"}
    ours, cg, lu = rows
    assert ours["repeats"] == 2 and len(ours["samples_ms"]) == 2 and ours["work_unit"] == "V-cycles" and ours["work_per_solve"] >= 1
    assert cg["work_unit"] == "CG iterations" and cg["work_per_solve"] > ours["work_per_solve"]
    for peer in (cg, lu):
        assert peer["largest_difference_in_u_v"] < 1e-9
        assert peer["ours_faster_by"] == pytest.approx(peer["ms_per_step"] / ours["ms_per_step"])
    assert all(r["shape"] == [31, 31] and r["steps"] == 5 for r in rows)
    assert "31² NumPy + SciPy CG" in result.output and "CG iterations" in result.output


def test_a_peer_that_computes_another_flow_is_reported_wrong(monkeypatch):
    lap = projection.ArrayProjection._lap
    monkeypatch.setattr(projection.ArrayProjection, "_lap", lambda self, a: 1.5 * lap(self, a))  # viscosity 1.5 times ours
    rows = projection_rows([ProjectionWorkload(15, 3)], "numpy", ("numpy",), 1)
    assert rows[0]["status"] == "ok"
    for peer in rows[1:]:
        assert peer["status"] == "wrong" and peer["largest_difference_in_u_v"] > projection.AGREE, peer
        assert "differ from ours" in peer["note"]


def test_peers_none_leaves_ours_alone_and_cupy_does_not_apply_on_the_cpu():
    assert [r["impl"] for r in projection_rows([ProjectionWorkload(15, 2)], "numpy", (), 1)] == ["stencilforge numpy"]
    assert [r["impl"] for r in projection_rows([ProjectionWorkload(15, 2)], "numpy", ("cupy",), 1)] == ["stencilforge numpy"]


@pytest.mark.parametrize("size", ["projection=31x40", "projection=2x2", "projection=8x8x8"])
def test_a_projection_size_that_is_not_a_square_grid_is_one_line(size):
    result = CliRunner().invoke(app, ["bench", "--backend", "numba", "--problems", "projection", "--size", size])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error:") and result.output.strip().count("\n") == 0, result.output
