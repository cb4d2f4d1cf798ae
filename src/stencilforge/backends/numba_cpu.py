"""Multi-threaded CPU kernels generated from the plan and compiled by Numba.

Coefficients travel as an array argument rather than literals, so one compiled
kernel serves every grid spacing and time step of the same stencil shape; the
generated module is written to the on-disk cache and imported, which lets
Numba's own cache keep the machine code between runs.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import re
import sys
import threading
import time
from concurrent.futures import Future, wait
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..boundary import scale_with_numpy
from ..cache import cache_dir, write_atomic
from ..errors import StencilforgeError
from ..grid import Grid
from ..ir.analysis import accesses, reads_time, slot_name
from ..ir.nodes import Compare
from ..plan import AxisOperator, Sweep
from ..printers.numba import lift_axes, pass_source, rounds_as_oracle
from ..printers.numpy import coordinates, evaluate
from .base import HostMemory, Launch, fused_walls
from .numpy_ref import NumpyBackend

log = logging.getLogger(__name__)

HEADER = ("import numba\nimport numpy as np\n\nfrom stencilforge.backends.vector_width import wide_vectors\n\n"
          "JIT = numba.njit(parallel=True, cache=True, nogil=True)\nSERIAL = numba.njit(cache=True, nogil=True)\n\n")
# The first statement of a sweep kernel's loops' functions: 512-bit vectors where the CPU has them (`vector_width`).
WIDE = "wide_vectors()"


def _tag(o: int) -> str:
    """A signed offset as part of an identifier (-2 -> m2)."""
    return f"m{-o}" if o < 0 else f"p{o}"


def _view_name(field: str, offset: tuple[int, ...]) -> str:
    return f"v_{field}_" + "_".join(_tag(o) for o in offset)


def _views(sweep: Sweep) -> dict[tuple[str, tuple[int, ...]], str]:
    """One 1D row view per (field, offset) the sweep reads, in a fixed order."""
    views: dict[tuple[str, tuple[int, ...]], str] = {}
    centre = (0,) * sweep.ndim
    for term in sweep.terms:
        for offset, _ in term.stencil.entries:
            views.setdefault((term.field, offset), _view_name(term.field, offset))
        if term.factor is not None:
            views.setdefault((term.factor, centre), _view_name(term.factor, centre))
    return views


def _term_groups(sweep: Sweep, coeff_names: list[str], views: dict) -> list[list[tuple[str, set[str]]]]:
    """Per term, its weight groups (`Stencil.weight_groups`) at row position j as (expression, views read):
    c * v[j] alone, else c * (a[j] + b[j] + ...), consuming coefficient names in group order."""
    it = iter(coeff_names)
    terms = []
    for term in sweep.terms:
        groups = []
        for _, offsets in term.stencil.weight_groups():
            names = [views[(term.field, o)] for o in offsets]
            values = " + ".join(f"{v}[j]" for v in names)
            groups.append((f"{next(it)} * {values if len(names) == 1 else f'({values})'}", set(names)))
        terms.append(groups)
    return terms


def sweep_expression(sweep: Sweep, coeff_names: list[str], views: dict) -> str:
    """The right-hand side at row position j, in the oracle's order."""
    centre = (0,) * sweep.ndim
    parts = []
    for term, groups in zip(sweep.terms, _term_groups(sweep, coeff_names, views)):
        terms = " + ".join(expr for expr, _ in groups)
        if term.factor is not None:
            terms = f"({terms}) * {views[(term.factor, centre)]}[j]"
        parts.append(f"({terms})")
    return " + ".join(parts)


def sweep_coefficients(sweep: Sweep, dtype) -> np.ndarray:
    """The kernels' coefficient array: each weight group's weight, in group order."""
    return np.array([float(c) for t in sweep.terms for c, _ in t.stencil.weight_groups()], dtype=dtype)


