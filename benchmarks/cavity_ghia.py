"""The lid-driven cavity (examples/cavity.py, or --example cavity_staggered) against Ghia, Ghia & Shin (1982): each
case run to its end time, its centre lines compared with Tables I and II, its steadiness (the largest change of u
over the last stretch of snapshots) and its time a step recorded; `--png` draws the centre lines over Ghia's points.

usage: python benchmarks/cavity_ghia.py [--backend cuda] [--example NAME] [--case RE:N:T_END ...] [--json OUT]
       [--png OUT]

N is the grid's shape per axis: cavity.py's interior nodes (odd, so that the centre lines are grid lines),
cavity_staggered.py's cells (even); T_END the time.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import stencilforge as sf
from stencilforge.io.series import open_series

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

SNAPSHOTS = 8  # over the run: the last two give the change over its last eighth


def case(cavity, re: float, n: int, t_end: float, backend: str) -> dict:
    problem = cavity.build((n, n), re=re, t_end=t_end)
    steps = problem.default_steps
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cavity.npz"
        result = sf.run(problem, backend=backend, out=str(out), snapshot_every=steps // SNAPSHOTS)
        with open_series(out) as series:
            last, before = series.frame("u", len(series) - 1), series.frame("u", len(series) - 2)
            stretch = float(series.times[-1] - series.times[-2])
    u, v = (a.get() if hasattr(a, "get") else np.asarray(a) for a in (result.fields["u"], result.fields["v"]))
    gap_u, gap_v = cavity.ghia_gaps(u, v, re)
    s = result.summary
    return {"example": cavity.__name__, "re": re, "shape": n, "t_end": t_end, "dt": problem.dt.value,
            "steps": steps, "wall_s": s["wall_s"], "ms_per_step": 1e3 * s["wall_s"] / steps, "solves": s["solves"],
            "gap_u": float(gap_u.max()), "gap_v": float(gap_v.max()), "change_u": float(np.abs(last - before).max()),
            "over_time": stretch, "centre_u": [a.tolist() for a in cavity.centre_line(u)],
            "centre_v": [a.tolist() for a in cavity.centre_row(v)]}


def draw(cavity, rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, len(rows), figsize=(5 * len(rows), 4.6), squeeze=False)
    for ax, row in zip(axes[0], rows):
        (y, u), (x, v) = row["centre_u"], row["centre_v"]
        gu, gv = np.array(cavity.GHIA_U[row["re"]]).T, np.array(cavity.GHIA_V[row["re"]]).T
        ax.plot(u, y, "C0-", label="u(y) at x = 1/2")
        ax.plot(x, v, "C1-", label="v(x) at y = 1/2")
        ax.plot(gu[1], gu[0], "ko", ms=4, mfc="none", label="Ghia et al. (1982)")
        ax.plot(gv[0], gv[1], "ko", ms=4, mfc="none")
        ax.set_title(f"Re = {row['re']:g}, {cavity.__name__} {row['shape']}², t = {row['t_end']:g}")
        ax.set_xlabel("u  |  x")
        ax.set_ylabel("y  |  v")
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--example", default="cavity", choices=["cavity", "cavity_staggered"])
    parser.add_argument("--case", action="append", help="RE:N:T_END (default: Re 100 to t 12 and 1000 to t 60, "
                                                        "on 129 and 257 nodes a side, walls included)")
    parser.add_argument("--json")
    parser.add_argument("--png")
    args = parser.parse_args()
    cavity = importlib.import_module(args.example)
    sizes = (127, 255) if args.example == "cavity" else (128, 256)
    cases = [tuple(float(p) for p in c.split(":")) for c in (args.case or [f"100:{sizes[0]}:12", f"1000:{sizes[1]}:60"])]
    rows = []
    for re, n, t_end in cases:
        row = case(cavity, re, int(n), t_end, args.backend)
        rows.append(row)
        print(f"{args.example} Re {re:g} {int(n)}^2 t {t_end:g}: {row['steps']} steps, {row['ms_per_step']:.3f} ms a step, "
              f"gap u {row['gap_u']:.4f} v {row['gap_v']:.4f}, change of u over the last {row['over_time']:g}: "
              f"{row['change_u']:.2e}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"backend": args.backend, "rows": rows}, indent=1))
    if args.png:
        draw(cavity, rows, args.png)


if __name__ == "__main__":
    main()
