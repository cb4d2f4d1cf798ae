"""Pictures of fields: a 2D field, or the three mid-planes of a 3D one, in physical units; GIF/MP4 animations.

Figures are built on matplotlib's object API with the Agg canvas (no pyplot
state, no display needed). Image size in pixels is figure size x dpi exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import StencilforgeError
from ..grid import AXIS_NAMES
from ..optional import require
from .paths import atomic_path, check_output
from .series import open_series

SIZE_2D = (6.4, 4.8)
SIZE_3D = (12.8, 4.0)
IMAGE_SUFFIXES = (".png",)
MOVIE_SUFFIXES = (".gif", ".mp4")


@dataclass(frozen=True)
class View:
    """What a picture needs besides the values: names, grid placement, time."""

    problem: str
    field: str
    spacing: tuple[float, ...]
    lower: tuple[float, ...]


def pixel_size(ndim: int, dpi: int) -> tuple[int, int]:
    w, h = SIZE_3D if ndim == 3 else SIZE_2D
    return round(w * dpi), round(h * dpi)


def _extent(view: View, data_shape, axes: tuple[int, int]) -> list[float]:
    """Pixel edges in physical units: node i of an axis sits at lower + i * spacing."""
    (ya, xa) = axes
    edges = []
    for a in (xa, ya):
        h, lo, n = view.spacing[a], view.lower[a], data_shape[a]
        edges += [lo - h / 2, lo + (n - 1) * h + h / 2]
    return edges


def _planes(data: np.ndarray):
    """(label, 2D slice, (row axis, column axis)) for a 2D field or the mid-planes of a 3D one."""
    if data.ndim == 2:
        return [("", data, (0, 1))]
    nz, ny, nx = data.shape
    return [
        (f"z mid-plane (k={nz // 2})", data[nz // 2], (1, 2)),
        (f"y mid-plane (j={ny // 2})", data[:, ny // 2, :], (0, 2)),
        (f"x mid-plane (i={nx // 2})", data[:, :, nx // 2], (0, 1)),
    ]


def _title(view: View, t: float, step: int) -> str:
    return f"{view.problem}: {view.field} at t = {t:.6g} (step {step})"


class FieldFigure:
    """A figure for one field whose images and title can be updated frame by frame (for animations)."""

    def __init__(self, view: View, data: np.ndarray, dpi: int, vmin: float | None = None, vmax: float | None = None):
        from matplotlib.colors import Normalize
        from matplotlib.figure import Figure

        if data.ndim not in (2, 3):
            raise StencilforgeError(f"can only draw 2D or 3D fields, {view.field} is {data.ndim}D")
        self.view = view
        self.figure = Figure(figsize=SIZE_3D if data.ndim == 3 else SIZE_2D, dpi=dpi, layout="compressed")
        finite = data[np.isfinite(data)]
        lo = float(finite.min()) if vmin is None and finite.size else vmin
        hi = float(finite.max()) if vmax is None and finite.size else vmax
        norm = Normalize(vmin=lo, vmax=hi)
        planes = _planes(data)
        axes = self.figure.subplots(1, len(planes), squeeze=False)[0]
        names = AXIS_NAMES[data.ndim]
        self.images = []
        for ax, (label, plane, (ya, xa)) in zip(axes, planes):
            image = ax.imshow(plane, origin="lower", extent=_extent(view, data.shape, (ya, xa)), norm=norm,
                              cmap="viridis", interpolation="nearest", aspect="equal")
            ax.set_xlabel(names[xa])
            ax.set_ylabel(names[ya])
            if label:
                ax.set_title(label, fontsize="medium")
            self.images.append(image)
        self.figure.colorbar(self.images[0], ax=list(axes), label=view.field, shrink=0.9)
        self.title = self.figure.suptitle(" ")  # not empty: the layout keeps room for the title set per frame

    def show(self, data: np.ndarray, t: float, step: int) -> list:
        for image, (_, plane, _) in zip(self.images, _planes(data)):
            image.set_data(plane)
        self.title.set_text(_title(self.view, t, step))
        return [*self.images, self.title]

    def save(self, path: Path) -> None:
        with atomic_path(Path(path)) as tmp:
            self.figure.savefig(tmp, dpi=self.figure.dpi)


def check_dpi(dpi: int) -> int:
    if not 1 <= dpi <= 2000:
        raise StencilforgeError(f"--dpi must be from 1 to 2000, got {dpi}")
    return dpi


def plot_array(out: str | Path, data: np.ndarray, view: View, t: float, step: int, dpi: int = 100, overwrite: bool = True) -> Path:
    """Draw one field (interior values) to a PNG; an existing `out` is refused unless `overwrite`."""
    require("matplotlib", f"drawing {out}")
    check_dpi(dpi)
    out = check_output(out, "image", IMAGE_SUFFIXES, overwrite=overwrite)
    fig = FieldFigure(view, np.asarray(data), dpi)
    fig.show(np.asarray(data), t, step)
    fig.save(out)
    return out


def _view(series, field: str) -> View:
    info = series.info
    return View(info.problem, field, info.spacing, info.lower)


def plot_file(path: str | Path, out: str | Path, step: int | None = None, field: str | None = None, dpi: int = 100,
              overwrite: bool = False) -> Path:
    """Draw snapshot `step` (default: the last complete one) of a snapshot file; an existing `out` is refused unless
    `overwrite`, as run refuses its outputs."""
    require("matplotlib", f"drawing {out}")
    check_dpi(dpi)
    with open_series(path) as series:
        name = series.field_name(field)
        i = series.index_of(step)
        return plot_array(out, series.frame(name, i), _view(series, name), float(series.times[i]), int(series.steps[i]), dpi,
                          overwrite)


def movie_writer(out: Path, fps: int):
    from matplotlib import animation

    if out.suffix.lower() == ".gif":
        return animation.PillowWriter(fps=fps)
    if not animation.writers.is_available("ffmpeg"):
        raise StencilforgeError(f"cannot write {out}: .mp4 needs ffmpeg on the PATH; write a .gif instead")
    return animation.FFMpegWriter(fps=fps)


def animate_file(path: str | Path, out: str | Path, field: str | None = None, fps: int = 10, dpi: int = 80,
                 overwrite: bool = False) -> Path:
    """Every complete snapshot as one frame, on one colour scale (the min and max over all frames); an existing `out`
    is refused unless `overwrite`."""
    FuncAnimation = require("matplotlib.animation", f"drawing {out}").FuncAnimation

    check_dpi(dpi)
    out = check_output(out, "animation", MOVIE_SUFFIXES, overwrite=overwrite)
    if fps < 1:
        raise StencilforgeError(f"fps must be at least 1, got {fps}")
    writer = movie_writer(out, fps)
    with open_series(path) as series:
        name = series.field_name(field)
        series.index_of(None)
        lo, hi = np.inf, -np.inf
        for i in range(len(series)):
            frame = series.frame(name, i)
            finite = frame[np.isfinite(frame)]
            if finite.size:
                lo, hi = min(lo, float(finite.min())), max(hi, float(finite.max()))
        limits = (lo, hi) if lo <= hi else (None, None)
        fig = FieldFigure(_view(series, name), series.frame(name, 0), dpi, *limits)

        def draw(i: int):
            return fig.show(series.frame(name, i), float(series.times[i]), int(series.steps[i]))

        anim = FuncAnimation(fig.figure, draw, frames=len(series), blit=False, repeat=False)
        with atomic_path(out) as tmp:
            anim.save(tmp, writer=writer, dpi=dpi)
    return out