FUSED_VIEW_LIMIT = 16
WIDE_LOOP_VIEWS = 56  # views per loop of `_wide_source`: wave3d r8 in one loop, fastest of 14 to 56 (cpu-grouped-order-2026-11-27.json)
Y_TILE = 32  # rows along axis 1 per tile of `_wide_source`: its planes' rows around the tile stay in L2 (32 and 16 close)
FUSED_STEPS_3D = 4  # steps per pass of `_march_source` (cpu-fused-steps-2026-11-24.json)
FUSED_STEPS_2D = 6  # in 2D (cpu-march-2d-2026-11-25.json)
MARCH_TILE_CELLS = 32768  # cells of a plane per tile of the 3D march: its rings stay in L2 (cpu-march-tiles-2026-11-27.json)


def _shift(index: str, o: int) -> str:
    """`index` moved by the offset o, as generated source."""
    return f"{index} + {o}" if o > 0 else (f"{index} - {-o}" if o < 0 else index)


def _prologue(sweep: Sweep, carriers: tuple[str, ...] = ()) -> tuple[list[str], list[str], dict]:
    """The kernel's def line (`carriers`: the arrays holding a fused kernel's later middle states' walls) and
    coefficient locals, the coefficient names and the row views, shared by the single-step and the fused
    kernels so all evaluate the same expression."""
    cnames = [f"c{k}" for k in range(sum(len(t.stencil.weight_groups()) for t in sweep.terms))]
    args = ["out"] + [f"f_{n}" for n in sweep.inputs] + list(carriers) + ["coef", "g"]
    lines = [f"@JIT\ndef kernel({', '.join(args)}):"] + [f"    {c} = coef[{k}]" for k, c in enumerate(cnames)]
    return lines, cnames, _views(sweep)


def _row_loops(sweep: Sweep, cnames: list[str], views: dict, budget: int = FUSED_VIEW_LIMIT) -> tuple[list[str], str]:
    """The statements of loops over j, and the right-hand side left for a last loop, each loop reading
    at most `budget` row views (the buffers and the store included).

    A term wider than the limit is summed in the row buffer `part`, left to right, a loop
    taking as many of its weight groups as fit; the terms' running total is carried as an
    expression into the next loop while it fits, else stored in `acc`. Every addition
    happens in the oracle's order, so the result is bitwise that of one fused expression.
    """
    centre = (0,) * sweep.ndim
    loops: list[str] = []
    pending: str | None = None
    pending_reads: set[str] = set()

    def store() -> None:
        nonlocal pending, pending_reads
        loops.append(f"acc[j] = {pending}")
        pending, pending_reads = "acc[j]", {"acc"}

    def add(expr: str, reads: set) -> None:
        nonlocal pending, pending_reads
        if pending is not None and len(pending_reads | reads) + 1 > budget:
            store()
        pending = expr if pending is None else f"{pending} + {expr}"
        pending_reads = pending_reads | reads

    for term, groups in zip(sweep.terms, _term_groups(sweep, cnames, views)):
        factor = views[(term.factor, centre)] if term.factor is not None else None
        extra = 1 if factor is not None else 0
        term_reads = set().union(*(r for _, r in groups))
        if len(term_reads) + extra + 1 > budget:  # the store, the factor: the term needs `part`
            if "part" in pending_reads:
                store()
            room = budget - 2 - extra - len(pending_reads)  # alongside part, the store and the pending total
            room = room if 2 * room >= budget else budget - 2 - extra  # else `add` stores the total first
            k, tail_reads = len(groups), set[str]()
            while len(tail_reads | groups[k - 1][1]) <= room:  # the last groups that fit go in the term's loop
                k -= 1
                tail_reads |= groups[k][1]
            chunks: list[list[str]] = [[]]
            chunk_reads: set[str] = set()
            for expr, reads in groups[:k]:  # the rest through part, each loop as many groups as fit beside it
                if chunks[-1] and len(chunk_reads | reads) > budget - 1:
                    chunks.append([])
                    chunk_reads = set()
                chunks[-1].append(expr)
                chunk_reads |= reads
            loops += [f"part[j] = {'part[j] + ' if n else ''}" + " + ".join(chunk) for n, chunk in enumerate(chunks)]
            body, reads = " + ".join(["part[j]", *(e for e, _ in groups[k:])]), {"part"} | tail_reads
        else:
            body, reads = " + ".join(e for e, _ in groups), term_reads
        if factor is not None:
            body, reads = f"({body}) * {factor}[j]", reads | {factor}
        add(f"({body})", reads)
    assert pending is not None, "a sweep has at least one term"
    return loops, pending


