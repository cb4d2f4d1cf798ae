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

MARKERS = {"stencilforge": "o", "numpy": "s", "cupy": "s", "naive-cuda": "^", "torch": "D", "torch.compile": "P", "jax": "X",
           "devito": "v", "pystencils": "<"}


def plot_roofline(report: dict, path: str | Path) -> None:
    """Colour names the workload and the marker the implementation (both in the legend, no text on the points).

    Our fastest row per workload is drawn large and outlined, with a short tag naming its strategy; tags
    are stacked so they never overlap. Our other strategies are small dots.
    """
    require("matplotlib", f"drawing {path}")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    rows = [r for r in report["results"] if r["status"] == "ok"]
    bw = report["ceilings"]["copy"]["gbps"]
    peaks = report["ceilings"]["peak_gflops"]
    fig = Figure(figsize=(10, 6), layout="constrained")
    ax = fig.subplots()
    intensities = [r["arithmetic_intensity"] for r in rows] or [1.0]
    top = max(peaks.values())
    x = np.logspace(np.log10(min(intensities) / 4), np.log10(max(max(intensities) * 4, 4 * top / bw)), 200)
    ax.loglog(x, np.minimum(bw * x, top), color="black", lw=2)
    source = "FMA kernel" if report["device"]["kind"] == "gpu" else "BLAS matmul"
    for dtype, peak in sorted(peaks.items()):
        ax.axhline(peak, color="grey", ls="--", lw=1)
        ax.annotate(f"{dtype} peak, measured ({source}): {peak:.0f} GFLOP/s", (0.01, peak), xycoords=("axes fraction", "data"),
                    xytext=(0, -10), textcoords="offset points", fontsize=8, color="grey")
    labels = list(dict.fromkeys(r["label"] for r in rows))
    colours = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    best: dict = {}
    for r in rows:
        if r["kind"] == "ours" and (r["label"] not in best or r["median_ms"] < best[r["label"]]["median_ms"]):
            best[r["label"]] = r
    for r in rows:
        point = (r["arithmetic_intensity"], r["gflops"])
        if r["kind"] == "ours" and r is not best[r["label"]]:
            ax.scatter(*point, color=colours[r["label"]], marker="o", s=12, alpha=0.6, zorder=2)
        else:
            ax.scatter(*point, color=colours[r["label"]], marker=MARKERS.get(r["impl"], "v"), s=70 if r["kind"] == "ours" else 45,
                       edgecolor="black" if r["kind"] == "ours" else "none", zorder=3)
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    handles = [Line2D([], [], color="black", lw=2, label=f"copy bandwidth {bw:.0f} GB/s")]
    handles += [Line2D([], [], ls="", marker="o", color=colours[label], label=label) for label in labels]
    handles += [Line2D([], [], ls="", marker=MARKERS.get(i, "v"), color="grey", markeredgecolor="black" if i == "stencilforge" else "grey",
                       label="stencilforge: fastest (tagged), others (dots)" if i == "stencilforge" else i) for i in impls]
    ax.set_xlabel("arithmetic intensity (FLOP per compulsory byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"roofline: {report['device']['name']}, {report['date'][:10]}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.legend(handles=handles, fontsize=8, loc="outside right upper")
    tags = [(r, f"{r['workload']}: {r.get('resolved_strategy') or r.get('strategy') or r['impl']}") for r in best.values()]
    _tags(ax, FigureCanvasAgg(fig), tags, [(r["arithmetic_intensity"], r["gflops"]) for r in rows])
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise StencilforgeError(f"cannot write {path}: {exc.strerror}") from None


def _tags(ax, canvas, tagged: list[tuple[dict, str]], points: list[tuple[float, float]]) -> None:
    """Write each tag up and to the left of its point (where the roof leaves room), moved further up in display
    space until it covers no point and no tag placed before.

    The layout is fixed first, so the positions measured here are the ones saved.
    """
    from matplotlib.transforms import Bbox

    canvas.draw()
    canvas.figure.set_layout_engine("none")
    renderer = canvas.get_renderer()
    placed = [Bbox.from_bounds(px - 6, py - 6, 12, 12) for px, py in ax.transData.transform(points)]
    for r, text in sorted(tagged, key=lambda t: t[0]["gflops"]):
        label = ax.annotate(text, (r["arithmetic_intensity"], r["gflops"]), xytext=(-8, 4), textcoords="offset points", ha="right",
                            fontsize=8, arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "grey"})
        box = _text_box(label, renderer)
        while any(box.overlaps(other) for other in placed):
            label.xyann = (label.xyann[0], label.xyann[1] + 3)
            box = _text_box(label, renderer)
        placed.append(box.padded(2))


def _text_box(label, renderer):
    """The display box of an annotation's text alone (its connecting line may cross other things)."""
    from matplotlib.text import Text

    label.update_positions(renderer)
    return Text.get_window_extent(label, renderer)
