"""Human-readable views of a bench or tune report: Rich tables, JSON on disk."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from ..errors import StencilforgeError


def _f(value, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def _impl(row: dict) -> str:
    """'sf' and the strategy for our rows (with what auto resolved to and the tile), the peer's name otherwise."""
    s = "sf" if row["kind"] == "ours" else row["impl"]
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


def _label(row: dict) -> str:
    """The workload's label, its shape as N² or N³ where the sides are equal: a table title that fits a terminal."""
    shape = row["shape"]
    dims = f"{shape[0]}{'²³'[len(shape) - 2]}" if len(set(shape)) == 1 and len(shape) in (2, 3) else "x".join(map(str, shape))
    return f"{row.get('workload') or row['problem']} {dims} {row['dtype']}"


def results_tables(report: dict) -> list[Table]:
    """One table per workload, each row an implementation, narrow enough for an 80-column terminal.

    'x best' is the time over our best time in the same run; a row that was not timed shows its
    status (and footnote) in place of its time. Min and max times, GCell/s and GFLOP/s are in the JSON.
    """
    by_label: dict[str, list[dict]] = {}
    for r in report["results"]:
        by_label.setdefault(r["label"], []).append(r)
    footnote = {id(r): n + 1 for n, r in enumerate(report["results"])}
    tables = []
    for rows in by_label.values():
        table = Table(title=f"{_label(rows[0])}, {rows[0]['bytes_per_cell']} B/cell", title_justify="left")
        for col in ("implementation", "ms/step", "GB/s", "% copy", "x best"):
            table.add_column(col, justify="left" if col == "implementation" else "right")
        for r in rows:
            mark = f" [{footnote[id(r)]}]" if r.get("note") else ""
            if r["status"] == "ok":
                cells = (
                    f"{r['median_ms']:.3f}",
                    _f(r.get("teff_gbps"), ".1f"),
                    _f(r.get("pct_copy"), ".1f"),
                    _f(r.get("time_vs_best_ours"), ".2f"),
                )
            else:
                cells = (_status(r, mark), "", "", "")
            table.add_row(_impl(r), *cells)
        tables.append(table)
    return tables


def heading(report: dict) -> str:
    """The line above the tables: the device and the copy bandwidth every percentage is of."""
    copy = report["ceilings"]["copy"]
    return (
        f"{report['device']['name']}: copy bandwidth {copy['gbps']:.1f} GB/s ({copy['method']})\n"
        "sf = stencilforge; x best = time over our fastest in this run"
    )


def notes(report: dict) -> list[str]:
    """The footnotes of `results_tables`: why a row was skipped, failed or is wrong."""
    return [f"[{n + 1}] {r['label']} {r['impl']}: {r['note']}" for n, r in enumerate(report["results"]) if r.get("note")]


def loop_table(report: dict) -> Table | None:
    """The time-loop rows: ms per step through the API, its kernels alone, and what the loop adds (from the
    medians, and from the fastest repeat of each, which a shared machine disturbs least)."""
    rows = report.get("time_loop") or []
    if not rows:
        return None
    table = Table(title="time loop through the API against its kernels alone", title_justify="left")
    for col in ("problem", "loop ms/step", "kernels", "overhead", "of mins"):
        table.add_column(col, justify="left" if col == "problem" else "right")
    for r in rows:
        if r["status"] == "ok":
            table.add_row(_label(r), f"{r['loop_ms']:.3f}", f"{r['kernel_ms']:.3f}", f"{100 * r['overhead']:+.1f}%",
                          f"{100 * r['overhead_min']:+.1f}%")
        else:
            table.add_row(_label(r), f"[yellow]{r['status']}[/]", "", "", "")
    return table