def _constant_offsets(views: dict, padded: tuple[int, ...], stmts: list[str], value: str) -> tuple[list[str], list[str], str]:
    """(the view lines, `stmts` and `value` rewritten): each field read through one view from its lowest offset, indexed at
    j plus the offset's distance from it, a constant for arrays of the `padded` shape. LLVM then addresses every
    load from one register and a displacement; 51 separate views kept their pointers on the stack and reloaded
    them every vector (wave3d; cpu-wide-offsets-2026-11-27.json). Unsigned indices, so no test for wrapping."""
    w, p = padded[2], padded[1] * padded[2]
    offsets = {name: (field, o[0] * p + o[1] * w + o[2]) for (field, o), name in views.items()}
    low = {field: min(off for f, off in offsets.values() if f == field) for field, _ in offsets.values()}
    texts = [*stmts, value]
    for name, (field, off) in offsets.items():
        texts = [re.sub(rf"\b{name}\[j\]", f"lo_{field}[np.uint64(j) + np.uint64({off - low[field]})]", t) for t in texts]
    return [f"lo_{field} = x_{field}[base + ({lo}):]" for field, lo in low.items()], texts[:-1], texts[-1]


def _wide_source(sweep: Sweep, lines: list[str], cnames: list[str], views: dict, padded: tuple[int, ...] | None = None) -> str:
    """3D sweeps too wide for one loop: each task takes a range of planes along axis 0 and, for each tile of
    Y_TILE rows along axis 1, walks its planes, evaluating the tile's rows of a plane as one flat range of the
    flattened fields with the loops of `_row_loops` (the ghost columns between the rows are evaluated as
    scratch, never stored): a loop per row paid its views' set-up and LLVM's alias checks on every row
    (cpu-wave3d-flat-2026-11-25.json).

    The result goes through `acc`, not straight to `out`: the output may be an input read at the
    cell (wave3d's u.prev), and a loop whose store overlaps one of its loads fails LLVM's runtime
    alias check and runs scalar; and out's ghost columns must keep their values.
    Loops of WIDE_LOOP_VIEWS views measured fastest: in weight groups, wave3d's Laplacian is a chain of
    8 dependent additions, not 48, and all 51 views in one loop beat the row buffer's passes.
    Tiles hold at least the stencil's reach of rows (`n1 // r`, a bound only radii above Y_TILE meet): kept from
    when kernels wrote walls, so the source and its cached kernels stay as they were.
    """
    r = sweep.radius
    stmts, value = _row_loops(sweep, cnames, views, WIDE_LOOP_VIEWS)
    lines[0] = lines[0].replace("):", ", nt):")
    if padded is not None:
        lines += [f"    if out.shape[1] != {padded[1]} or out.shape[2] != {padded[2]}:",
                  "        raise ValueError('a kernel compiled for another grid')"]
    lines += [
        "    w = out.shape[2]",
        "    p = out.shape[1] * w",
        "    m = w - 2 * g",
        "    n0 = out.shape[0] - 2 * g",
        "    n1 = out.shape[1] - 2 * g",
        *[f"    x_{n} = f_{n}.reshape(-1)" for n in sweep.inputs],
        "    span = (n0 + nt - 1) // nt",
        "    tasks = (n0 + span - 1) // span",
        f"    ny = max(1, min(n1 // {Y_TILE}, n1 // {r}))",
        "    rows = (n1 + ny - 1) // ny",
        "    for t in numba.prange(tasks):",
        f"        {WIDE}",
        "        z0 = g + t * span",
        "        z1 = min(g + n0, z0 + span)",
        "        acc = np.empty(rows * w, dtype=out.dtype)",
        "        part = np.empty(rows * w, dtype=out.dtype)",
        "        for yt in range(ny):",
        "            y0 = g + yt * n1 // ny",
        "            y1 = g + (yt + 1) * n1 // ny",
        "            n = (y1 - y0 - 1) * w + m",
        "            for i0 in range(z0, z1):",
    ]
    indent = "                "
    lines.append(f"{indent}base = i0 * p + y0 * w + g")
    if padded is not None:
        view_lines, stmts, value = _constant_offsets(views, padded, stmts, value)
    else:
        view_lines = []
        for (field, offset), name in views.items():
            shift = "".join(f" {'+' if o > 0 else '-'} {abs(o)}{s}" for o, s in zip(offset, (" * p", " * w", "")) if o)
            view_lines.append(f"{name} = x_{field}[base{shift}:base{shift} + n]")
    lines += [f"{indent}{line}" for line in view_lines]
    for stmt in stmts:
        lines.append(f"{indent}for j in range(n):")
        lines.append(f"{indent}    {stmt}")
    lines.append(f"{indent}for j in range(n):")
    lines.append(f"{indent}    acc[j] = {value}")
    lines.append(f"{indent}for k in range(y1 - y0):")
    lines.append(f"{indent}    out[i0, y0 + k, g:g + m] = acc[k * w:k * w + m]")
    return HEADER + "\n".join(lines) + "\n"


