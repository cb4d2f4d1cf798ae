"""Human-readable views of a bench or tune report: Rich tables, JSON on disk."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from ..errors import StencilforgeError


def _f(value, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def _impl(row: dict) -> str:
    s = row["impl"]
    if row.get("strategy"):
        s += f" {row['strategy']}"
    resolved, tile = row.get("resolved_strategy"), row.get("tile")
    if resolved and resolved != row.get("strategy"):
        s += f"->{resolved}"
    if tile:
        s += " " + "x".join(map(str, tile))
    return s


def _status(row: dict, mark: str = "") -> str:
    colour = {"ok": "green", "wrong": "red", "failed": "red", "skipped": "yellow"}[row["status"]]
    return f"[{colour}]{row['status']}[/]{mark}"


def results_table(report: dict, title: str | None = None) -> Table:
    """One row per implementation and workload; 'time/ours' is the time over our best time in the same run."""
    copy = report["ceilings"]["copy"]
    title = title or f"{report['device']['name']}: copy bandwidth {copy['gbps']:.1f} GB/s ({copy['method']})"
    table = Table(title=title)
    for col in ("workload", "implementation", "ms/step (min-max)", "GCell/s", "T_eff GB/s", "% copy", "GFLOP/s", "time/ours", "status"):
        table.add_column(col, justify="left" if col in ("workload", "implementation", "status") else "right")
    last = None
    for n, r in enumerate(report["results"]):
        if last is not None and r["label"] != last:
            table.add_section()
        last = r["label"]
        ok = r["status"] == "ok"
        timing = f"{r['median_ms']:.3f} ({r['min_ms']:.3f}-{r['max_ms']:.3f})" if ok else ""
        table.add_row(
            r["label"], _impl(r), timing, _f(r.get("gcells_per_s"), ".3f"), _f(r.get("teff_gbps"), ".1f"),
            _f(r.get("pct_copy"), ".1f"), _f(r.get("gflops"), ".1f"), _f(r.get("time_vs_best_ours"), ".2f"),
            _status(r, f" [{n + 1}]" if r.get("note") else ""),
        )
    return table


def notes(report: dict) -> list[str]:
    """The footnotes of `results_table`: why a row was skipped, failed or is wrong."""
    return [f"[{n + 1}] {r['label']} {r['impl']}: {r['note']}" for n, r in enumerate(report["results"]) if r.get("note")]


def tune_table(result) -> Table:
    table = Table(title=f"tune {result.workload.label} on {result.device} (fastest first)")
    for col in ("strategy", "tile", "ms/step", "GCell/s", "T_eff GB/s", "% copy", "status"):
        table.add_column(col)
    for r in result.rows:
        ok = r["status"] == "ok"
        strategy = r["strategy"] + (f"->{r['resolved_strategy']}" if r.get("resolved_strategy") and r["resolved_strategy"] != r["strategy"] else "")
        table.add_row(
            strategy, "x".join(map(str, r["tile"])) if r.get("tile") else "", _f(r.get("median_ms"), ".3f") if ok else "",
            _f(r.get("gcells_per_s"), ".3f"), _f(r.get("teff_gbps"), ".1f"), _f(r.get("pct_copy"), ".1f"),
            _status(r) + (f" {r['note']}" if r.get("note") else ""),
        )
    return table


def write_json(report: dict, path: str | Path) -> None:
    try:
        Path(path).write_text(json.dumps(report, indent=1, default=_plain) + "\n")
    except OSError as exc:
        raise StencilforgeError(f"cannot write {path}: {exc.strerror}") from None


def _plain(value):
    """JSON for NumPy scalars and tuples that slipped into a report."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
