"""Acoustic wave u_tt = c^2 del^2 u, 2nd order in time, radius-r star Laplacian (seed 002, ISO3DFD).

The update is ISO3DFD's in-place form, u_prev <- 2u - u_prev + (c dt)^2 L u,
followed by a pointer swap; (c dt)^2 is stored per cell as the velocity model.
Weights are exact (Fornberg), not the sample's rounded table.

Default case: a standing wave u = cos(omega t) sin(pi x) sin(pi y) sin(pi z),
omega = c pi sqrt(3), in a constant-velocity box, with ghost layers set from it.
With a layered or file velocity model, or a Ricker source, the walls are fixed
(zero ghost layers, as in ISO3DFD) and there is no exact solution.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..boundary import Dirichlet
from ..errors import StencilforgeError
from ..grid import Grid
from ..plan import Sweep, Term
from ..stencil import Stencil
from .base import PointSource, Setup, padded, positive, stable_dt

DEFAULT_SHAPE = (64, 64, 64)
PARAMS = ("radius", "velocity", "c", "source", "frequency", "dt")


def ricker(frequency: float):
    delay = 1.0 / frequency

    def w(t: float) -> float:
        a = (np.pi * frequency * (t - delay)) ** 2
        return float((1.0 - 2.0 * a) * np.exp(-a))

    return w


def velocity_model(spec: str, grid: Grid, c: float) -> np.ndarray:
    """Per-cell speed on the interior: constant, three layers along axis 0, or a .npy file."""
    if not isinstance(spec, (str, Path)):
        raise StencilforgeError(
            f"velocity must be 'constant', 'layered' or the path of a .npy file (numpy.save an array first), got {type(spec).__name__}"
        )
    spec = str(spec)
    if spec == "constant":
        return np.full(grid.shape, c)
    if spec == "layered":
        depth = grid.coords(0, ghosts=False)
        layers = np.where(depth < 1 / 3, c, np.where(depth < 2 / 3, 1.5 * c, 2.0 * c))
        return np.broadcast_to(layers[:, None, None], grid.shape).copy()
    path = Path(spec)
    if path.suffix != ".npy":
        raise StencilforgeError(f"velocity must be 'constant', 'layered' or a .npy file, got {spec!r}")
    try:
        model = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise StencilforgeError(f"cannot read velocity file {spec}: {exc}") from None
    if model.shape != grid.shape:
        raise StencilforgeError(f"velocity file {spec} has shape {model.shape}, the grid needs {grid.shape}")
    if np.iscomplexobj(model):
        raise StencilforgeError(f"velocity file {spec} holds complex values; speeds must be real")
    if not np.issubdtype(model.dtype, np.number) or not np.all(np.isfinite(model)):
        raise StencilforgeError(f"velocity file {spec} contains NaN, Inf or non-numeric values")
    if np.any(model <= 0):
        raise StencilforgeError(f"velocity file {spec} has non-positive speeds")
    return model.astype(np.float64)


def standing_wave_frequency(c: float) -> float:
    return c * np.pi * np.sqrt(3.0)


def standing_wave(c: float):
    omega = standing_wave_frequency(c)

    def u(x, y, z, t):
        return np.cos(omega * t) * np.sin(np.pi * x) * np.sin(np.pi * y) * np.sin(np.pi * z)

    return u


def dt_limit(lap: Stencil, c_max: float) -> float:
    """Leapfrog is stable while (c dt)^2 max|L(k)| <= 4."""
    return 2.0 / (c_max * np.sqrt(lap.symbol_max()))


def build(
    shape=DEFAULT_SHAPE,
    dtype="float32",
    radius: int = 8,
    velocity: str = "constant",
    c: float = 1.0,
    source: bool = False,
    frequency: float = 10.0,
    dt: float | None = None,
) -> Setup:
    shape = tuple(shape)
    if len(shape) != 3:
        raise StencilforgeError(f"wave3d needs a 3D shape, got {shape}")
    if not isinstance(radius, (int, np.integer)) or not 1 <= radius <= 8:
        raise StencilforgeError(f"radius must be an integer from 1 to 8, got {radius}")
    c = positive("c", c)
    frequency = positive("frequency", frequency)
    grid = Grid.unit_box(shape, dtype, ghost=int(radius))
    lap = Stencil.laplacian(3, radius, grid.spacing)
    speed = velocity_model(velocity, grid, c)
    step_dt = stable_dt(dt, dt_limit(lap, float(speed.max())), 0.5, f"wave3d radius {radius} on this grid")
    vel = padded(grid, 0.0)
    vel[grid.interior] = (speed * step_dt) ** 2
    sweep = Sweep(
        "u_prev",
        (
            Term("u", Stencil.identity(3).scaled(2)),
            Term("u_prev", Stencil.identity(3).scaled(-1)),
            Term("u", lap, factor="vel"),
        ),
    )
    exact_case = velocity == "constant" and not source
    params = {"radius": int(radius), "velocity": velocity, "c": c, "source": bool(source), "dt": step_dt}
    common = dict(name="wave3d", grid=grid, dt=step_dt, default_steps=200, solution="u", sweep=sweep, swap=("u", "u_prev"))
    if exact_case:
        u_exact = standing_wave(c)
        omega = standing_wave_frequency(c)
        mesh = grid.mesh()
        interior_mesh = grid.mesh(ghosts=False)
        fields = {"u": padded(grid, u_exact(*mesh, 0.0)), "u_prev": padded(grid, u_exact(*mesh, -step_dt)), "vel": vel}
        return Setup(
            **common,
            fields=fields,
            boundaries={"u": Dirichlet(u_exact, time_factor=lambda t: np.cos(omega * t))},
            exact=lambda t: {"u": u_exact(*interior_mesh, t)},
            params=params,
        )
    sources = ()
    if source:
        centre = tuple(grid.ghost + n // 2 for n in shape)
        volume = float(np.prod(grid.spacing))
        sources = (PointSource("u_prev", centre, ricker(frequency), float(vel[centre]) / volume),)
        params["frequency"] = frequency
    fields = {"u": padded(grid, 0.0), "u_prev": padded(grid, 0.0), "vel": vel}
    return Setup(**common, fields=fields, boundaries={"u": Dirichlet(0.0)}, sources=sources, params=params)