CONSTANT_SHAPE_CELLS = 2**20  # grids from this size get wide 3D kernels compiled for their shape (`_constant_offsets`)


def constant_shape(grid: Grid) -> tuple[int, ...] | None:
    """The padded shape a wide 3D kernel of this grid is compiled for: large grids only, where a compile per
    shape pays; small ones (tests, coarse levels) share one kernel for every shape."""
    return grid.padded_shape if grid.ndim == 3 and grid.cells >= CONSTANT_SHAPE_CELLS else None


def sweep_source(sweep: Sweep, padded: tuple[int, ...] | None = None) -> str:
    """Source of a kernel writing the sweep over the interior.

    The innermost loops read 1D row views that all share the index j: with no
    offset arithmetic inside the loop LLVM vectorises it (see docs/performance.md).
    Up to FUSED_VIEW_LIMIT views, one loop evaluates the whole expression. Wider
    stencils are split by `_row_loops` into loops over per-thread row buffers held
    in L1, in the same order of operations (3D: `_wide_source`).
    `padded`: the fields' shape, for a wide 3D kernel whose offsets are constants
    (`_constant_offsets`), which then refuses fields of another shape.
    """
    nd = sweep.ndim
    lines, cnames, views = _prologue(sweep)
    fused = len(views) <= FUSED_VIEW_LIMIT
    if nd == 3 and not fused:
        return _wide_source(sweep, lines, cnames, views, padded)
    lines.append(f"    m = out.shape[{nd - 1}] - 2 * g")
    for a in range(nd - 1):
        loop = "numba.prange" if a == 0 else "range"
        lines.append(f"{'    ' * (a + 1)}for i{a} in {loop}(g, out.shape[{a}] - g):")
        if a == 0:
            lines.append(f"        {WIDE}")
        if a == 0 and not fused:
            lines.append("        acc = np.empty(m, dtype=out.dtype)")
            lines.append("        part = np.empty(m, dtype=out.dtype)")
    indent = "    " * nd
    outer = [f"i{a}" for a in range(nd - 1)]

    def row(offset: tuple[int, ...]) -> str:
        lo = _shift("g", offset[-1])
        return ", ".join([_shift(i, o) for i, o in zip(outer, offset[:-1])] + [f"{lo}:{lo} + m"])

    for (field, offset), name in views.items():
        lines.append(f"{indent}{name} = f_{field}[{row(offset)}]")
    loop = "numba.prange" if nd == 1 else "range"
    if fused:
        value = sweep_expression(sweep, cnames, views)
    else:
        stmts, value = _row_loops(sweep, cnames, views)
        for stmt in stmts:
            lines.append(f"{indent}for j in {loop}(m):")
            lines.append(f"{indent}    {stmt}")
    lines.append(f"{indent}o = out[{row((0,) * nd)}]")
    lines.append(f"{indent}for j in {loop}(m):")
    lines.append(f"{indent}    o[j] = {value}")
    return HEADER + "\n".join(lines) + "\n"


# Cells x stencil entries of a sweep whose first steps NumPy may take while its kernel compiles: about a second of
# NumPy on one core, against compiles of 1-6 s (cpu-oracle-first-2026-11-24.json).
ORACLE_STEP_BUDGET = 5e8


