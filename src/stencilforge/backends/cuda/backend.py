"""The cuda backend: generated kernels compiled lazily, launched on CuPy arrays, timed with events.

CuPy is imported only when a backend is constructed or probed, so this module
(and `kernel_source`) loads on machines without it.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import Any, Callable, NamedTuple

import numpy as np

from ...errors import StencilforgeError
from ...grid import Grid, pitched, row_pitch
from ...optional import missing
from ...plan import AxisOperator, Sweep
from ...printers import cuda as printers_cuda
from ...tuning import cached_pass_schedule, pass_key
from ..base import Launch
from . import codegen, finite
from .compile import load_module
from .facts import DeviceFacts, device_facts
from .kernel import HOPPER, STATIC_SMEM_LIMIT, Kernel, Limits, module_source
from .schedules import FUSED
from .schedules.fused import PAIR_TILE
from .tune import choose, fused_choice, pass_defaults

MAX_GRID_YZ = 65535
LINE_BYTES = 128  # an L2 cache line: a warp's 32 floats

log = logging.getLogger(__name__)


def _cupy():
    import cupy

    return cupy


def unavailable_reason() -> str:
    """One line saying why the backend cannot run here, or an empty string if it can."""
    try:
        cp = _cupy()
    except ImportError:
        return str(missing("cupy", "the cuda backend"))
    except Exception as exc:  # a broken CuPy install raises anything from its import
        return f"CuPy failed to import: {type(exc).__name__}: {exc}".splitlines()[0]
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, driver too old, no device node
        return f"no usable CUDA driver or device ({type(exc).__name__}: {exc})".splitlines()[0]
    return "" if count > 0 else "no CUDA device found"


def device_name(props: dict) -> str:
    """The name in cudaGetDeviceProperties' result (bytes or str, depending on the CuPy version)."""
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def check_fits(nbytes: int) -> None:
    """Raise before allocating if `nbytes` exceeds the device's free memory plus CuPy's cached blocks."""
    cp = _cupy()
    free, total = cp.cuda.runtime.memGetInfo()
    available = free + cp.get_default_memory_pool().free_bytes()
    if nbytes > available:
        name = device_name(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id))
        raise StencilforgeError(
            f"not enough GPU memory: {nbytes} bytes ({nbytes / 2**30:.2f} GiB) needed, "
            f"{available} bytes ({available / 2**30:.2f} GiB) available of {total / 2**30:.1f} GiB on {name}"
        )


def _refused(arr, name: str, shape, dtype, layout: str, maker: str) -> StencilforgeError:
    got = f"{type(arr).__name__} {getattr(arr, 'dtype', '?')} {getattr(arr, 'shape', '?')}"
    return StencilforgeError(
        f"field {name!r} must be a CuPy {np.dtype(dtype).name} array of shape {shape} {layout}, got {got} (use backend.{maker})"
    )


@functools.lru_cache(maxsize=None)
def _facts(device: int, name: str) -> DeviceFacts:
    return device_facts(_cupy(), name)


def resolve(plan, strategy: str, tile, shape, dtype, device_name: str | None = None, facts=None, limits: Limits = HOPPER) -> Kernel:
    """The kernel for a plan: `auto` asks `choose`; an explicit tile overrides the chosen one; shared memory
    within the device's `limits`."""
    if strategy == "auto":
        strategy, chosen = choose(plan, shape, dtype, device_name, facts)
        tile = chosen if tile is None else tile
    if isinstance(plan, AxisOperator):
        return codegen.operator_kernel(plan, strategy, dtype, tile)
    return codegen.sweep_kernel(plan, strategy, dtype, tile, limits)


def fused_kernel(sweep: Sweep, grid: Grid, strategy: str, steps: int | None = None, tile=None) -> tuple[Kernel, int] | str:
    """(kernel, steps): the kernel of `steps` steps of `sweep` in one pass (default: `tune.fused_choice`'s steps and tile, with the
    blocks per SM measured for them) from the first schedule of `schedules.FUSED` that applies; else why there is
    none: each schedule's reason, or a strategy other than auto asked for."""
    chosen_steps, chosen_tile, blocks = fused_choice(sweep, grid.dtype)
    steps = chosen_steps if steps is None else steps
    if strategy != "auto":
        return f"strategy {strategy} was asked for"
    if grid.ghost < sweep.radius:
        return f"ghost width {grid.ghost} is below the radius {sweep.radius}"
    if tile is None:
        tile = chosen_tile if steps == chosen_steps else PAIR_TILE[grid.ndim]
    blocks = blocks if (steps, tuple(tile)) == (chosen_steps, tuple(chosen_tile)) else None  # measured for that shape only
    reasons = []
    for schedule in FUSED:
        why = schedule.applies(sweep, steps)
        if why is None:
            return schedule.build(sweep, grid.dtype, tuple(tile), f"sf_fused{steps}_{sweep.out}", steps, min_blocks=blocks), steps
        reasons.append(why)
    return "; ".join(reasons)


