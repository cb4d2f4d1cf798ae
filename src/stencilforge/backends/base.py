"""What every backend offers, stated once, so callers ask capabilities instead of probing attributes.

A backend builds kernels and returns them; building or launching one leaves
the backend as it was. What a kernel chose (the CUDA strategy and tile that
ran) lives on the returned `Launch`, not on the backend.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from ..boundary import Scale, scale_with_numpy
from ..grid import Grid
from ..plan import AxisOperator, Sweep


class Launch:
    """A built kernel: call it as the backend documents; `strategy` and `tile` name what its last
    call ran (None where a backend has one way to run it); `steps` is how many time steps one call advances.
    `compiling`: the Future of a compile still running in the background, else None; a call before it
    finishes waits for it, unless there is a `fallback`: a path with the same bits (the NumPy oracle)
    that calls take until the compile is done, so a run steps on instead of waiting."""

    __slots__ = ("run", "strategy", "tile", "steps", "compiling", "fallback")

    def __init__(self, run: Callable, strategy: str | None = None, tile: tuple | None = None, steps: int = 1,
                 compiling: Future | None = None, fallback: Callable | None = None):
        self.run, self.strategy, self.tile, self.steps, self.compiling = run, strategy, tile, steps, compiling
        self.fallback = fallback

    def __call__(self, *args):
        if self.fallback is not None:
            if not self.ready():
                return self.fallback(*args)
            self.fallback = None
        return self.run(*args)

    def ready(self) -> bool:
        """Compiled (a kernel whose compile failed never is). Asked before every step: once compiled, the
        Future is dropped, so later calls test one attribute."""
        if self.compiling is not None and self.compiling.done() and self.compiling.exception() is None:
            self.compiling = None
        return self.compiling is None

    def wait(self) -> None:
        """Until compiled; a compile error is raised here."""
        if self.compiling is not None:
            self.compiling.result()


class Backend(Protocol):
    """A place where fields live and kernels run (numpy, numba, cuda, or a decomposed wrapper of one).

    `fuses_steps`: whether `sweep_fused` can ever return a kernel (several steps in one pass).
    `device`: whether arrays live in device memory (`check_fits` guards its allocations).
    `writes_ghost_images`: whether `equation_pass` takes `images` (it saves a launch per step on a GPU;
    on a CPU the gather costs little beside the pass).
    `half_storage`: whether its generated passes take fields stored in float16.
    `captures`: whether `capture` records launches for replay (CUDA graphs).
    """

    name: str
    xp: Any
    fuses_steps: bool
    device: bool
    writes_ghost_images: bool
    half_storage: bool
    captures: bool

    def wall_scaler(self) -> Scale | None:
        """The writer of walls value(x) f(t) into host ghost boxes (out = values * factor), asked for when such
        walls bind; None where they scale on the device (one scatter kernel)."""

    def asarray(self, a, dtype=None): ...

    def field(self, a, ghost: int):
        """A new array holding the ghosted field `a`, in the layout this backend's sweeps want (never `a` itself)."""

    def to_host(self, a): ...

    def synchronize(self) -> None: ...

    def settle(self) -> None:
        """Wait for the kernels still compiling in the background (and going into the cache), so that a run ends
        when its work ends: no thread of it busy after it returns."""

    def check_fits(self, nbytes: int) -> None:
        """Refuse, in one line, `nbytes` more than the backend's memory holds."""

    def kernel_seconds(self) -> float | None:
        """Seconds in kernels since the first call (which starts the clock), or None where not measured."""

    def takes_sweep(self, sweep: Sweep, grid: Grid) -> bool:
        """Whether one of its hand schedules runs the linear pass `sweep` (`sweep`); else the pass runs as
        a generated one (`equation_pass`)."""

    def sweep(self, sweep: Sweep, grid: Grid, background: bool = False) -> Launch:
        """run(fields): the sweep's output written over the interior. `background`: the caller steps on while
        a compile of seconds runs (the time loop); a backend may then return at once, its Launch taking a
        path with the same bits until compiled (`Launch.fallback`)."""

    def sweep_fused(self, sweep: Sweep, grid: Grid, *, window: int | None = None) -> Launch | None:
        """run(fields): `steps` steps in one pass (out = S(...S(u))), or None where this sweep cannot fuse.
        `window`: the most steps a pass may take (the run looks at the state that often); a backend may take fewer.

        The state after step s < steps takes its ghost cells from fields[`fused_walls(s)`] (step 1: the output's)."""

    def axis_operator(self, op: AxisOperator, dtype, shape=None, background: bool = False) -> Launch:
        """run(u, *outs) for 1D derivatives with closures; `shape` (when known) helps choose a kernel;
        `background` as for `sweep`."""

    def equation_pass(self, p, lattice: Grid, constants, images=None, background: bool = False, pitch: int | None = None) -> Callable:
        """run(arrays, params, t) for one pass of a problem's equations. `background` as for `sweep`.

        `images` (only where `writes_ghost_images`): written slots -> their walls per axis ("Periodic" or
        "Neumann"); the pass also fills those arrays' ghost cells from the values it writes, as
        `copy_cells` would from their interior images. `pitch` (only where `device`): the arrays' rows lie that
        many elements apart (`Backend.field`'s layout), not a padded row (C-contiguous)."""

    def equation_pair(self, p, lattice: Grid, constants, walls, reach: int, images=None) -> Callable | None:
        """run(arrays, params, t, t2): two steps of a pass in one kernel, from level 0 into level 1, or None
        where this backend has none for it. `walls`: the written fields' walls per axis ("Periodic" or
        "Neumann"), or None for Dirichlet walls, whose values at t2 the caller puts in level 1's ghost cells;
        `reach`: how far the pass reads a written field."""

    def copy_cells(self, arrays, dst, src) -> None:
        """a.flat[dst] = a.flat[src] for each array: ghost cells from their interior images."""

    def all_finite(self, views) -> bool:
        """Whether every value of every array in `views` (the interiors the loop checks) is finite."""

    def capture(self, work: Callable[[], object]) -> Callable[[], None]:
        """Only where `captures`: the launches `work()` makes, recorded instead of run (nothing executes), as
        replay() that launches them all again in one call, on the arrays they were given. `work` may change only
        host state, which the caller restores."""


