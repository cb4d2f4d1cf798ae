"""Acoustic wave u_tt = c^2 del^2 u, 2nd order in time, radius-r star Laplacian (ISO3DFD).

Written with the equation API as u.next = 2 u - u.prev + vel L u, with vel = (c dt)^2
per cell; u.prev is read only at the cell, so u.next reuses its buffer
(ISO3DFD's in-place form) and a pointer swap ends the step.
Weights are exact (Fornberg), not the sample's rounded table.

With fields stored in float16 (`storage="float16"`) the update is written in increment
form, d.next = d + dt^2 c^2 L u and u.next = u + d.next, with d = u - u.prev a field of
its own: the step's small change keeps float16's relative precision in d instead of being
rounded against u, where 2 u - u.prev loses it and the solution drifts (the errors of both
forms: docs/performance.md, half-precision storage).

Default case: a standing wave u = cos(omega t) sin(pi x) sin(pi y) sin(pi z),
omega = c pi sqrt(3), in a constant-velocity box, with ghost layers set from it.
With a layered or file velocity model, or a Ricker source, the walls are fixed
(zero ghost layers, as in ISO3DFD) and there is no exact solution.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..boundary import Dirichlet
from ..errors import StencilforgeError
from ..grid import Grid
from ..ir.nodes import Constant, Eq, Field, Grid as NodeGrid, cos, sin
from ..ir.operators import laplacian
from ..problem import Problem, Source
from ..stencil import Stencil
from .base import positive, stable_dt

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


def dt_limit(lap: Stencil, c_max: float) -> float:
    """Leapfrog is stable while (c dt)^2 max|L(k)| <= 4."""
    return 2.0 / (c_max * np.sqrt(lap.symbol_max()))


def problem(
    shape=DEFAULT_SHAPE,
    dtype="float32",
    radius: int = 8,
    velocity: str = "constant",
    c: float = 1.0,
    source: bool = False,
    frequency: float = 10.0,
    dt: float | None = None,
    storage: str | None = None,
) -> tuple[Problem, dict]:
    """The leapfrog update u.next = 2 u - u.prev + vel L u with vel = (c dt)^2 per cell, and the
    parameters a run reports. `storage`: the fields' storage dtype (`Field`); float16 takes the
    increment form (module docstring), and runs as generated passes."""
    shape = tuple(shape)
    if len(shape) != 3:
        raise StencilforgeError(f"wave3d needs a 3D shape, got {shape}")
    if not isinstance(radius, (int, np.integer)) or not 1 <= radius <= 8:
        raise StencilforgeError(f"radius must be an integer from 1 to 8, got {radius}")
    c = positive("c", c)
    frequency = positive("frequency", frequency)
    lattice = Grid.unit_box(shape, dtype, ghost=int(radius))
    speed = velocity_model(velocity, lattice, c)
    lap = Stencil.laplacian(3, radius, lattice.spacing)
    step_dt = stable_dt(dt, dt_limit(lap, float(speed.max())), 0.5, f"wave3d radius {radius} on this grid")
    grid = NodeGrid(shape, spacing=lattice.spacing, origin=lattice.lower, dtype=dtype)
    vel_values = np.asarray((speed * step_dt) ** 2, dtype=dtype)
    params: dict[str, Any] = {"radius": int(radius), "velocity": velocity, "c": c, "source": bool(source), "dt": step_dt}
    common: dict[str, Any] = dict(dt=step_dt, steps=200, name="wave3d")
    order = 2 * int(radius)
    if storage is not None and Field("u", grid, storage=storage).half:
        # c^2 is stored rather than (c dt)^2, which would be a float16 subnormal on fine grids
        u, d = Field("u", grid, storage=storage), Field("d", grid, storage=storage)
        c2 = Field("c2", grid, levels=1, storage=storage)
        dt2 = Constant("dt2", step_dt * step_dt)
        updates = [Eq(d.next, d + dt2 * (c2 * laplacian(u, order=order))), Eq(u.next, u + d.next)]
        initial: dict = {c2: np.asarray(speed * speed, dtype=dtype)}
        params["storage"] = storage
        moved: tuple[Field, ...] = (u, d)  # a source moves u and its increment alike
    else:
        u, vel = Field("u", grid, levels=3), Field("vel", grid, levels=1)
        updates = [Eq(u.next, 2 * u - u.prev + vel * laplacian(u, order=order))]
        initial, d = {vel: vel_values}, None
        moved = (u,)
    if velocity == "constant" and not source:
        omega = standing_wave_frequency(c)
        s0, s1, s2 = (sin(np.pi * x) for x in grid.coordinates)
        standing = cos(omega * grid.t) * s0 * s1 * s2
        walls = cos(omega * grid.t) * (s0 * s1 * s2)  # a time factor times a spatial part: walls are scaled
        initial[u] = standing
        if d is not None:
            initial[d] = standing - cos(omega * (grid.t - step_dt)) * s0 * s1 * s2
        return Problem(updates, initial=initial, boundary={u: Dirichlet(walls)}, exact={u: standing}, **common), params
    sources = []
    if source:
        centre = tuple(n // 2 for n in shape)
        scale = float(vel_values[centre]) / float(np.prod(lattice.spacing))
        wavelet = ricker(frequency)
        at = tuple(lo + i * h for lo, i, h in zip(lattice.lower, centre, lattice.spacing))
        sources += [Source(f, at, lambda t: scale * wavelet(t), interpolation="nearest") for f in moved]  # scaled at that node
        params["frequency"] = frequency
    return Problem(updates, initial=initial, boundary={u: Dirichlet(0.0)}, sources=sources, **common), params
