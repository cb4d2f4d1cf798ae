"""Multi-threaded CPU kernels generated from the plan and compiled by Numba.

Coefficients travel as an array argument rather than literals, so one compiled
kernel serves every grid spacing and time step of the same stencil shape; the
generated module is written to the on-disk cache and imported, which lets
Numba's own cache keep the machine code between runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import operator
import sys
import threading
import time
from concurrent.futures import Future, wait
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ...boundary import scale_with_numpy
from ...cache import cache_dir, write_atomic
from ...errors import StencilforgeError
from ...grid import Grid
from ...ir.analysis import accesses, reads_time, slot_name
from ...ir.nodes import Compare
from ...plan import AxisOperator, Sweep
from ...printers.numba import lift_axes, pass_source, rounds_as_oracle
from ...printers.numpy import coordinates, evaluate
from ..base import HostMemory, Launch, fused_walls
from ..numpy_ref import NumpyBackend
from .kernel import HEADER, sweep_coefficients
from .schedules import MARCHES, SWEEPS, choose, takes

log = logging.getLogger(__name__)

# Cells x stencil entries of a sweep whose first steps NumPy may take while its kernel compiles: about a second of
# NumPy on one core, against compiles of 1-6 s (cpu-oracle-first-2026-11-24.json).
ORACLE_STEP_BUDGET = 5e8


def _row_expr(weights, start: int, row: str, col: str, axis: int) -> tuple[str, list[float]]:
    coeffs = []
    terms = []
    for o, w in weights:
        coeffs.append(float(w))
        at = f"{row} + {o}" if axis == 0 else row
        bt = f"{col} + {o}" if axis == 1 else col
        terms.append(f"coef[{start + len(coeffs) - 1}] * u[{at}, {bt}]")
    return " + ".join(terms), coeffs


def axis_operator_source(op: AxisOperator) -> tuple[str, np.ndarray]:
    """Source of a one-pass kernel for several 1D derivatives with closures (2D arrays)."""
    if op.ndim != 2:
        raise StencilforgeError("axis operators are implemented for 2D fields")
    coeffs: list[float] = []
    nl = max(len(d.left) for d in op.outputs)
    nr = max(len(d.right) for d in op.outputs)

    def stmts(kind: str, k: int, row: str, col: str, indent: str) -> list[str]:
        out = []
        for m, d in enumerate(op.outputs):
            if kind == "left" and k < len(d.left):
                weights = d.left[k]
            elif kind == "right" and k < len(d.right):
                weights = d.right[k]
            else:
                weights = d.interior
            expr, cs = _row_expr(weights, len(coeffs), row, col, op.axis)
            coeffs.extend(cs)
            coeffs.append(d.scale)
            out.append(f"{indent}o{m}[{row}, {col}] = ({expr}) * coef[{len(coeffs) - 1}]")
        return out

    outs = ", ".join(f"o{m}" for m in range(len(op.outputs)))
    lines = [f"@JIT\ndef kernel(u, {outs}, coef):", "    n0, n1 = u.shape", "    for i in numba.prange(n0):"]
    if op.axis == 1:
        for k in range(nl):
            lines += stmts("left", k, "i", str(k), "        ")
        lines.append(f"        for j in range({nl}, n1 - {nr}):")
        lines += stmts("interior", 0, "i", "j", "            ")
        for k in range(nr):
            lines += stmts("right", k, "i", f"n1 - {k + 1}", "        ")
    else:
        branch = "if"
        for k in range(nl):
            lines.append(f"        {branch} i == {k}:")
            lines.append("            for j in range(n1):")
            lines += stmts("left", k, "i", "j", "                ")
            branch = "elif"
        for k in range(nr):
            lines.append(f"        {branch} i == n0 - {k + 1}:")
            lines.append("            for j in range(n1):")
            lines += stmts("right", k, "i", "j", "                ")
            branch = "elif"
        lines.append("        else:" if branch == "elif" else "        if True:")
        lines.append("            for j in range(n1):")
        lines += stmts("interior", 0, "i", "j", "                ")
    return HEADER + "\n".join(lines) + "\n", np.array(coeffs, dtype=np.float64)


def takes_threads(source: str) -> bool:
    """Whether a generated sweep kernel takes the thread count as its last argument."""
    return ", nt):" in source


def _kernel_path(source: str) -> Path:
    return cache_dir("numba") / f"sf_{hashlib.sha256(source.encode()).hexdigest()[:24]}.py"


def _numpy_first(background: bool, source: str, cells: int, entries: int) -> bool:
    """Whether NumPy's oracle takes the first steps while `source`'s kernel compiles: asked for, the kernel not
    in the cache, and a NumPy step over `cells` x `entries` cheaper than the compile (`ORACLE_STEP_BUDGET`)."""
    return background and cells * entries <= ORACLE_STEP_BUDGET and not _kernel_path(source).exists()


def load_kernel(source: str) -> Callable:
    """Import generated source from the on-disk cache (written atomically) and return `kernel`."""
    return load_module(source).kernel


def load_module(source: str):
    """Import generated source from the on-disk cache (written atomically)."""
    path = _kernel_path(source)
    digest = path.stem[3:]
    cached = path.exists()
    if not cached:
        write_atomic(path, source.encode())
    name = f"stencilforge_generated_{digest}"
    module = sys.modules.get(name)
    if module is None:
        log.info("numba kernel %s: %s", path.stem, "from the kernel cache" if cached else "new, compiled on first call")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None, f"{path} is a Python source file"
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return module


def _axis(sl: slice, k: int) -> tuple[str, str]:
    """(the loop's extent, the index at its counter `c{k}`) of a box's slice: a whole axis, or explicit bounds."""
    if sl == slice(None):
        return f"a.shape[{k}]", f"c{k}"
    if not all(isinstance(v, int) for v in (sl.start, sl.stop)) or sl.step not in (None, 1, -1):
        raise ValueError(f"a wall box's slice {sl} has no loop here")
    step = sl.step or 1
    return str(len(range(sl.start, sl.stop, step))), f"{sl.start} {'+' if step > 0 else '-'} c{k}"


def _copy_lines(dst: tuple[slice, ...], src: tuple[slice, ...], indent: str) -> list[str]:
    """a[dst] = a[src] as loops over the boxes' cells (Numba compiles slice assignments of reversed views for
    seconds; these loops, in a fraction of one)."""
    ends, into, outof = [], [], []
    for k, (d, s) in enumerate(zip(dst, src)):
        (extent, i), (_, j) = _axis(d, k), _axis(s, k)
        ends.append(extent)
        into.append(i)
        outof.append(j)
    lines = [f"{indent}{'    ' * k}for c{k} in range({end}):" for k, end in enumerate(ends)]
    lines.append(f"{indent}{'    ' * len(ends)}a[{', '.join(into)}] = a[{', '.join(outof)}]")
    return lines


def _loop_source(kernels: str, names: tuple[str, ...], arguments: int, swap: tuple[str, str], copies: tuple,
                 gather: bool) -> str:
    """`loop(count, [dst, src,] *kernel's arguments)`: the kernel of the generated module `kernels` (loaded before
    this one: its compiled code is linked, not compiled again), of `arguments` arguments, the slots `names` first,
    `count` times; the arguments of the slots `swap` exchanged between two runs and the walls made in the first
    of them: `copies` copied, then with `gather` the flat cells `dst` taken from `src`."""
    i, j = names.index(swap[0]), names.index(swap[1])
    given = [f"x{k}" for k in range(arguments)]
    args = ["a" if k == i else "b" if k == j else name for k, name in enumerate(given)]
    lines = ["import sys", "", "import numba", "", f"kernel = sys.modules[{kernels!r}].kernel",
             "LOOP = numba.njit(cache=True, nogil=True, error_model='numpy')", "", "", "@LOOP",
             f"def loop(count, {'dst, src, ' if gather else ''}{', '.join(given)}):", f"    a, b = x{i}, x{j}",
             "    for k in range(count):", "        if k:", "            a, b = b, a"]
    lines += [line for dst, src in copies for line in _copy_lines(dst, src, "            ")]
    if gather:
        lines += ["            flat = a.reshape(-1)", "            for c in range(dst.size):",
                  "                flat[dst[c]] = flat[src[c]]"]
    lines.append(f"        kernel({', '.join(args)})")
    return "\n".join(lines) + "\n"


SCALED_WALLS = HEADER + """@JIT
def kernel(out, values, factor):
    n0, n1, n2 = values.shape
    for r in numba.prange(n0 * n1):
        a = r // n1
        b = r - a * n1
        for c in range(n2):
            out[a, b, c] = values[a, b, c] * factor