def fused_source(sweep: Sweep, steps: int) -> str:
    """Source of a kernel writing `steps` steps of a 2D or 3D sweep in one pass over memory (out = S(...S(u))),
    marching along axis 0 (`_march_source`).

    The middle states' ghost cells are the walls of the steps in between, filled by the caller: the first's
    in out, later ones' in the arrays `fused_walls` names. The kernel reads only those of out, so its tasks'
    writes to out's interior never race with a read. Where those arrays are the input itself (walls that stay put,
    `with_walls`; out's ghost cells then hold the same walls) every middle state's ghost cells are the input's, and
    the kernel reads them from the plane it has just read, not from out or the input's plane again
    (cpu-march-still-2026-11-27.json). Every step uses the single-step kernel's row views and
    expression, so the result has the same bits as `steps` calls of `sweep_source`'s kernel.
    """
    return _march_source(sweep, steps)


def _step_views(sweep: Sweep, indent: str, at, u_at) -> list[str]:
    """Row view lines of one step of a fused kernel: u's view at offset o is u_at(o), any other field's at(field, o)."""
    (u,) = sweep.stencil_inputs
    return [f"{indent}{name} = {u_at(offset) if field == u else at(field, offset)}" for (field, offset), name in _views(sweep).items()]


def _ring_slot(index: str, k: int, ring: int) -> str:
    """The slot in a ring of `ring` planes of plane `index` + k."""
    return f"({_shift(index, k)}) % {ring}" if k else f"{index} % {ring}"