def cold_start_table(report: dict) -> Table | None:
    """Seconds from a fresh process to its first step: cold (empty caches) and warm, with the cold compile."""
    rows = report.get("cold_start") or []
    if not rows:
        return None
    repeats = len(rows[0].get("samples", {}).get("cold", [None]))
    title = "fresh process to its first step, s" + (f" (median of {repeats})" if repeats > 1 else "")
    table = Table(title=title, title_justify="left")
    for col in ("problem", "cold caches", "of it compile", "warm caches"):
        table.add_column(col, justify="left" if col == "problem" else "right")
    for r in rows:
        cold, warm = r["cold"], r["warm"]
        table.add_row(_label(r), _f(cold.get("to_first_step_s"), ".2f") or cold["status"], _f(cold.get("compile_s"), ".2f"),
                      _f(warm.get("to_first_step_s"), ".2f") or warm["status"])
    return table


def projection_table(report: dict) -> Table | None:
    """The projection rows: a step with a pressure solve, ours and the peers', each solve's work and the
    peers' time over ours."""
    rows = report.get("projection") or []
    if not rows:
        return None
    table = Table(title="a projection step of the cavity (a solve inside), float64", title_justify="left")
    for col in ("grid, implementation", "ms/step", "work/solve", "ours faster"):
        table.add_column(col, justify="left" if col.startswith("grid") else "right")
    for r in rows:
        name = f"{r['shape'][0]}² {r['impl']}"
        if r["status"] != "ok":
            table.add_row(name, _status(r), "", r.get("note", ""))
            continue
        work = f"{r['work_per_solve']:.1f} {r['work_unit']}" if r.get("work_per_solve") is not None else r.get("note", "")
        faster = "" if r["kind"] == "ours" else f"{r['ours_faster_by']:.1f}x"
        table.add_row(name, f"{r['ms_per_step']:.2f}", work, faster)
    return table


def small_table(report: dict) -> Table | None:
    """The small-problem rows: µs a step, ours and the array loops', and the loops' time over ours."""
    rows = report.get("small") or []
    if not rows:
        return None
    table = Table(title="small problems, float64: µs a step", title_justify="left")
    for col in ("problem, implementation", "µs/step", "ours faster"):
        table.add_column(col, justify="left" if col.startswith("problem") else "right")
    for r in rows:
        name = f"{_label(r).rsplit(' ', 1)[0]} {r['impl']}"
        if r["status"] != "ok":
            table.add_row(name, _status(r), r.get("note", ""))
        else:
            table.add_row(name, f"{r['us_per_step']:.2f}", "" if r["kind"] == "ours" else f"{r['ours_faster_by']:.1f}x")
    return table


def tune_table(result) -> Table:
    table = Table(title=f"tune {result.workload.label} on {result.device} (fastest first)")
    for col in ("strategy", "tile", "ms/step", "GB/s", "% copy", "status"):
        table.add_column(col, justify="right" if col in ("ms/step", "GB/s", "% copy") else "left", no_wrap=col != "status")
    for r in result.rows:
        ok = r["status"] == "ok"
        strategy = r["strategy"] + (
            f"->{r['resolved_strategy']}" if r.get("resolved_strategy") and r["resolved_strategy"] != r["strategy"] else ""
        )
        table.add_row(
            strategy,
            "x".join(map(str, r["tile"])) if r.get("tile") else "",
            _f(r.get("median_ms"), ".3f") if ok else "",
            _f(r.get("teff_gbps"), ".1f"),
            _f(r.get("pct_copy"), ".1f"),
            _status(r) + (f" {r['note']}" if r.get("note") else ""),
        )
    return table


def pass_tune_table(result) -> Table:
    table = Table(title=f"tune {result.label} on {result.device} (fastest first)")
    for col in ("schedule", "ms/pass", "GB/s", "% copy", "status"):
        table.add_column(col, justify="right" if col in ("ms/pass", "GB/s", "% copy") else "left", no_wrap=col != "status")
    for r in result.rows:
        ok = r["status"] == "ok"
        table.add_row(r["label"] + (" (default)" if r["default"] else ""), _f(r.get("median_ms"), ".3f") if ok else "",
                      _f(r.get("teff_gbps"), ".1f"), _f(r.get("pct_copy"), ".1f"),
                      _status(r) + (f" {r['note']}" if r.get("note") else ""))
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