"""


GATHER_CELLS = HEADER + """@JIT
def kernel(flat, dst, src):
    for k in numba.prange(dst.shape[0]):
        flat[dst[k]] = flat[src[k]]
"""
# Up to this many ghost cells a gather runs on one thread, where a parallel loop's start costs more than the copy
# (`python benchmarks/gather_bench.py`, 2 cores, µs a call, parallel against serial: 256 cells 2.0 / 0.6, 1024 cells
# 2.1 / 0.9, 4096 cells 3.1 / 3.4; cpu-gather-serial-2026-12-03.json).
SERIAL_GATHER = 2**11
GATHER_CELLS_SERIAL = GATHER_CELLS.replace("@JIT", "@SERIAL").replace("numba.prange", "range")


LINE_BYTES = 64


def aligned_field(a: np.ndarray, ghost: int) -> np.ndarray:
    """A C-contiguous copy of `a` whose first interior cell (`ghost` cells in along every axis) starts a 64-byte line.

    NumPy puts a large array 16 bytes past a page, so a float32 row's 8-cell vectors straddle lines at every other
    load; where a padded row is whole lines long (wave3d 192³ at radius 8: 208 cells) this places every row's
    interior on a line, and the kernels' loads and stores straddle none (cpu-aligned-fields-2026-11-25.json).
    """
    first = int(np.ravel_multi_index((ghost,) * a.ndim, a.shape)) if a.ndim and min(a.shape) > ghost else 0
    buf = np.empty(a.nbytes + LINE_BYTES, dtype=np.uint8)
    shift = -(buf.ctypes.data + first * a.itemsize) % LINE_BYTES
    out = buf[shift:shift + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _lifted_values(lifted: tuple, lattice: Grid) -> Callable[[Mapping[str, float], float], list[np.ndarray]]:
    """values(params, t): each `hoisted` subexpression over the lattice's interior as NumPy's oracle evaluates it, in
    a C-contiguous array of its own, of size one along the axes it does not read; those that read no t are kept from
    the last call with the same parameters. Called before every pass: with nothing hoisted it does nothing."""
    if not lifted:
        return lambda params, t: []
    coordinate = coordinates(lattice)
    moves = [reads_time(e) for e in lifted]
    shapes = [tuple(n if a in lift_axes(e) else 1 for a, n in enumerate(lattice.shape)) for e in lifted]
    kept: list = [None, []]  # the parameters, and the values that read no t (None for those that do)

    def lift(k, params, t):
        value = evaluate(lifted[k], dtype=lattice.dtype, coordinate=coordinate, params=params, t=t)
        return np.broadcast_to(value, shapes[k]).copy()  # writable: Numba types a read-only array apart (a compile more)

    def values(params, t):
        if kept[0] != params:
            kept[:] = [dict(params), [None if m else lift(k, params, 0.0) for k, m in enumerate(moves)]]
        return [lift(k, params, t) if m else v for k, (m, v) in enumerate(zip(moves, kept[1]))]

    return values


class NumbaBackend(HostMemory):
    name = "numba"
    xp = np
    fuses_steps = True  # where a schedule of `MARCHES` applies
    half_storage = False  # Numba has no float16 type

    def __init__(self) -> None:
        self._last_compile: Future | None = None  # the compile asked for last, which the next one waits for
        self._gathers: dict[tuple, Future | bool] = {}  # `copy_cells`' compile per dtype and serial or not
        self._gather_kernels: dict[bool, Callable] = {}  # `copy_cells`' kernel, serial or not, loaded at its first use

    def takes_sweep(self, sweep: Sweep, grid: Grid) -> bool:
        """Where a registered schedule applies (`schedules.SWEEPS`); elsewhere (a 1D sweep wider than one loop) the
        pass runs as its generated kernel."""
        return takes(sweep, grid)

    def _in_background(self, kernel, signature: tuple, what: str, instead: str) -> Future:
        """Compile `kernel` (`what`) for `signature` in a thread while the caller steps on: Numba's code
        generation releases the GIL and the kernels run without it. A backend's kernels compile one after
        another in the order asked (the step's before the residual's and the fused kernel's); each thread ends with
        its compile, and none is a daemon, so a process that finishes first waits for the cache to be
        written. The Future is done once it is compiled (and in Numba's cache); a kernel that fails to
        compile sets its exception and the caller keeps `instead`."""
        future: Future = Future()
        before = self._last_compile
        self._last_compile = future

        def build() -> None:
            if before is not None:
                wait([before])
            start = time.perf_counter()
            try:
                kernel.compile(signature)
            except Exception as exc:  # any compile failure: the path it would replace still runs
                log.warning("%s did not compile (%s); %s", what, str(exc).splitlines()[0], instead)
                future.set_exception(exc)
                return
            log.info("%s compiled in the background in %.2f s", what, time.perf_counter() - start)
            future.set_result(None)

        threading.Thread(target=build, name="stencilforge-compile").start()
        return future

    def _compiled(self, kernel, compiles: dict, kind, args: tuple, what: str, instead: str) -> bool:
        """Whether `kernel` has compiled for calls like `args` (`kind`: what Numba's types of them tell apart); the
        first call of a kind starts its compile in the background (`_in_background`), `instead` running meanwhile.
        `compiles` maps each kind to its compile's Future, or to True once it compiled."""
        import numba

        ready = compiles.get(kind)
        if ready is True:
            return True
        if ready is None:
            ready = compiles[kind] = self._in_background(kernel, tuple(numba.typeof(a) for a in args), what, instead)
        if ready.done() and ready.exception() is None:
            compiles[kind] = True  # asked at every fill: a Future's done() and exception() each take its lock
            return True
        return False

    def wall_scaler(self) -> Callable[[np.ndarray, np.ndarray, float], None]:
        """out = values * factor in float64, rounded once to out's dtype, as NumPy's multiply does, on every core:
        a ghost box's rows in one parallel range (against NumPy's one thread: cpu-wall-fill-2026-11-24.json).
        The kernel is loaded here, once per binding: a fill calls the writer once per ghost box. Each kind of
        box (dtype, layout) compiles in the background on its first fill; NumPy writes it until then."""
        kernel = load_kernel(SCALED_WALLS)
        compiles: dict[tuple, Future | bool] = {}

        def scale(out: np.ndarray, values: np.ndarray, factor: float) -> None:
            if out.shape != values.shape:  # the kernel does not check its indices
                raise ValueError(f"wall values of shape {values.shape} for a box of shape {out.shape}")
            lead = (None,) * (3 - values.ndim)
            args = (out[lead], values[lead], np.float64(factor))
            kind = (out.dtype, out.flags.c_contiguous, out.flags.f_contiguous)
            if self._compiled(kernel, compiles, kind, args, "the walls' writer", "NumPy writes the walls"):
                kernel(*args)
            else:
                scale_with_numpy(out, values, factor)

        return scale

    @staticmethod
    def available() -> bool:
        return importlib.util.find_spec("numba") is not None

    def _bound(self, source: str, sweep: Sweep, grid: Grid, target: str, background: tuple[str, str] | None = None,
               carriers: tuple[str, ...] = ()):
        """(run, compiling): a sweep kernel bound to its coefficients, compiled now so no timed region pays for
        it (compiling None), or with `background` (what it is, what runs meanwhile) in a thread of its own
        while the caller goes on (a Future).

        `target` is the array passed first: the output, or for a reduction (which
        has none) the first input, which only supplies the loop bounds. Kernels that
        split the grid into tiles per thread also take Numba's thread count, read at
        each call (a kernel reading it itself could not be cached). A fused kernel also takes the fields named
        `carriers`, after the sweep's inputs.
        The compile is for the argument types of tiny arrays of the fields' layout, the ones every call passes.
        """
        import numba

        kernel: Any = load_kernel(source)  # a Numba dispatcher: compiled by signature below
        coef = sweep_coefficients(sweep, grid.dtype)
        names = (*sweep.inputs, *carriers)
        g = grid.ghost
        threads = (numba.get_num_threads,) if takes_threads(source) else ()
        dummy = np.zeros((2 * g + 1,) * grid.ndim, dtype=grid.dtype)
        tiny = (*([dummy] * (len(names) + 1)), coef, g, *(t() for t in threads))

        def run(fields):
            arrays = [fields[target]] + [fields[n] for n in names]
            return kernel(*arrays, coef, g, *[t() for t in threads])

        signature = tuple(numba.typeof(a) for a in tiny)
        if background:
            return run, self._in_background(kernel, signature, *background)
        kernel.compile(signature)  # compiled, not called: a kernel of one shape refuses tiny arrays
        return run, None

    def sweep(self, sweep: Sweep, grid: Grid, background: bool = False) -> Launch:
        """With `background`, a kernel not yet in the cache compiles in a thread while NumPy's oracle takes
        the steps (the same bits: tests/test_numba_oracle_first.py), where one NumPy step is shorter than a
        compile (`ORACLE_STEP_BUDGET`); a cached kernel loads in a fraction of a second, before stepping."""
        schedule = choose(SWEEPS, sweep, grid)
        source = schedule.build(sweep, grid)
        if not _numpy_first(background, source, grid.cells, sum(len(t.stencil.entries) for t in sweep.terms)):
            return Launch(self._bound(source, sweep, grid, sweep.out)[0], schedule.name)
        log.info("%s: NumPy takes the first steps while the kernel compiles", sweep.out)
        run, compiling = self._bound(source, sweep, grid, sweep.out, (f"{sweep.out}: the kernel", "NumPy's steps"))
        return Launch(run, schedule.name, compiling=compiling, fallback=NumpyBackend().sweep(sweep, grid))

    def sweep_fused(self, sweep: Sweep, grid: Grid, steps: int | None = None, *, window: int | None = None) -> Launch | None:
        """`steps` steps in one pass (by default the schedule's, at most `window`), the middle states' ghost cells
        taken from out's and the `fused_walls` arrays, by the first schedule of `MARCHES` that applies; None where
        none does."""
        try:
            schedule = choose(MARCHES, sweep, grid)
        except StencilforgeError as why:
            log.info("%s: single steps, no fused kernel: %s", sweep.out, why)
            return None
        if steps is None:
            steps = schedule.steps(grid) if window is None else min(schedule.steps(grid), window)
        carriers = tuple(fused_walls(s, sweep.out) for s in range(2, steps))
        run, compiling = self._bound(schedule.build(sweep, grid, steps), sweep, grid, sweep.out,
                                     (f"{sweep.out}: the {steps}-step kernel", "single steps"), carriers=carriers)
        return Launch(run, schedule.name, steps=steps, compiling=compiling)

    def axis_operator(self, op: AxisOperator, dtype, shape=None, background: bool = False) -> Launch:
        """`background` with a `shape`: as for `sweep`, NumPy's oracle (the same bits) applies the operator
        until a kernel not yet in the cache has compiled, where that is cheaper than waiting."""
        import numba

        source, coef = axis_operator_source(op)
        early = shape is not None and _numpy_first(background, source, int(np.prod(shape)), sum(len(d.interior) for d in op.outputs))
        kernel = load_kernel(source)
        coef = coef.astype(dtype)
        dummy = np.zeros((op.min_length + 1,) * 2, dtype=dtype)
        tiny = (dummy, *[np.empty_like(dummy) for _ in op.outputs], coef)

        def run(u, *outs):
            kernel(u, *outs, coef)

        if early:
            log.info("%s: NumPy applies the operator while its kernel compiles", op.inp)
            compiling = self._in_background(kernel, tuple(numba.typeof(a) for a in tiny), f"{op.inp}: the operator's kernel",
                                            "NumPy's steps")
            return Launch(run, compiling=compiling, fallback=NumpyBackend().axis_operator(op, dtype, shape))
        kernel(*tiny)
        return Launch(run)

    def _pass_call(self, p, lattice: Grid, constants):
        """(the source of `p`'s kernel, its arguments from (arrays, params, t), tiny arguments to compile it by, the
        slots it takes first)."""
        source, literals, names, lifted = pass_source(p, lattice.ndim, lattice.dtype, constants, lattice.cells)
        T = lattice.dtype.type
        g = lattice.ghost
        geometry = [v for a in range(lattice.ndim) for v in (lattice.lower[a], lattice.spacing[a], lattice.first_index(a))]
        values = _lifted_values(lifted, lattice)
        dummy = [np.zeros((2 * g + 1,) * lattice.ndim, dtype=lattice.dtype) for _ in names]
        lifts = [np.zeros((1,) * lattice.ndim, dtype=bool if isinstance(e, Compare) else lattice.dtype) for e in lifted]
        tiny = (*dummy, *lifts, literals, *[T(0) for _ in constants], T(0), *geometry, g)
        fields = operator.itemgetter(*names) if len(names) > 1 else (lambda arrays: (arrays[names[0]],))
        named = [c.name for c in constants]

        def arguments(arrays, params, t) -> tuple:
            return (*fields(arrays), *values(params, t), literals, *[T(params[n]) for n in named], T(t), *geometry, g)

        return source, arguments, tiny, tuple(names)

    def equation_pass(self, p, lattice: Grid, constants, background: bool = False) -> Callable:
        """run(arrays, params, t) for one pass of a problem's equations, compiled now on tiny arrays. The pass's
        `hoisted` subexpressions are NumPy's oracle's values over the interior: those of t each call, the others
        once for the parameters a call brings. With `background`, a kernel not yet in the cache whose pass
        `rounds_as_oracle` compiles in a thread while NumPy's oracle takes the passes (the same bits), where one
        NumPy pass is shorter than a compile, as for `sweep`."""
        import numba

        source, arguments, tiny, _ = self._pass_call(p, lattice, constants)
        entries = sum(len(accesses(eq.expr)) for eq in p.equations)
        early = rounds_as_oracle(p) and _numpy_first(background, source, lattice.cells, entries)
        kernel: Any = load_kernel(source)

        def run(arrays, params, t):
            kernel(*arguments(arrays, params, t))

        if early:
            what = ", ".join(slot_name(s) for s in p.writes)
            log.info("%s: NumPy takes the first passes while the pass's kernel compiles", what)
            compiling = self._in_background(kernel, tuple(numba.typeof(a) for a in tiny), f"{what}: the pass's kernel",
                                            "NumPy's passes")
            return Launch(run, compiling=compiling, fallback=NumpyBackend().equation_pass(p, lattice, constants))
        kernel(*tiny)
        return run

    def iterated_pass(self, p, lattice: Grid, constants, swap: tuple[str, str], copies: tuple, gather: tuple | None = None,
                      background: bool = False) -> Launch | None:
        """run(arrays, params, t, count): the pass `count` times in one compiled call, the arrays of the slots `swap`
        (a field's current and next level) exchanged between two runs and the walls then made in the new current
        one: the boxes `copies` (`boundary.Copies` pairs) copied, or the cells `gather` ((ghost cells, their
        interior images) as flat indices of C-contiguous arrays, `copy_cells`') gathered; as the time loop does for
        an sf.Iterate of one pass (None where a wall's box is not one it can loop over). `arrays` itself is left as
        it was. Per run the host's work (the walls, the exchange, the call) costs more than a small pass; here it
        is one call a step. With `background` it compiles in a thread (`Launch.compiling`)."""
        import numba

        cells = () if gather is None else tuple(gather)
        source, arguments, tiny, names = self._pass_call(p, lattice, constants)
        try:
            source = _loop_source(load_module(source).__name__, names, len(tiny), swap, copies, bool(cells))
        except ValueError as exc:
            log.info("%s: a call a run (%s)", swap[0], exc)
            return None
        loop: Any = load_module(source).loop

        def run(arrays, params, t, count):
            loop(count, *cells, *arguments(arrays, params, t))

        signature = (numba.int64, *(numba.typeof(a) for a in (*cells, *tiny)))
        if background:
            return Launch(run, compiling=self._in_background(loop, signature, f"{swap[0]}: the compiled iterations",
                                                              "a call a run"))
        loop.compile(signature)
        return Launch(run)

    def copy_cells(self, arrays, dst, src) -> None:
        """a.flat[dst] = a.flat[src] for each C-contiguous array: ghost cells from their interior images, which are
        never ghost cells, so the cells are copied in parallel (NumPy's one-thread gather took twice as long in
        Gray-Scott's time loop: cpu-gather-2026-11-25.json), up to `SERIAL_GATHER` cells on one thread. Each
        dtype's kernel compiles in the background on its first call; NumPy copies until then."""
        serial = dst.size <= SERIAL_GATHER
        kernel = self._gather_kernels.get(serial)
        if kernel is None:  # loaded once: a load hashes the source and looks in the cache, work for no step
            kernel = self._gather_kernels[serial] = load_kernel(GATHER_CELLS_SERIAL if serial else GATHER_CELLS)
        for arr in arrays:
            flat = arr.reshape(-1)
            if self._compiled(kernel, self._gathers, (flat.dtype, serial), (flat, dst, src), "the ghost cells' gather",
                              "NumPy copies them"):
                kernel(flat, dst, src)
            else:
                flat[dst] = flat[src]

    def asarray(self, a, dtype=None):
        return np.ascontiguousarray(a, dtype=dtype)

    def field(self, a, ghost: int):
        """A ghosted field in a fresh C-contiguous array whose first interior cell starts a cache line
        (`aligned_field`)."""
        return aligned_field(np.asarray(a), ghost)

    def to_host(self, a) -> np.ndarray:
        return np.asarray(a)

    def synchronize(self) -> None:
        pass

    def settle(self) -> None:
        """Background compiles run one after another, so the last asked for is the last to end."""
        last = self._last_compile
        if last is not None and not last.done():
            log.info("caching the kernels compiled in the background, for the next run")
            wait([last])