class EventClock:
    """Accumulates the time between pairs of CUDA events without forcing a synchronisation per region.

    `start()` records on the current stream and returns the token `stop(token)` takes.
    """

    def __init__(self, cp):
        self._cp = cp
        self._pending: list = []
        self._spare: list = []
        self._total = 0.0

    def start(self):
        ev = self._spare.pop() if self._spare else (self._cp.cuda.Event(), self._cp.cuda.Event())
        ev[0].record()
        return ev

    def stop(self, ev) -> None:
        ev[1].record()
        self._pending.append(ev)
        if len(self._pending) >= 256:
            self._fold(wait=False)

    def _fold(self, wait: bool) -> None:
        keep = []
        for i, (a, b) in enumerate(self._pending):
            if wait:
                b.synchronize()
            elif not b.done:
                keep = self._pending[i:]
                break
            self._total += self._cp.cuda.get_elapsed_time(a, b) / 1e3
            self._spare.append((a, b))
        self._pending = keep

    def seconds(self) -> float:
        self._fold(wait=True)
        return self._total


class _Unclocked:
    """The kernel clock before anyone asks for it: records nothing."""

    def start(self):
        return None

    def stop(self, token) -> None:
        pass


class _Replay:
    """A captured CUDA graph and the memory pool its launches allocated from (kept alive with it)."""

    def __init__(self, backend, graph, pool):
        self.backend, self.graph, self.pool = backend, graph, pool

    def __call__(self) -> None:
        token = self.backend._timer.start()
        self.graph.launch()
        self.backend._timer.stop(token)


class GeneratedKernel(NamedTuple):
    """A generated kernel's CUDA C, its array arguments in order, its launch and what it computes (for messages)."""

    source: str
    names: tuple[str, ...]
    blocks: tuple[int, int, int]
    threads: tuple[int, int, int]
    what: str