def _march_source(sweep: Sweep, steps: int) -> str:
    """Each parallel task takes a range of output planes along axis 0 (in 2D: rows) and marches through it,
    evaluating at each position plane q of the state after one step, plane q - r of the state after two, and so
    on, each middle state into a ring of 2r + 1 planes of its own, then output plane q - (steps - 1) r.
    In 3D a task takes a tile of rows along axis 1 too, about MARCH_TILE_CELLS cells of a plane (the tiles split
    among the threads first, then the planes), and evaluates of each middle state only the rows the steps after
    it read: the tile grown by (steps - s) r rows on each side for the state after s steps. So a task's rings
    stay in L2 whatever the plane's size, for 2 (steps - s) r rows evaluated twice (cpu-march-tiles-2026-11-27.json).

    A middle plane is evaluated by `middle` (one serial function for every level, so the compile does not
    grow with the steps): one loop over its interior rows as a flat range (the ghost columns it passes are
    scratch; in 2D the row's interior), then its ghost rows and columns from the plane of the array that holds that state's walls
    (the first middle state's: out; later ones': `fused_walls`; where those are the input, `still`, from the plane
    of the state before, which is in cache and holds the input's). A middle plane outside the interior is that
    array's plane (`still`: the input's). Middle planes within (steps - 1) r of the ends of a task's range are evaluated by two tasks.
    """
    (u,) = sweep.stencil_inputs
    nd = sweep.ndim
    r = sweep.radius
    ring = 2 * r + 1
    reach = (steps - 1) * r
    carriers = tuple(fused_walls(s, sweep.out) for s in range(2, steps))
    lines, cnames, views = _prologue(sweep, carriers)
    args = lines[0][len("@JIT\ndef kernel("):-len("):")]
    value = sweep_expression(sweep, cnames, views)
    flat_planes = sorted({(field, o[0]) for field, o in views})
    plane_args = [f"x_{field}_{_tag(k)}" for field, k in flat_planes]
    u_planes = sorted({o[0] for (field, o) in views if field == u})

    def cols(o: int) -> str:
        lo = _shift("g", o)
        return f"{lo}:{lo} + m"

    def rows(o, i: str) -> list[str]:
        """A 3D plane's row index at offset o from row i; a 2D march's planes are rows, which have none."""
        return [_shift(i, o[1])] if nd == 3 else []

    def at(field: str, o) -> str:
        return f"f_{field}[{', '.join([_shift('z', o[0]), *rows(o, 'i'), cols(o[-1])])}]"

    def flat(field: str, o) -> str:
        shifts = ((o[1], " * wd"), (o[2], "")) if nd == 3 else ((o[1], ""),)
        start = "base" + "".join(f" {'+' if v > 0 else '-'} {abs(v)}{unit}" for v, unit in shifts if v)
        return f"x_{field}_{_tag(o[0])}[{start}:{start} + n]"

    if nd == 3:
        copy = ["for i in range(w.shape[0]):", "    for j in range(w.shape[1]):", "        w[i, j] = a[i, j]"]
        extent = ["    wd = w.shape[1]", "    n1 = w.shape[0] - 2 * g", "    m = wd - 2 * g",
                  "    ya = max(ylo, g)", "    yb = min(yhi, g + n1)", "    base = ya * wd + g",
                  "    n = (yb - ya - 1) * wd + m", *[f"    {a} = {a}.reshape(-1)" for a in plane_args]]
        store = "w.reshape(-1)"
        copy_ghosts = [  # the rows ylo..yhi the later steps read: ghost rows whole, interior rows' ghost columns
            "for i in range(max(ylo, 0), min(yhi, w.shape[0])):",
            "    if i < g or i >= g + n1:",
            "        for j in range(wd):",
            "            w[i, j] = ghosts[i, j]",
            "    else:",
            "        for j in range(g):",
            "            w[i, j] = ghosts[i, j]",
            "            w[i, g + m + j] = ghosts[i, g + m + j]",
        ]
    else:
        copy = ["for j in range(w.shape[0]):", "    w[j] = a[j]"]
        extent = ["    m = w.shape[0] - 2 * g", "    base = g", "    n = m"]
        store = "w"
        copy_ghosts = ["for j in range(g):", "    w[j] = ghosts[j]", "    w[g + m + j] = ghosts[g + m + j]"]
    middle = [
        "@SERIAL\ndef copy_plane(w, a):",
        *[f"    {line}" for line in copy],
        "",
        "",
        f"@SERIAL\ndef middle(w, {', '.join(plane_args)}, ghosts, coef, g{', ylo, yhi' if nd == 3 else ''}):",
        f"    {WIDE}",
        *lines[1:1 + len(cnames)],
        *extent,
        *_step_views(sweep, "    ", flat, lambda o: flat(u, o)),
        f"    o = {store}[base:base + n]",
        "    for j in range(n):",
        f"        o[j] = {value}",
        *[f"    {line}" for line in copy_ghosts],
    ]

    def level(s: int) -> list[str]:
        """Plane p of the state after s steps, into mid[s - 1]: from u's planes (s = 1) or mid[s - 2]."""
        lo, hi = f"max(z0 - {reach - (s - 1) * r}, g - {r})", f"min(z1 + {reach - (s - 1) * r}, g + n0 + {r})"
        source = {(field, k): f"f_{field}[{_shift('p', k)}]" for field, k in flat_planes}
        if s > 1:
            source.update({(u, k): f"mid[{s - 2}, {_ring_slot('p', k, ring)}]" for k in u_planes})
        holder = "out" if s == 1 else fused_walls(s, sweep.out)
        centre = f"f_{u}[p]" if s == 1 else f"mid[{s - 2}, p % {ring}]"  # the state before's plane p: u's ghosts where `still`
        return [
            f"        p = {_shift('q', -(s - 1) * r)}",
            f"        if p >= {lo} and p < {hi}:",
            f"            w = mid[{s - 1}, p % {ring}]",
            "            if p < g or p >= g + n0:",
            f"                copy_plane(w, f_{u}[p] if still else {holder}[p])",
            "            else:",
            f"                middle(w, {', '.join(source[key] for key in flat_planes)}, {centre} if still else {holder}[p], coef, g"
            f"{f', y0 - {(steps - s) * r}, y1 + {(steps - s) * r}' if nd == 3 else ''})",
        ]

    last = "            " + ("    " if nd == 3 else "")  # the output plane's rows (3D), or the output row (2D)
    march = [
        f"@SERIAL\ndef march({args}, z0, z1, still{', y0, y1, ny' if nd == 3 else ''}):",
        f"    {WIDE}",
        *lines[1:],
        "    n0 = out.shape[0] - 2 * g",
        *(["    n1 = out.shape[1] - 2 * g"] if nd == 3 else []),
        f"    m = out.shape[{nd - 1}] - 2 * g",
        f"    mid = np.empty(({steps - 1}, {ring}, {', '.join(f'out.shape[{a}]' for a in range(1, nd))}), dtype=out.dtype)",
        f"    for q in range(z0 - {reach}, z1 + {reach}):",
        *[line for s in range(1, steps) for line in level(s)],
        f"        z = q - {reach}",
        "        if z >= z0:",
        *[f"            w_{_tag(k)} = mid[{steps - 2}, {_ring_slot('z', k, ring)}]" for k in u_planes],
        *(["            for i in range(y0, y1):"] if nd == 3 else []),
        *_step_views(sweep, last, at, lambda o: f"w_{_tag(o[0])}[{', '.join([*rows(o, 'i'), cols(o[-1])])}]"),
        f"{last}o = out[{', '.join(['z', *(['i'] if nd == 3 else []), 'g:g + m'])}]",
        f"{last}for j in range(m):",
        f"{last}    o[j] = {value}",
    ]
    kernel = [f"@JIT\ndef kernel({args}, nt):", "    n0 = out.shape[0] - 2 * g"]
    if nd == 3:  # ny tiles of rows, each split into nz ranges of planes
        kernel += ["    n1 = out.shape[1] - 2 * g", f"    ny = max(1, n1 // max(1, {MARCH_TILE_CELLS} // out.shape[2]))",
                   "    nz = (nt + ny - 1) // ny"]
    else:
        kernel += ["    ny = 1", "    nz = nt"]
    kernel += ["    span = (n0 + nz - 1) // nz", "    tasks = (n0 + span - 1) // span"]
    tile = ["        yt = t - zt * ny"] if nd == 3 else []
    tile_args = ", g + yt * n1 // ny, g + (yt + 1) * n1 // ny, ny" if nd == 3 else ""
    same = [f"{c}.ctypes.data == f_{u}.ctypes.data" for c in carriers]
    kernel += [
        f"    still = {' and '.join(same) if carriers else 'False'}",
        "    for t in numba.prange(tasks * ny):",
        f"        {WIDE}",
        "        zt = t // ny",  # not divmod: in a prange body it types the index's quotient as a float
        *tile,
        "        z0 = g + zt * span",
        f"        march({args}, z0, min(g + n0, z0 + span), still{tile_args})",
    ]
    parts = ["\n".join(middle), "\n".join(march), "\n".join(kernel)]
    return HEADER + "\n\n\n".join(parts) + "\n"


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
    return module.kernel


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
    fuses_steps = True  # 2D and 3D sweeps of one field whose row views fit one vectorised loop
    half_storage = False  # Numba has no float16 type

    def __init__(self) -> None:
        self._last_compile: Future | None = None  # the compile asked for last, which the next one waits for
        self._gathers: dict[np.dtype, Future] = {}  # `copy_cells`' compile per dtype

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
        first call of a kind starts its compile in the background (`_in_background`), `instead` running meanwhile."""
        import numba

        if kind not in compiles:
            compiles[kind] = self._in_background(kernel, tuple(numba.typeof(a) for a in args), what, instead)
        ready = compiles[kind]
        return ready.done() and ready.exception() is None

    def wall_scaler(self) -> Callable[[np.ndarray, np.ndarray, float], None]:
        """out = values * factor in float64, rounded once to out's dtype, as NumPy's multiply does, on every core:
        a ghost box's rows in one parallel range (against NumPy's one thread: cpu-wall-fill-2026-11-24.json).
        The kernel is loaded here, once per binding: a fill calls the writer once per ghost box. Each kind of
        box (dtype, layout) compiles in the background on its first fill; NumPy writes it until then."""
        kernel = load_kernel(SCALED_WALLS)
        compiles: dict[tuple, Future] = {}

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
        source = sweep_source(sweep, padded=constant_shape(grid))
        if not _numpy_first(background, source, grid.cells, sum(len(t.stencil.entries) for t in sweep.terms)):
            return Launch(self._bound(source, sweep, grid, sweep.out)[0])
        log.info("%s: NumPy takes the first steps while the kernel compiles", sweep.out)
        run, compiling = self._bound(source, sweep, grid, sweep.out, (f"{sweep.out}: the kernel", "NumPy's steps"))
        return Launch(run, compiling=compiling, fallback=NumpyBackend().sweep(sweep, grid))

    def sweep_fused(self, sweep: Sweep, grid: Grid, steps: int | None = None) -> Launch | None:
        """`steps` steps in one pass (by default FUSED_STEPS_2D or FUSED_STEPS_3D), the middle states' ghost
        cells taken from out's and the `fused_walls` arrays, for 2D and 3D sweeps of one field whose row views
        fit one vectorised loop and whose reach fits the ghost layer; None otherwise."""
        if (grid.ndim not in (2, 3) or not sweep.iterates_one_field or len(_views(sweep)) > FUSED_VIEW_LIMIT
                or grid.ghost < sweep.radius):
            log.info("%s: single steps: numba has fused kernels for 2D and 3D sweeps of one field that read at most "
                     "%d rows within the ghost layer", sweep.out, FUSED_VIEW_LIMIT)
            return None
        steps = steps or (FUSED_STEPS_2D if grid.ndim == 2 else FUSED_STEPS_3D)
        carriers = tuple(fused_walls(s, sweep.out) for s in range(2, steps))
        run, compiling = self._bound(fused_source(sweep, steps), sweep, grid, sweep.out,
                                     (f"{sweep.out}: the {steps}-step kernel", "single steps"), carriers=carriers)
        return Launch(run, steps=steps, compiling=compiling)

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

    def equation_pass(self, p, lattice: Grid, constants, background: bool = False) -> Callable:
        """run(arrays, params, t) for one pass of a problem's equations, compiled now on tiny arrays. The pass's
        `hoisted` subexpressions are NumPy's oracle's values over the interior: those of t each call, the others
        once for the parameters a call brings. With `background`, a kernel not yet in the cache whose pass
        `rounds_as_oracle` compiles in a thread while NumPy's oracle takes the passes (the same bits), where one
        NumPy pass is shorter than a compile, as for `sweep`."""
        import numba

        source, literals, names, lifted = pass_source(p, lattice.ndim, lattice.dtype, constants)
        entries = sum(len(accesses(eq.expr)) for eq in p.equations)
        early = rounds_as_oracle(p) and _numpy_first(background, source, lattice.cells, entries)
        kernel: Any = load_kernel(source)
        T = lattice.dtype.type
        g = lattice.ghost
        geometry = [v for a in range(lattice.ndim) for v in (lattice.lower[a], lattice.spacing[a], lattice.first_index(a))]
        values = _lifted_values(lifted, lattice)
        dummy = [np.zeros((2 * g + 1,) * lattice.ndim, dtype=lattice.dtype) for _ in names]
        lifts = [np.zeros((1,) * lattice.ndim, dtype=bool if isinstance(e, Compare) else lattice.dtype) for e in lifted]
        tiny = (*dummy, *lifts, literals, *[T(0) for _ in constants], T(0), *geometry, g)

        def run(arrays, params, t):
            kernel(*(arrays[n] for n in names), *values(params, t), literals, *(T(params[c.name]) for c in constants), T(t),
                   *geometry, g)

        if early:
            what = ", ".join(slot_name(s) for s in p.writes)
            log.info("%s: NumPy takes the first passes while the pass's kernel compiles", what)
            compiling = self._in_background(kernel, tuple(numba.typeof(a) for a in tiny), f"{what}: the pass's kernel",
                                            "NumPy's passes")
            return Launch(run, compiling=compiling, fallback=NumpyBackend().equation_pass(p, lattice, constants))
        kernel(*tiny)
        return run

    @functools.cached_property
    def _gather_kernel(self) -> Callable:
        """`copy_cells`' kernel, loaded once: a load hashes the source and looks in the cache, work for no step."""
        return load_kernel(GATHER_CELLS)

    def copy_cells(self, arrays, dst, src) -> None:
        """a.flat[dst] = a.flat[src] for each C-contiguous array: ghost cells from their interior images, which are
        never ghost cells, so the cells are copied in parallel (NumPy's one-thread gather took twice as long in
        Gray-Scott's time loop: cpu-gather-2026-11-25.json). Each dtype's kernel compiles in the
        background on its first call; NumPy copies until then."""
        kernel = self._gather_kernel
        for arr in arrays:
            flat = arr.reshape(-1)
            if self._compiled(kernel, self._gathers, flat.dtype, (flat, dst, src), "the ghost cells' gather", "NumPy copies them"):
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
