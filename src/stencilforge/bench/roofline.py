"""Roofline plot of a bench report: measured ceilings, every timed kernel placed by intensity and FLOP/s.

Intensity counts compulsory bytes only (the plan's bytes per cell), the same
bytes as T_eff, so a point on the bandwidth roof runs at copy speed.
Drawn on a bare matplotlib Figure (no pyplot), so no global backend state is touched.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import StencilforgeError
from ..optional import require

MARKERS = {"stencilforge": "o", "numpy": "s", "cupy": "s", "naive-cuda": "^", "torch": "D", "torch.compile": "P", "jax": "X"}


def plot_roofline(report: dict, path: str | Path) -> None:
    Figure = require("matplotlib.figure", f"drawing {path}").Figure
    rows = [r for r in report["results"] if r["status"] == "ok"]
    bw = report["ceilings"]["copy"]["gbps"]
    peaks = report["ceilings"]["peak_gflops"]
    fig = Figure(figsize=(11, 6), layout="constrained")
    ax = fig.subplots()
    intensities = [r["arithmetic_intensity"] for r in rows] or [1.0]
    top = max(peaks.values())
    x = np.logspace(np.log10(min(intensities) / 4), np.log10(max(max(intensities) * 4, 4 * top / bw)), 200)
    ax.loglog(x, np.minimum(bw * x, top), color="black", lw=2, label=f"copy bandwidth {bw:.0f} GB/s")
    source = "FMA kernel" if report["device"]["kind"] == "gpu" else "BLAS matmul"
    for i, (dtype, peak) in enumerate(sorted(peaks.items())):
        ax.axhline(peak, color="grey", ls="--", lw=1)
        ax.annotate(f"{dtype} peak, measured ({source}): {peak:.0f} GFLOP/s", (0.01, peak), xycoords=("axes fraction", "data"),
                    xytext=(0, 3 + 10 * i), textcoords="offset points", fontsize=8, color="grey")
    labels = sorted({r["label"] for r in rows})
    colours = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    seen = set()
    for r in rows:
        name = r["impl"] + (f" {r['strategy']}" if r["kind"] == "ours" and r.get("strategy") else "")
        legend = r["label"] if r["label"] not in seen else None
        seen.add(r["label"])
        ax.scatter(r["arithmetic_intensity"], r["gflops"], color=colours[r["label"]], marker=MARKERS.get(r["impl"], "v"),
                   edgecolor="black" if r["kind"] == "ours" else "none", s=50, label=legend, zorder=3)
        ax.annotate(name, (r["arithmetic_intensity"], r["gflops"]), fontsize=6, xytext=(4, 2), textcoords="offset points")
    ax.set_xlabel("arithmetic intensity (FLOP per compulsory byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"roofline: {report['device']['name']}, {report['date'][:10]} (outlined: stencilforge)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.legend(fontsize=7, loc="outside right upper")
    try:
        fig.savefig(path, dpi=130)
    except OSError as exc:
        raise StencilforgeError(f"cannot write {path}: {exc.strerror}") from None