def pass_kernel(p, lattice: Grid, constants, images=None, block=None, rows: int | None = None, vector: int = 1,
                wide_index: bool | None = None, planes_per_thread: int | None = None, words: bool = False,
                pitch: int | None = None) -> GeneratedKernel:
    """One pass of a problem's equations: threads of `block` each computing `rows` rows (or, in 3D,
    `planes_per_thread` planes) of `vector` columns, or with `words` the two cells of a 4-byte word (float16
    arrays, rows of an even number of padded cells). Without `block`, `tune.pass_defaults` chooses.
    Offsets are 32-bit unless the arrays reach 2^31 cells (or `wide_index` says otherwise).
    `images`, `pitch`: see `Backend.equation_pass`."""
    if block is None:
        chosen = pass_defaults(p, lattice.ndim, lattice.padded_shape[-1])
        block, planes_per_thread, rows, vector, words = (chosen[k] for k in ("block", "planes_per_thread", "rows", "vector", "words"))
    span = math.prod(lattice.padded_shape[:-1]) * (pitch or lattice.padded_shape[-1])
    wide = span >= 2**31 if wide_index is None else wide_index
    source, names = printers_cuda.pass_source(p, lattice.ndim, lattice.dtype, constants, rows=rows, vector=vector, wide_index=wide,
                                              images=images, planes_per_thread=planes_per_thread, words=words, pitch=pitch)
    what = f"the pass computing {', '.join(eq.label for eq in p.equations)}"
    blocks, threads = printers_cuda.launch_grid(lattice.shape, block, rows, vector, planes_per_thread,
                                                lattice.padded_shape[-1] // 2 if words else None)
    if blocks[1] > MAX_GRID_YZ or blocks[2] > MAX_GRID_YZ:
        raise StencilforgeError(f"{what}: grid {blocks} exceeds the CUDA limit of {MAX_GRID_YZ} blocks along y and z")
    return GeneratedKernel(source, names, blocks, threads, what)


def pair_kernel(p, lattice: Grid, constants, walls, reach: int, images=None) -> GeneratedKernel | None:
    """Two steps of one 2D pass in one kernel (`printers.cuda_pair`), or None where that does not apply:
    3D, 2^31 cells or more, float16 fields (slower than single steps: half-storage-h{100,200}-2026-11-24.json),
    or a reach the tile's shared memory cannot hold."""
    from ...printers import cuda_pair

    if lattice.ndim != 2 or math.prod(lattice.padded_shape) >= 2**31 or printers_cuda.half_slots(p):
        return None
    bytes_per_cell = len(p.writes) * lattice.dtype.itemsize  # of the middle state in shared memory
    tile = cuda_pair.TILE
    while bytes_per_cell * (tile[0] + 2 * reach) * (tile[1] + 2 * reach) > STATIC_SMEM_LIMIT:
        tile = (tile[0] // 2, tile[1])
    if tile[0] < 2 * reach:
        return None
    source, names = cuda_pair.pair_source(p, lattice.dtype, constants, walls, reach, tile=tile, images=images)
    blocks, threads = cuda_pair.launch_grid(lattice.shape, tile)
    if blocks[1] > MAX_GRID_YZ:
        return None
    what = f"two steps of the pass computing {', '.join(eq.label for eq in p.equations)}"
    return GeneratedKernel(source, names, blocks, threads, what)


def _generated_runner(function, blocks, threads, names, constants, lattice: Grid, extent) -> Callable:
    """run(arrays, params, *times) for a generated kernel taking the arrays `names`, each constant and the
    times in the field dtype, per axis lo and h (double), the extent and the global index of the first interior
    point (both of type `extent`), then g."""
    T = lattice.dtype.type
    tail = []
    for a in range(lattice.ndim):
        tail += [np.float64(lattice.lower[a]), np.float64(lattice.spacing[a]), extent(lattice.shape[a]),
                 extent(lattice.first_index(a))]
    tail.append(np.int32(lattice.ghost))

    def run(arrays, params, *times):
        args = [arrays[n] for n in names] + [T(params[c.name]) for c in constants] + [T(t) for t in times] + tail
        function(blocks, threads, tuple(args))

    return run


class CudaBackend:
    """Generated CUDA kernels on CuPy arrays; data stays on the device between steps.

    `requested` and `requested_tile` are what the constructor was given; the strategy a kernel
    resolved to, and the one its last call ran, are the returned `Launch`'s."""

    name = "cuda"
    fuses_steps = True  # with strategy auto
    writes_ghost_images = True
    half_storage = True
    device = True
    captures = True

    def wall_scaler(self) -> None:
        """None: walls value(x) f(t) scale on the device, by one scatter (boundary._scaled_scatter)."""
        return None

    def __init__(self, strategy: str = "auto", tile=None):
        if strategy != "auto" and strategy not in codegen.STRATEGIES:
            raise StencilforgeError(
                f"unknown CUDA strategy {strategy!r}: choose one of auto, {', '.join(codegen.STRATEGIES)}"
            )
        reason = unavailable_reason()
        if reason:
            raise StencilforgeError(f"the cuda backend is not available: {reason}")
        cp = _cupy()
        self._cp = cp
        self.requested = strategy
        self.requested_tile = None if tile is None else tuple(tile)
        device = cp.cuda.Device()
        self.arch = f"sm_{device.compute_capability}"
        self.limits = Limits.of_device(cp)
        self.device_name = device_name(cp.cuda.runtime.getDeviceProperties(device.id))
        self._modules: dict[str, Any] = {}  # CuPy RawModules by source: a cache, whatever built them
        self._copy_kernels: dict = {}  # the wall-gather kernels by dtype and array count
        self._timer: _Unclocked | EventClock = _Unclocked()

    def facts(self) -> DeviceFacts:
        """The device's SM count and copy bandwidth, which some of `auto`'s rules read."""
        return _facts(self._cp.cuda.Device().id, self.device_name)

    @property
    def xp(self):
        return self._cp

    @staticmethod
    def available() -> bool:
        return unavailable_reason() == ""

    @staticmethod
    def unavailable_reason() -> str:
        return unavailable_reason() or "available"

    # ------------------------------------------------------------ compilation

    def _function(self, kernel: Kernel, dtype):
        """Compile (or load from the disk cache) the module holding `kernel`; cached per instance."""
        source = module_source([kernel], dtype, f"{kernel.name}, strategy {kernel.strategy}, tile {kernel.tile}")
        what = f"kernel {kernel.name} (strategy {kernel.strategy})"
        module = self._modules.get(source)
        if module is None:
            cp = self._cp
            try:
                module = load_module(cp, source, self.arch, what)
                function = module.get_function(kernel.name)
            except StencilforgeError:
                raise
            except Exception as exc:  # CuPy's compile and load errors carry multi-line logs
                raise StencilforgeError(f"CUDA compile of {what} failed: {str(exc).splitlines()[0]}") from None
            if kernel.dynamic_smem > STATIC_SMEM_LIMIT:
                function.max_dynamic_shared_size_bytes = kernel.dynamic_smem
            self._modules[source] = module
        return module.get_function(kernel.name)

    def _launcher(self, kernel: Kernel, dtype) -> Callable:
        function = self._function(kernel, dtype)
        cp = self._cp
        what = f"kernel {kernel.name} (strategy {kernel.strategy})"

        def launch(grid, args):
            if grid[1] > MAX_GRID_YZ or grid[2] > MAX_GRID_YZ:
                raise StencilforgeError(f"{what}: grid {grid} exceeds the CUDA limit of {MAX_GRID_YZ} blocks along y and z")
            try:
                function(grid, kernel.block, args, shared_mem=kernel.dynamic_smem)
            except cp.cuda.driver.CUDADriverError as exc:
                raise StencilforgeError(f"CUDA launch of {what} failed: {exc}") from None

        return launch

    def _checked(self, arr, name: str, shape, dtype):
        """An axis operator's array: a C-contiguous CuPy array of `shape` and `dtype`."""
        cp = self._cp
        if not (isinstance(arr, cp.ndarray) and arr.shape == shape and arr.dtype == dtype and arr.flags.c_contiguous):
            raise _refused(arr, name, shape, dtype, "in C order", "asarray")
        return arr

    def _fields(self, fields, names, shape, dtype) -> tuple[tuple, int]:
        """A sweep's arrays, each C-contiguous or in `field`'s layout (rows a pitch apart), and the
        row pitch in elements that the launch passes for all of them."""
        cp = self._cp
        arrays, pitches = [], set()
        for n in names:
            arr = fields[n]
            ok = isinstance(arr, cp.ndarray) and arr.shape == shape and arr.dtype == dtype
            pitch = row_pitch(arr) if ok else None
            if pitch is None:
                raise _refused(arr, n, shape, dtype, "with contiguous rows and planes", "field")
            arrays.append(arr)
            pitches.add(pitch)
        if len(pitches) > 1:
            raise StencilforgeError(f"fields {', '.join(map(repr, names))} must share one row layout (row pitches {sorted(pitches)})")
        return tuple(arrays), pitches.pop()

    def field(self, a, ghost: int):
        """A device copy of a ghosted field whose interior rows start on 128-byte lines.

        The rows lie a pitch of whole lines apart, so no warp's row access straddles one line
        more than it must (benchmarks/results/h100-aligned-rows.txt). The result is a view of shape
        `a.shape` (`grid.pitched`); sweep kernels take its pitch."""
        cp = self._cp
        src = a if isinstance(a, cp.ndarray) else np.ascontiguousarray(a)
        if src.ndim < 2 or LINE_BYTES % src.itemsize:
            return cp.array(src)
        line = LINE_BYTES // src.itemsize
        first, pitch, n = -ghost % line, -(-src.shape[-1] // line) * line, src.shape[-1]
        rows = math.prod(src.shape[:-1])
        check_fits((rows * pitch + first) * src.itemsize)
        view = pitched(cp.empty(rows * pitch + first, dtype=src.dtype), src.shape, pitch, first)
        if isinstance(src, cp.ndarray):
            view[...] = src
        else:
            rt = cp.cuda.runtime
            width = n * src.itemsize
            rt.memcpy2D(view.data.ptr, pitch * src.itemsize, src.ctypes.data, width, width, rows, rt.memcpyHostToDevice)
        return view

    # ------------------------------------------------------------ the interface

    def takes_sweep(self, sweep: Sweep, grid: Grid) -> bool:
        """`codegen.takes_sweep` for the strategy asked for."""
        return codegen.takes_sweep(sweep, grid.dtype, self.requested)

    def sweep(self, sweep: Sweep, grid: Grid, background: bool = False) -> Launch:
        kernel = resolve(sweep, self.requested, self.requested_tile, grid.shape, grid.dtype, self.device_name,
                         self.facts() if self.requested == "auto" else None, self.limits)
        scalar = None
        if kernel.vector > 1:  # vector kernels need every row to start on a vector; their scalar kernel otherwise
            scalar = codegen.sweep_kernel(sweep, codegen.SCALAR_OF[kernel.strategy], grid.dtype, limits=self.limits)
            if not kernel.fits(grid.shape, grid.ghost):
                log.info("%s: %s instead of %s, whose vectors of %d cells do not fit rows of %d with ghost width %d",
                         sweep.out, scalar.strategy, kernel.strategy, kernel.vector, grid.shape[-1], grid.ghost)
                kernel, scalar = scalar, None
        if grid.ghost < sweep.radius:
            raise StencilforgeError(f"grid ghost width {grid.ghost} is smaller than the stencil radius {sweep.radius}")
        return self._sweep_runner(kernel, grid, scalar)

    def sweep_fused(self, sweep: Sweep, grid: Grid, tile=None, steps: int | None = None, *, window: int | None = None) -> Launch | None:
        """`steps` steps of `sweep` in one pass (default and tile: `fused_choice`), the middle states' ghost
        cells taken from out's and the `_walls{s}` fields', or None where they cannot be fused or another
        strategy than `auto` was asked for. `window` is not read: the measured steps and tiles go together."""
        built = fused_kernel(sweep, grid, self.requested, steps, tile)
        if isinstance(built, str):
            log.info("%s: single steps, no fused kernel: %s", sweep.out, built)
            return None
        kernel, steps = built
        launch = self._sweep_runner(kernel, grid)
        launch.steps = steps
        return launch

    def _picker(self, kernel: Kernel, scalar: Kernel | None, dtype, ran: Launch, ghost: int = 0) -> Callable:
        """pick(arrays, fits) -> (launch, kernel) for one call: `kernel`, or `scalar` where the call
        does not fit it (`Kernel.fits`, decided by the caller) or, for a vector kernel, one of the
        arrays' interiors (past `ghost` cells) does not start on its vector (a misaligned vector access
        faults and poisons the context). What runs is recorded in `ran`, so a run's summary names the
        kernel that ran."""
        launch = self._launcher(kernel, dtype)
        if scalar is None:
            return lambda arrays, fits=True: (launch, kernel)
        align = kernel.vector * np.dtype(dtype).itemsize
        first = ghost * np.dtype(dtype).itemsize
        fallback: list[Callable] = []
        told: set[str] = set()

        def pick(arrays, fits=True):
            k, go = kernel, launch
            misaligned = fits and kernel.vector > 1 and any((a.data.ptr + first) % align for a in arrays)
            if not fits or misaligned:
                if not fallback:
                    fallback.append(self._launcher(scalar, dtype))
                if misaligned not in told:  # each reason once per kernel
                    told.add(misaligned)
                    if misaligned:
                        log.warning("%s falls back to %s: an array does not start on the %d-byte boundary of its vectors",
                                    kernel.name, scalar.strategy, align)
                    else:
                        log.info("%s falls back to %s for arrays of a shape it does not fit", kernel.name, scalar.strategy)
                k, go = scalar, fallback[0]
            ran.strategy, ran.tile = k.strategy, k.tile
            return go, k

        return pick

    def _sweep_runner(self, kernel: Kernel, grid: Grid, scalar: Kernel | None = None) -> Launch:
        """Launch `kernel` (or `scalar`, see `_picker`) over the interior on fields checked against the
        grid, timed by CUDA events."""
        ran = Launch(None, kernel.strategy, kernel.tile)  # type: ignore[arg-type]  # run is set below: the picker records into `ran`
        pick = self._picker(kernel, scalar, grid.dtype, ran, grid.ghost)
        blocks = {k.name: k.grid(grid.shape) for k in (kernel, scalar) if k is not None}
        scalars = tuple(np.int32(n) for n in grid.shape) + (np.int32(grid.ghost),)
        shape, dtype = grid.padded_shape, grid.dtype

        def run(fields):
            ptrs, pitch = self._fields(fields, kernel.args, shape, dtype)
            go, k = pick(ptrs, pitch % kernel.vector == 0)
            timer = self._timer
            ev = timer.start()
            go(blocks[k.name], ptrs + scalars + (np.int32(pitch),))
            timer.stop(ev)

        ran.run = run
        return ran

    def axis_operator(self, op: AxisOperator, dtype, shape=None, background: bool = False) -> Launch:
        """`shape` (the arrays' shape, when known) lets `auto` use the winner tuned for it."""
        dtype = np.dtype(dtype)
        kernel = resolve(op, self.requested, self.requested_tile, None if shape is None else tuple(shape), dtype, self.device_name,
                         self.facts() if self.requested == "auto" else None)
        ran = Launch(None, kernel.strategy, kernel.tile)  # type: ignore[arg-type]  # run is set below: the picker records into `ran`
        pick = self._picker(kernel, codegen.operator_kernel(op, "rows", dtype) if kernel.vector > 1 or kernel.flat else None, dtype, ran)
        names = (op.inp,) + tuple(d.out for d in op.outputs)

        def run(u, *outs):
            if len(outs) != len(op.outputs):
                raise StencilforgeError(f"the operator writes {len(op.outputs)} outputs, {len(outs)} were given")
            if getattr(u, "ndim", None) != 2:
                raise StencilforgeError(f"axis operators take a 2D array, got shape {getattr(u, 'shape', '?')}")
            shape = tuple(u.shape)
            if shape[op.axis] < op.min_length:
                raise StencilforgeError(f"axis {op.axis} has {shape[op.axis]} points; the operator needs {op.min_length}")
            arrays = tuple(self._checked(a, n, shape, dtype) for a, n in zip((u,) + outs, names))
            go, k = pick(arrays, kernel.fits(shape))
            scalars = (np.int32(shape[0]), np.int32(shape[1])) + ((np.float64(1.0 / shape[1]),) if k.flat else ())
            timer = self._timer
            ev = timer.start()
            go(k.grid(shape), arrays + scalars)
            timer.stop(ev)

        ran.run = run
        return ran

    def equation_pass(self, p, lattice: Grid, constants, images=None, block=None, rows: int | None = None,
                      vector: int = 1, wide_index: bool | None = None, planes_per_thread: int | None = None,
                      words: bool = False, background: bool = False, pitch: int | None = None) -> Callable:
        """run(arrays, params, t) for one pass of a problem's equations (`pass_kernel`), arrays C-contiguous
        (`asarray`) or, with `pitch`, laid out as `field` lays them, launched on the current stream. NVRTC compiles
        before the first pass, whatever `background` says. Without `block`, under strategy auto, the schedule
        `stencilforge tune` stored for this device and pass."""
        k = pass_kernel(p, lattice, constants, images, block, rows, vector, wide_index, planes_per_thread, words, pitch)
        if block is None and self.requested == "auto":
            tuned = cached_pass_schedule(pass_key(self.device_name, k.source, lattice.shape, lattice.dtype))
            if tuned is not None:
                log.info("%s: the schedule `stencilforge tune` stored for %s: %s", k.what, self.device_name, tuned)
                k = pass_kernel(p, lattice, constants, images, wide_index=wide_index, pitch=pitch, **tuned)
        function = self._generated(k.source, k.what, "sf_pass", printers_cuda.OPTIONS)
        return _generated_runner(function, k.blocks, k.threads, k.names, constants, lattice, np.int64)

    def equation_pair(self, p, lattice: Grid, constants, walls, reach: int, images=None) -> Callable | None:
        """run(arrays, params, t, t2) advancing one 2D pass two steps in one kernel (`pair_kernel`), or None
        where it does not apply (see `Backend.equation_pair`)."""
        from ...printers import cuda_pair

        k = pair_kernel(p, lattice, constants, walls, reach, images)
        if k is None:
            return None
        function = self._generated(k.source, k.what, "sf_pair", cuda_pair.OPTIONS)
        return _generated_runner(function, k.blocks, k.threads, k.names, constants, lattice, np.int32)

    def _generated(self, source: str, what: str, name: str, extra: tuple[str, ...]):
        """The function `name` of a generated source, compiled (or loaded from the disk cache)."""
        cp = self._cp
        try:
            return load_module(cp, source, self.arch, what, extra).get_function(name)
        except StencilforgeError:
            raise
        except Exception as exc:  # CuPy's compile and load errors carry multi-line logs
            raise StencilforgeError(f"CUDA compile of {what} failed: {str(exc).splitlines()[0]}") from None

    def copy_cells(self, arrays, dst, src) -> None:
        """a.flat[dst] = a.flat[src] for each array (int64 indices), all in one launch that reads the
        indices once: the per-step wall fill of every periodic or Neumann field of a problem."""
        by_dtype: dict = {}
        for a in arrays:
            by_dtype.setdefault(a.dtype, []).append(a)
        groups = [same[first:first + 8] for same in by_dtype.values() for first in range(0, len(same), 8)]
        for group in groups:
            key = (group[0].dtype, len(group))
            kernel = self._copy_kernels.get(key)
            if kernel is None:
                ctype = printers_cuda.STORED_CTYPE[group[0].dtype.name]
                k = len(group)
                args = ", ".join(f"{ctype}* a{j}" for j in range(k))
                body = " ".join(f"a{j}[di] = a{j}[si];" for j in range(k))
                kernel = self._copy_kernels[key] = self._cp.RawKernel(
                    f'extern "C" __global__ void sf_copy_cells({args}, const long long* d, const long long* s, long long n)'
                    " { const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;"
                    f" const long long di = d[i], si = s[i]; {body} }}",
                    "sf_copy_cells",
                )
            n = dst.size
            kernel(((n + 255) // 256,), (256,), (*group, dst, src, np.int64(n)))

    def all_finite(self, views) -> bool:
        """One read of each view's bits, one wait for all (`finite.all_finite`)."""
        return finite.all_finite(views)

    def capture(self, work: Callable[[], object]) -> Callable[[], None]:
        """`work`'s launches as one CUDA graph, captured on a stream of its own into a memory pool of its own (what
        the launches allocate stays theirs for as long as the graph lives); replay() launches it on the current
        stream, timed as one region by the kernel clock."""
        cp = self._cp
        stream, pool, clock = cp.cuda.Stream(non_blocking=True), cp.cuda.MemoryPool(), self._timer
        self.synchronize()
        self._timer = _Unclocked()  # events recorded during a capture would become nodes of the graph
        try:
            with stream, cp.cuda.using_allocator(pool.malloc):
                stream.begin_capture()
                try:
                    work()
                finally:
                    graph = stream.end_capture()
        except (cp.cuda.runtime.CUDARuntimeError, cp.cuda.driver.CUDADriverError) as exc:
            raise StencilforgeError(f"capturing a CUDA graph failed: {exc}") from None
        finally:
            self._timer = clock
        return _Replay(self, graph, pool)

    def check_fits(self, nbytes: int) -> None:
        check_fits(nbytes)

    def asarray(self, a, dtype=None):
        """A C-contiguous device array: CuPy input is copied only if strided or of another dtype,
        NumPy input is uploaded once (after a host-side contiguous copy if needed)."""
        cp = self._cp
        if isinstance(a, cp.ndarray):
            return cp.ascontiguousarray(a, dtype=dtype)
        host = np.ascontiguousarray(a, dtype=dtype)
        check_fits(host.nbytes)
        return cp.asarray(host)

    def to_host(self, a) -> np.ndarray:
        return self._cp.asnumpy(a) if isinstance(a, self._cp.ndarray) else np.asarray(a)

    def synchronize(self) -> None:
        self._cp.cuda.get_current_stream().synchronize()

    def settle(self) -> None:
        """Nothing compiles in the background here: NVRTC compiles before a kernel's first launch."""

    def kernel_seconds(self) -> float:
        """Time of the sweeps and axis operators launched since the first call, from CUDA events.

        The first call starts the clock and returns 0: an event pair around every launch costs device time
        (docs/performance.md, "Decisions"), which code that never asks (the API's one-off calls, the bench,
        tune) should not pay. The time loop and the MPI runner read it first
        as their base."""
        if isinstance(self._timer, _Unclocked):
            self._timer = EventClock(self._cp)
        return self._timer.seconds()