def fused_walls(s: int, out: str) -> str:
    """The name under which a fused pass reads the walls of its middle state after step s."""
    return out if s == 1 else f"_walls{s}"


def with_walls(fields: Mapping, sweep: Sweep, steps: int, walls: list | None = None) -> Mapping:
    """`fields` and the arrays a pass of `steps` fused steps reads the walls of its middle states past the
    first from: `walls` (one per such step, filled by the caller for walls that change in time), else the
    input itself, whose ghost cells are the walls where they stay put (out's hold the same: a kernel may then take
    every middle state's walls from the input's, as numba's march does)."""
    if steps <= 2:
        return fields
    (u,) = sweep.stencil_inputs
    arrays = walls or [fields[u]] * (steps - 2)
    return {**fields, **{fused_walls(s, sweep.out): a for s, a in enumerate(arrays, start=2)}}


class HostMemory:
    """The CPU backends' shared answers: arrays in host memory (checked before a run by
    `resources.check_host_memory`), no kernel clock."""

    device = False
    writes_ghost_images = False
    captures = False

    def takes_sweep(self, sweep: Sweep, grid: Grid) -> bool:
        """True: the CPU sweeps take 1D, 2D and 3D."""
        return True

    def check_fits(self, nbytes: int) -> None:
        pass

    def settle(self) -> None:
        pass

    def kernel_seconds(self) -> float | None:
        return None

    def wall_scaler(self) -> Scale | None:
        return scale_with_numpy

    def all_finite(self, views) -> bool:
        return all(bool(np.isfinite(view).all()) for view in views)

    def equation_pair(self, p, lattice: Grid, constants, walls, reach: int, images=None) -> None:
        """None: on a CPU the generated passes run one step per pass."""
        return None
