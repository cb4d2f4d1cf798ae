"""CUDA C generated from the plan: one generator, every problem, every strategy.

A `Kernel` is data (name, source, launch shape); compiling and launching it is
someone else's job (compile.py, backend.py), so CI can compile every variant
without a GPU and `show-kernel` can print it.

Coefficients are baked into the source as literals in the field dtype rather
than passed as parameters: a radius-8 Laplacian has 49 of them, and as
immediates they cost neither registers nor constant-cache loads, and the
compiler folds them into FFMAs. The price is one compile per coefficient set
(grid spacing, time step), which the on-disk cache makes a one-off. Shapes and
ghost widths stay run-time arguments, so one kernel serves every grid size.

Strategies for a `Sweep` (ghosted fields, interior written):
  naive      one thread per interior cell, linear indexing, reads through L1/L2;
  rows       naive's reads, but each thread of a one-row block writes a column of
             a few cells in consecutive rows (and planes), loads issued together;
             consecutive blocks cover consecutive rows, so the grid walks memory
             in address order and the neighbouring rows come from L1/L2;
  tiled      a block stages a box of each stencil field (tile + halo) in shared
             memory, then every thread evaluates its own cell from it;
  streaming  2.5D: a block covering a tile of the last ndim-1 axes marches along
             axis 0; each thread keeps the 2r+1 values of its column in registers
             (a queue shifted once per plane) and the current plane, with its
             in-plane halo, sits in shared memory;
  streaming_vec  streaming with 4 (float) or 2 (double) cells per thread along
             x, every load, store and shared-memory access a vector;
  streaming_l1  the same march without shared memory or barriers: in-plane
             neighbours are read through the L1 cache;
  pipelined  the same march with every plane copied by cp.async (sm_80+) into
             a ring of shared-memory stages several planes ahead of its use.
For an `AxisOperator` (unpadded 2D arrays, one-sided closure rows at both ends):
  naive      one thread per cell, every read from global memory;
  rows       as for sweeps: a thread writes the same column in a few consecutive rows;
  rows_vec   rows along x with a vector of cells per thread (4 floats or 2 doubles);
  pencil     along x: a row segment plus halo in shared memory; along y: a
             column pencil marching down the axis with a register queue. All
             outputs (e.g. d1 and d2) come out of the same pass over the input.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...errors import StencilforgeError
from ...plan import AxisOperator, Derivative1D, Sweep, Term
from ...stencil import Stencil

SWEEP_STRATEGIES = ("naive", "rows", "tiled", "streaming", "streaming_vec", "streaming_l1", "pipelined")
OPERATOR_STRATEGIES = ("naive", "flat", "rows", "rows_vec", "pencil")
STRATEGIES = tuple(dict.fromkeys(SWEEP_STRATEGIES + OPERATOR_STRATEGIES))
MAX_THREADS = 1024
STATIC_SMEM_LIMIT = 48 * 1024
SMEM_LIMIT = 227 * 1024  # sm_90 opt-in maximum of dynamic shared memory per block
REDUCE_THREADS = 256
UNROLL = 4  # planes (streaming) or rows (pencil along y) whose loads a thread issues together
RESIDENT_THREADS: int | None = None  # overrides _resident_threads, caps rows' registers (benchmarks/cuda_profile.py sweeps it)
SM_SMEM = 228 * 1024  # sm_90 shared memory per SM; each resident block also reserves 1 KB of it
IN_FLIGHT = 48 * 1024  # bytes of copies `pipelined` keeps outstanding per SM: ~2x bandwidth x loaded DRAM latency
MAX_AHEAD = 8  # planes a `pipelined` block copies ahead of the one it consumes
REDUCE_BLOCKS = 1024
PAIR_TILE = {
    2: (8, 256),  # rows per thread x threads
    3: (32, 2, 128),  # planes per block x rows per thread x threads, warps stacked along y
}
PAIR_AHEAD = 1  # planes of u the 3D pair loads ahead of use (measured against 0 and 2 on the H100 at commit 483c3e5)
FUSED_REACH_2D = 8  # (steps - 1) * radius: a warp keeps 32 - 2 (steps - 1) r useful lanes, at least half of them
PAIR_RADIUS_3D = 2  # (2r + 1)(R + 4r) values of u per thread
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Kernel:
    """One generated __global__ function and how to launch it.

    `cover` is the number of cells one block handles along each axis (C order),
    so the grid is ceil(shape / cover) with the last axis on blockIdx.x. `args`
    are the field names passed as pointers, in order; the interior shape and,
    for sweeps, the ghost width and the row pitch in elements follow as int arguments.
    """

    name: str
    source: str
    strategy: str
    tile: tuple[int, ...]
    block: tuple[int, int, int]
    cover: tuple[int, ...]
    args: tuple[str, ...]
    dynamic_smem: int = 0
    vector: int = 1
    flat: bool = False  # one 1D launch over all cells (`flat` operators), which also take 1/n1

    def fits(self, shape: tuple[int, ...]) -> bool:
        """Whether this kernel can run on arrays of interior `shape`: a vector kernel needs rows that
        are whole vectors, a flat one fewer than FLAT_CELLS cells; otherwise its scalar fallback runs."""
        return shape[-1] % self.vector == 0 and (not self.flat or math.prod(shape) < FLAT_CELLS)

    def grid(self, shape: tuple[int, ...]) -> tuple[int, int, int]:
        if self.flat:
            return (max(1, math.ceil(math.prod(shape) / self.cover[0])), 1, 1)
        dims = [max(1, math.ceil(n / c)) for n, c in zip(reversed(shape), reversed(self.cover))] + [1, 1]
        return (dims[0], dims[1], dims[2])


def ctype(dtype) -> str:
    dt = np.dtype(dtype)
    if dt == np.float32:
        return "float"
    if dt == np.float64:
        return "double"
    raise StencilforgeError(f"the cuda backend supports float32 and float64, not {dt}")


def literal(value, dtype) -> str:
    """A C literal that parses to exactly the value the numpy oracle uses, dtype(float(value))."""
    if np.dtype(dtype) == np.float32:
        return f"{float(np.float32(float(value))):.9e}f"
    return f"{float(value):.17e}"


def module_source(kernels: list[Kernel], dtype, title: str) -> str:
    """A compilable translation unit: a typedef for the field type, then the kernels."""
    head = f"// stencilforge generated CUDA C: {title}\n// field type: {np.dtype(dtype).name}\ntypedef {ctype(dtype)} real;\n"
    return head + "".join("\n" + k.source for k in kernels)


# ---------------------------------------------------------------- sweeps


def _check_names(names) -> None:
    for n in names:
        if not _IDENT.match(n):
            raise StencilforgeError(f"field name {n!r} is not a valid identifier for generated CUDA code")


def _field_radii(sweep: Sweep) -> dict[str, tuple[int, ...]]:
    """Per-axis reach of each field read at neighbouring cells (pointwise fields are absent)."""
    radii: dict[str, list[int]] = {}
    for t in sweep.terms:
        offs = [o for o, _ in t.stencil.entries]
        if all(not any(o) for o in offs):
            continue
        r = radii.setdefault(t.field, [0] * sweep.ndim)
        for o in offs:
            for a in range(sweep.ndim):
                r[a] = max(r[a], abs(o[a]))
    return {k: tuple(v) for k, v in radii.items()}


def _is_star(sweep: Sweep, fields) -> bool:
    """True when no offset of a staged field moves along two axes at once (corner halos unused)."""
    return all(sum(1 for i in o if i) <= 1 for t in sweep.terms if t.field in fields for o, _ in t.stencil.entries)


def _expression(sweep: Sweep, dtype, access) -> str:
    """The right-hand side at one cell, in the oracle's order: sum over terms of (sum c*f[o]) * factor.

    The arithmetic is spelled out with round-to-nearest intrinsics that the
    compiler may not contract or reorder: one fma chain over the entries of
    the unscaled terms, a chain times its factor for a scaled term, added. So
    every kernel that evaluates a sweep (each strategy, and the fused pair,
    whose operands come from registers and shuffles instead of loads) gets
    the same bits, not only the same value within rounding.
    """
    fma, mul, add = ("__fmaf_rn", "__fmul_rn", "__fadd_rn") if np.dtype(dtype) == np.float32 else ("__fma_rn", "__dmul_rn", "__dadd_rn")
    zero = (0,) * sweep.ndim

    def chain(acc, t):
        for o, c in t.stencil.entries:
            x = access(t.field, o)
            acc = f"{mul}({literal(c, dtype)}, {x})" if acc is None else f"{fma}({literal(c, dtype)}, {x},\n            {acc})"
        return acc

    total = None
    for t in sweep.terms:
        if t.factor is None:  # unscaled terms extend one fma chain, as a contracting compiler would
            total = chain(total, t)
        else:
            part = f"{mul}({chain(None, t)}, {access(t.factor, zero)})"
            total = part if total is None else f"{add}({total},\n        {part})"
    assert total is not None, "a sweep has at least one term"
    return total


def _sweep_args(sweep: Sweep, reduce: bool) -> tuple[str, ...]:
    inputs = list(sweep.inputs)
    if reduce:
        return tuple(inputs)
    return (sweep.out,) + tuple(n for n in inputs if n != sweep.out)


def _params(sweep: Sweep, reduce: bool, carriers: tuple[str, ...] = ()) -> str:
    names = _sweep_args(sweep, reduce) + carriers
    ps = []
    for n in names:
        writable = not reduce and n == sweep.out
        ps.append(f"{'' if writable else 'const '}real* __restrict__ f_{n}")
    if reduce:
        ps.append("double* __restrict__ partial")
    ps += [f"const int n{a}" for a in range(sweep.ndim)] + ["const int g", "const int pitch"]
    return ", ".join(ps)


def _strides(ndim: int) -> list[str]:
    """Padded strides as 64-bit values: s{a} is the element distance between neighbours along axis a.

    Rows lie `pitch` elements apart (at least the padded row, so a field may be a view with its rows on cache
    lines); the planes of a 3D field follow each other without gaps."""
    lines = []
    if ndim == 3:
        lines.append("const long long s1 = (long long)pitch;")
        lines.append("const long long s0 = s1 * ((long long)n1 + 2 * g);")
    else:
        lines.append("const long long s0 = (long long)pitch;")
    return lines


def _linear(offset: tuple[int, ...]) -> str:
    """Offset in elements from the current cell, written with the stride names."""
    nd = len(offset)
    parts = []
    for a, o in enumerate(offset):
        if o == 0:
            continue
        parts.append(f"{o}" if a == nd - 1 else f"{o} * s{a}")
    return " + ".join(parts)


def _at(base: str, offset: tuple[int, ...]) -> str:
    lin = _linear(offset)
    return f"{base} + {lin}" if lin else base


def _index_setup(ndim: int, block: tuple[int, ...]) -> list[str]:
    axes = ["x", "y", "z"]
    lines = []
    for a in range(ndim):
        ax = axes[ndim - 1 - a]
        lines.append(f"const int i{a} = blockIdx.{ax} * {block[a]} + threadIdx.{ax};")
    return lines


def _centre(ndim: int) -> str:
    if ndim == 3:
        return "const long long c = ((long long)i0 + g) * s0 + ((long long)i1 + g) * s1 + (i2 + g);"
    return "const long long c = ((long long)i0 + g) * s0 + (i1 + g);"


def naive_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    nd = sweep.ndim
    threads = math.prod(tile)
    out = f"f_{sweep.out}"
    expr = _expression(sweep, dtype, lambda f, o: f"f_{f}[{_at('c', o)}]")
    inside = " && ".join(f"i{a} < n{a}" for a in range(nd))
    body = [
        f'extern "C" __global__ void __launch_bounds__({threads}) {name}({_params(sweep, False)})',
        "{",
        *("    " + s for s in _index_setup(nd, tile)),
        f"    if (!({inside})) return;",
        *("    " + s for s in _strides(nd)),
        "    " + _centre(nd),
        f"    {out}[c] = {expr};",
        "}",
    ]
    return Kernel(name, "\n".join(body) + "\n", "naive", tile, _block(tile), tile, _sweep_args(sweep, False))


def _row_cells(tile: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The (plane, row) offsets of the cells one `rows` thread writes, for a tile (Z, R, X) or (R, X)."""
    return [tuple(c) for c in np.ndindex(*tile[:-1])]


def rows_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """A block of one row of threads; each thread writes its column in tile[:-1] consecutive rows/planes.

    Every value is computed before any is stored, so the loads of all the
    thread's cells are in flight together (__restrict__ lets the compiler
    hoist them); blockIdx.x runs along x and blockIdx.y along rows, which
    walks the arrays in address order like a flat elementwise kernel.
    """
    nd = sweep.ndim
    tx = tile[-1]
    out = f"f_{sweep.out}"
    last = f"n{nd - 1}"
    bounds = f"{tx}, {max(1, RESIDENT_THREADS // tx)}" if RESIDENT_THREADS else f"{tx}"
    lines = [
        f'extern "C" __global__ void __launch_bounds__({bounds}) {name}({_params(sweep, False)})',
        "{",
        f"    const int i{nd - 1} = blockIdx.x * {tx} + threadIdx.x;",
        f"    if (i{nd - 1} >= {last}) return;",
        *("    " + s for s in _strides(nd)),
    ]
    if nd == 3:
        lines += [
            f"    const int y0 = blockIdx.y * {tile[1]}, z0 = blockIdx.z * {tile[0]};",
            "    const long long c = ((long long)z0 + g) * s0 + ((long long)y0 + g) * s1 + (i2 + g);",
        ]
    else:
        lines += [f"    const int y0 = blockIdx.y * {tile[0]};", "    const long long c = ((long long)y0 + g) * s0 + (i1 + g);"]
    cells = []
    for k, off in enumerate(_row_cells(tile)):
        if nd == 3:
            inside, shift = f"z0 + {off[0]} < n0 && y0 + {off[1]} < n1", f"{off[0]} * s0 + {off[1]} * s1"
        else:
            inside, shift = f"y0 + {off[0]} < n0", f"{off[0]} * s0"
        lines += [f"    const bool in{k} = {inside};", f"    const long long c{k} = c + {shift};", f"    real v{k};"]
        cells.append(k)
    for k in cells:
        expr = _expression(sweep, dtype, lambda f, o, k=k: f"f_{f}[{_at(f'c{k}', o)}]")
        lines.append(f"    if (in{k}) v{k} = {expr};")
    lines += [f"    if (in{k}) {out}[c{k}] = v{k};" for k in cells]
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "rows", tile, (tx, 1, 1), tile, _sweep_args(sweep, False))


def fused_applicable(sweep: Sweep, steps: int = 2) -> str | None:
    """Why `steps` sweeps cannot be fused into one `fused_sweep` pass (None when they can)."""
    if sweep.ndim not in (2, 3):
        return "fused steps are generated for 2D and 3D sweeps only"
    if not sweep.iterates_one_field:
        return "fused steps need exactly one field read at neighbouring cells, written out of place"
    if not _is_star(sweep, sweep.stencil_inputs):
        return "fused steps need a star stencil (no diagonal offsets)"
    if sweep.ndim == 3 and steps != 2:
        return f"3D sweeps fuse two steps per pass, not {steps}"
    if sweep.ndim == 2 and (steps - 1) * sweep.radius > FUSED_REACH_2D:
        return f"2D fusion of {steps} steps reaches {(steps - 1) * sweep.radius} lanes into a warp's neighbours; at most {FUSED_REACH_2D}"
    if sweep.ndim == 3 and sweep.radius > PAIR_RADIUS_3D:
        return f"3D fused steps support radius up to {PAIR_RADIUS_3D}, not {sweep.radius}"
    return None


def fused_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str, steps: int = 2, ahead: int = PAIR_AHEAD,
                min_blocks: int | None = None) -> Kernel:
    """`steps` sweeps in one pass: out = S(...S(u)), u the one stencil field (3D: two steps).

    Each middle state's ghost cells are read from an array the caller fills
    with the walls of that step (the first from the output buffer's; for
    static walls they are u's). A warp's lanes hold 32 consecutive columns:
    each evaluates the first sweep on its column (x neighbours of u through
    L1), and each later one takes the state before it's x neighbours from the
    lanes beside it by warp shuffles, so u is read from DRAM once for all the
    steps. Every step's expression is the single sweep's, term for term, so
    each middle value is what `rows` would have stored.
    `ahead` (3D) is how many planes of u a thread's loads run ahead of their use;
    `min_blocks` (2D) the blocks per SM its __launch_bounds__ asks for (None: the compiler's choice).
    """
    reason = fused_applicable(sweep, steps)
    if reason:
        raise StencilforgeError(reason)
    if len(tile) != sweep.ndim or min(tile) < 1:
        raise StencilforgeError(f"a {sweep.ndim}D fused-step tile needs {sweep.ndim} positive sizes, got {tuple(tile)}")
    if tile[-1] % 32 or tile[-1] > MAX_THREADS:
        raise StencilforgeError(f"fused steps need whole warps, at most {MAX_THREADS} threads: tile {tuple(tile)} has {tile[-1]}")
    if sweep.ndim == 2:
        return _fused_rows(sweep, dtype, tuple(tile), name, steps, min_blocks)
    return _pair_march(sweep, dtype, tuple(tile), name, ahead)


def _tag(j: int) -> str:
    """A signed row or plane offset as part of a C identifier (-2 -> m2)."""
    return f"m{-j}" if j < 0 else str(j)


def _lane_shifts(sweep: Sweep, u: str) -> list[int]:
    """The x offsets at which the second sweep of a pair reads the middle state: one shuffle each."""
    return sorted({o[-1] for t in sweep.terms if t.field == u for o, _ in t.stencil.entries if o[-1]})


def _pair_operand(u: str, point, across, column):
    """Operand access for one sweep of a pair: a pointwise field f at the cell is point(f), u's x
    neighbour at dx is across(dx), and every other offset o of u (the cell, its rows, planes) column(o)."""

    def access(f, o):
        if f != u:
            return point(f)
        return across(o[-1]) if o[-1] else column(o)

    return access


def _fused_rows(sweep: Sweep, dtype, tile: tuple[int, ...], name: str, steps: int, min_blocks: int | None = None) -> Kernel:
    """2D: tile = (R, T), T threads along x, each writing R rows of its column after `steps` steps.

    A thread loads its column of u with k r rows of halo (k = steps) and
    evaluates step s on R + 2(k - s)r rows: the first from u (x neighbours
    through L1), each later one from the step before it (x neighbours by warp
    shuffles), so a warp writes 32 - 2(k - 1)r columns. The state after step
    s < k takes its ghost cells from the array `_walls{s}` (step 1: the output
    buffer's), which the caller fills with the walls of time n + s.
    A block whose cells of every step lie inside the grid runs a copy of the
    body without bounds tests or wall reads: the same arithmetic with far
    fewer instructions per cell.
    """
    rows, threads = tile
    (u,) = sweep.stencil_inputs
    r, k = sweep.radius, steps
    reach = (k - 1) * r
    useful = 32 - 2 * reach
    cover = threads // 32 * useful
    carriers = tuple(f"_walls{s}" for s in range(2, k))
    bounds = f"{threads}, {min_blocks}" if min_blocks else f"{threads}"
    lines = [
        f'extern "C" __global__ void __launch_bounds__({bounds}) {name}({_params(sweep, False, carriers)})',
        "{",
        "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;",
        f"    const int i1 = blockIdx.x * {cover} + warp * {useful} + lane - {reach};",
        f"    const int y0 = blockIdx.y * {rows};",
        *("    " + s for s in _strides(2)),
        "    const bool col_in = i1 >= 0 && i1 < n1, col_pad = i1 >= -g && i1 < n1 + g;",
        "    const long long c = ((long long)y0 + g) * s0 + (i1 + g);",
    ]
    lines += [  # every lane's column and every row of step 1 inside: uniform over the block, so shuffles stay whole
        f"    const int x0 = blockIdx.x * {cover};",
        f"    const bool interior = x0 >= {reach} && x0 + {cover + reach} <= n1 && y0 >= {reach} && y0 + {rows + reach} <= n0;",
        "    if (interior) {",
        *("        " + x for x in _fused_body(sweep, dtype, rows, k, carriers, guarded=False)),
        "        return;",
        "    }",
        *("    " + x for x in _fused_body(sweep, dtype, rows, k, carriers, guarded=True)),
    ]
    lines.append("}")
    label = "rows, two steps" if k == 2 else f"rows, {k} steps"
    return Kernel(name, "\n".join(lines) + "\n", label, tile, (threads, 1, 1), (rows, cover), _sweep_args(sweep, False) + carriers)


def _fused_body(sweep: Sweep, dtype, rows: int, k: int, carriers: tuple[str, ...], guarded: bool) -> list[str]:
    """The statements of `_fused_rows` after its index set-up: loads, the k - 1 middle steps, the stores.
    Unguarded, every load, cell and store is taken to lie inside the grid (the interior path)."""
    (u,) = sweep.stencil_inputs
    r = sweep.radius
    lines = []
    for j in range(-k * r, rows + k * r):
        load = f"f_{u}[c + {j} * s0]"
        guard = f"col_pad && y0 + {j} >= -g && y0 + {j} < n0 + g"
        lines.append(f"const real u_{_tag(j)} = {f'{guard} ? {load} : (real)0' if guarded else load};")
    # y0 + j >= -g always holds in the wall's guard, but without it ptxas schedules poisson2d's pair
    # far slower on the H100 (measured at commit 1818c58), so it stays
    previous = "u"
    for s in range(1, k):
        state = "w" if k == 2 else f"w{s}"
        walls = f"f_{sweep.out}" if s == 1 else f"f_{carriers[s - 2]}"
        for j in range(-(k - s) * r, rows + (k - s) * r):
            if s > 1:
                lines += [f"const real {previous}x_{_tag(j)}_{_tag(d)} = __shfl_sync(0xffffffffu, {previous}_{_tag(j)}, lane + {d});"
                          for d in _lane_shifts(sweep, u)]
            loaded = f"f_{u}[c + {j} * s0 + {{}}]"  # step 1: x neighbours of u through L1; later: shuffled values
            across = loaded if s == 1 else f"{previous}x_{_tag(j)}_{{}}"
            operand = _pair_operand(u, lambda f, j=j: f"f_{f}[c + {j} * s0]",
                                    lambda dx, a=across, s=s: a.format(dx if s == 1 else _tag(dx)),
                                    lambda o, j=j, p=previous: f"{p}_{_tag(j + o[0])}")
            value = _expression(sweep, dtype, operand)
            if guarded:
                inside = f"col_in && y0 + {j} >= 0 && y0 + {j} < n0"
                wall = f"col_pad && y0 + {j} >= -g && y0 + {j} < n0 + g ? {walls}[c + {j} * s0] : (real)0"
                value = f"{inside} ? ({value}) : ({wall})"
            lines.append(f"const real {state}_{_tag(j)} = {value};")
        previous = state
    shuffled = "x" if k == 2 else f"{previous}x"
    for j in range(rows):
        for d in _lane_shifts(sweep, u):
            lines.append(f"const real {shuffled}_{j}_{_tag(d)} = __shfl_sync(0xffffffffu, {previous}_{j}, lane + {d});")
    lines.append(f"if (lane < {(k - 1) * r} || lane >= {32 - (k - 1) * r}{' || !col_in' if guarded else ''}) return;")
    for j in range(rows):
        last = _pair_operand(u, lambda f, j=j: f"f_{f}[c + {j} * s0]", lambda dx, j=j: f"{shuffled}_{j}_{_tag(dx)}",
                             lambda o, j=j: f"{previous}_{_tag(j + o[0])}")
        store = f"f_{sweep.out}[c + {j} * s0] = {_expression(sweep, dtype, last)};"
        lines.append(f"if (y0 + {j} < n0) {store}" if guarded else store)
    return lines


def _pair_march(sweep: Sweep, dtype, tile: tuple[int, ...], name: str, ahead: int) -> Kernel:
    """3D: tile = (Z, R, T); T threads are warps stacked along y, each thread writing R rows of its
    column in each of Z planes, which the block marches through along z.

    Per plane a thread loads a plane of u (R + 4r rows) `ahead` planes before
    it is needed, evaluates the middle state r planes behind the newest one
    it uses (R + 2r rows, z neighbours from a queue of 2r + 1 planes of u),
    and the output r planes further behind from a queue of 2r + 1 middle
    planes. The queues live in registers and shift by one plane per step;
    only the plane chunk's 2r-plane margins are read twice. A block whose
    middle cells all lie inside the grid runs a copy of the march without
    bounds tests or wall reads (as `_fused_rows` does).
    """
    planes, rows, threads = tile
    r = sweep.radius
    useful = 32 - 2 * r
    warps = threads // 32
    lines = [
        f'extern "C" __global__ void __launch_bounds__({threads}) {name}({_params(sweep, False)})',
        "{",
        "    const int lane = threadIdx.x;",
        f"    const int i2 = blockIdx.x * {useful} + lane - {r};",
        f"    const int y0 = (blockIdx.y * {warps} + threadIdx.y) * {rows};",
        "    if (y0 >= n1) return;  // the whole warp: its shuffles stay complete",
        f"    const int z0 = blockIdx.z * {planes};",
        f"    const int zend = min(z0 + {planes}, n0);",
        *("    " + x for x in _strides(3)),
        "    const bool col_in = i2 >= 0 && i2 < n2, col_pad = i2 >= -g && i2 < n2 + g;",
        f"    const bool writer = col_in && lane >= {r} && lane < {32 - r};",
        f"    const int x0 = blockIdx.x * {useful} - {r}, y00 = blockIdx.y * {warps * rows};",
        f"    const bool interior = x0 >= 0 && x0 + 32 <= n2 && y00 >= {r} && y00 + {warps * rows + r} <= n1"
        f" && z0 >= {r} && z0 + {planes + r} <= n0;",
        "    if (interior) {",
        *("        " + x for x in _march_body(sweep, dtype, rows, ahead, guarded=False)),
        "        return;",
        "    }",
        *("    " + x for x in _march_body(sweep, dtype, rows, ahead, guarded=True)),
        "}",
    ]
    cover = (planes, rows * warps, useful)
    return Kernel(name, "\n".join(lines) + "\n", "march, two steps", tile, (32, warps, 1), cover, _sweep_args(sweep, False))


def _march_body(sweep: Sweep, dtype, rows: int, ahead: int, guarded: bool) -> list[str]:
    """The statements of `_pair_march` after its index set-up. Unguarded, every row and column of u, of
    the middle state and of the output is taken to lie inside the grid (the interior path); the plane
    guards of the loads stay."""
    (u,) = sweep.stencil_inputs
    r = sweep.radius
    out = f"f_{sweep.out}"
    u_rows = range(-2 * r, rows + 2 * r)
    w_rows = range(-r, rows + r)
    lines = []
    if guarded:
        lines += [f"const bool pad_{_tag(j)} = col_pad && y0 + {j} >= -g && y0 + {j} < n1 + g;" for j in u_rows]
        lines += [f"const bool in_{_tag(j)} = col_in && y0 + {j} >= 0 && y0 + {j} < n1;" for j in w_rows]

    def pad(j):
        return f" && pad_{_tag(j)}" if guarded else ""

    newest = 2 * r + ahead
    lines += [f"real {', '.join(f'u{k}_{_tag(j)}' for j in u_rows)};" for k in range(newest + 1)]
    # The middle queue is shifted before it fills (u's is filled first): copying an uninitialised value
    # is undefined, and NVRTC miscompiled this kernel when it was (float64 r=2 at 255 registers on an
    # H100: rows 2.. of each thread wrong). The other marching kernels zero their queues for the same reason.
    lines += [f"real {', '.join(f'w{k}_{_tag(j)} = 0' for j in w_rows)};" for k in range(2 * r + 1)]
    lines.append("const long long base = (long long)g * s0 + ((long long)y0 + g) * s1 + (i2 + g);")
    for k in range(newest):  # u planes z0 - 2r .. z0 + ahead - 1
        z = f"z0 + {k - 2 * r}"
        lines.append(f"{{ const bool p = {z} >= -g && {z} < n0 + g; const long long c = base + (long long)({z}) * s0;")
        lines += [f"  u{k}_{_tag(j)} = p{pad(j)} ? f_{u}[c + {j} * s1] : (real)0;" for j in u_rows]
        lines.append("}")
    lines += [
        f"for (int q = z0 - {r}; q < zend + {r}; ++q) {{  // middle plane q, output plane q - {r}",
        "    const long long c = base + (long long)q * s0;",
        f"    const bool pn = q + {r + ahead} < n0 + g;",
    ]
    if guarded:
        lines.append("    const bool pin = q >= 0 && q < n0;  // -g <= q < n0 + g always")
    lines += [f"    u{newest}_{_tag(j)} = pn{pad(j)} ? f_{u}[c + {r + ahead} * s0 + {j} * s1] : (real)0;" for j in u_rows]
    for j in w_rows:
        first = _pair_operand(u, lambda f, j=j: f"f_{f}[c + {j} * s1]", lambda dx, j=j: f"f_{u}[c + {j} * s1 + {dx}]",
                              lambda o, j=j: f"u{r + o[0]}_{_tag(j + o[1])}")
        value = _expression(sweep, dtype, first)
        if guarded:
            value = f"pin && in_{_tag(j)} ? ({value}) : (pad_{_tag(j)} ? {out}[c + {j} * s1] : (real)0)"
        lines.append(f"    w{2 * r}_{_tag(j)} = {value};")
    lines.append(f"    if (q >= z0 + {r}) {{")
    for j in range(rows):
        lines += [f"        const real x_{j}_{_tag(d)} = __shfl_sync(0xffffffffu, w{r}_{j}, lane + {d});"
                  for d in _lane_shifts(sweep, u)]
    lines.append(f"        const long long o = c - {r} * s0;")
    for j in range(rows):
        second = _pair_operand(u, lambda f, j=j: f"f_{f}[o + {j} * s1]", lambda dx, j=j: f"x_{j}_{_tag(dx)}",
                               lambda o, j=j: f"w{r + o[0]}_{_tag(j + o[1])}")
        write = f"writer && y0 + {j} < n1" if guarded else f"lane >= {r} && lane < {32 - r}"
        lines.append(f"        if ({write}) {out}[o + {j} * s1] = {_expression(sweep, dtype, second)};")
    lines.append("    }")
    lines += [f"    u{k}_{_tag(j)} = u{k + 1}_{_tag(j)};" for k in range(newest) for j in u_rows]
    lines += [f"    w{k}_{_tag(j)} = w{k + 1}_{_tag(j)};" for k in range(2 * r) for j in w_rows]
    lines.append("}")
    return lines


def _block(tile: tuple[int, ...]) -> tuple[int, int, int]:
    rev = list(reversed(tile)) + [1, 1]
    return (rev[0], rev[1], rev[2])


def tiled_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """Each stencil field's tile+halo box staged in (dynamic) shared memory, then one cell per thread."""
    nd = sweep.ndim
    radii = _field_radii(sweep)
    staged = list(radii)
    star = _is_star(sweep, staged)
    threads = math.prod(tile)
    itemsize = np.dtype(dtype).itemsize
    boxes = {f: tuple(t + 2 * r for t, r in zip(tile, radii[f])) for f in staged}
    offsets, total = {}, 0
    for f in staged:
        offsets[f] = total
        total += math.prod(boxes[f])
    smem = total * itemsize
    _check_smem(smem, "tiled", tile)
    lines = [
        f'extern "C" __global__ void __launch_bounds__({threads}) {name}({_params(sweep, False)})',
        "{",
        "    extern __shared__ real sf_smem[];",
    ]
    axes = ["x", "y", "z"]
    lines += [f"    const int t{a} = threadIdx.{axes[nd - 1 - a]};" for a in range(nd)]
    lines += [f"    const int b{a} = blockIdx.{axes[nd - 1 - a]} * {tile[a]};" for a in range(nd)]
    lines += [f"    const int i{a} = b{a} + t{a};" for a in range(nd)]
    lines += ["    " + s for s in _strides(nd)]
    tid = " + ".join(
        f"t{a}" + "".join(f" * {tile[b]}" for b in range(a + 1, nd)) for a in range(nd)
    )
    lines.append(f"    const int tid = {tid};")
    for f in staged:
        box, r = boxes[f], radii[f]
        lines.append(f"    real* s_{f} = sf_smem + {offsets[f]};")
        lines.append(f"    for (int t = tid; t < {math.prod(box)}; t += {threads}) {{")
        rest = "t"
        for a in range(nd):
            inner = math.prod(box[a + 1 :])
            if a < nd - 1:
                lines.append(f"        const int a{a} = {rest} / {inner};")
                lines.append(f"        const int m{a} = {rest} - a{a} * {inner};")
                rest = f"m{a}"
            else:
                lines.append(f"        const int a{a} = {rest};")
        lines += [f"        const int j{a} = b{a} + a{a} - {r[a]};" for a in range(nd)]
        conds = [f"j{a} < n{a} + {r[a]}" for a in range(nd)]
        if star and nd > 1:
            outside = " + ".join(f"(a{a} < {r[a]} || a{a} >= {r[a] + tile[a]})" for a in range(nd))
            conds.append(f"({outside}) <= 1")
        idx = " + ".join(
            [f"((long long)j{a} + g) * s{a}" for a in range(nd - 1)] + [f"(j{nd - 1} + g)"]
        )
        lines.append(f"        if ({' && '.join(conds)}) s_{f}[t] = f_{f}[{idx}];")
        lines.append("    }")
    lines.append("    __syncthreads();")
    inside = " && ".join(f"i{a} < n{a}" for a in range(nd))
    lines.append(f"    if (!({inside})) return;")
    lines.append("    " + _centre(nd))

    def access(f, o):
        if f in radii:
            box, r = boxes[f], radii[f]
            parts = []
            for a in range(nd):
                stride = math.prod(box[a + 1 :])
                pos = f"(t{a} + {r[a] + o[a]})"
                parts.append(pos if stride == 1 else f"{pos} * {stride}")
            return f"s_{f}[{' + '.join(parts)}]"
        return f"f_{f}[{_at('c', o)}]"

    lines.append(f"    f_{sweep.out}[c] = {_expression(sweep, dtype, access)};")
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "tiled", tile, _block(tile), tile, _sweep_args(sweep, False), smem)


def _check_smem(nbytes: int, strategy: str, tile) -> None:
    if nbytes > SMEM_LIMIT:
        raise StencilforgeError(
            f"strategy {strategy} with tile {tuple(tile)} needs {nbytes} bytes of shared memory per block "
            f"(limit {SMEM_LIMIT}); choose a smaller tile"
        )


def streaming_applicable(sweep: Sweep) -> str | None:
    """None if the sweep can march along axis 0, else why not."""
    if sweep.ndim < 2:
        return "streaming needs a 2D or 3D sweep"
    for t in sweep.terms:
        for o, _ in t.stencil.entries:
            if o[0] != 0 and any(o[1:]):
                return f"streaming needs stencils whose axis-0 offsets lie on the column; offset {o} does not"
    return None



@dataclass(frozen=True)
class _March:
    """What the plane-marching generators share: the tile split into the chunk of planes and the plane
    tile, each stencil field's reach (staged in a column queue and a plane), the fields read at the cell."""

    nd: int
    chunk: int
    plane_tile: tuple[int, ...]
    radii: dict
    staged: list
    points: list
    star: bool
    threads: int
    boxes: dict
    column_radius: int

    @property
    def unroll(self) -> int:
        """Planes whose loads a thread issues together: 2 for a long column queue, which leaves no
        registers for more (spills at radius 8)."""
        return min(UNROLL if self.column_radius <= 4 else 2, self.chunk)


def _march(sweep: Sweep, tile: tuple[int, ...]) -> _March:
    reason = streaming_applicable(sweep)
    if reason:
        raise StencilforgeError(reason)
    chunk, plane_tile = tile[0], tuple(tile[1:])
    radii = _field_radii(sweep)
    staged = list(radii)
    return _March(
        nd=sweep.ndim,
        chunk=chunk,
        plane_tile=plane_tile,
        radii=radii,
        staged=staged,
        points=[n for n in sweep.inputs if n not in radii],
        star=_is_star(sweep, staged),
        threads=math.prod(plane_tile),
        boxes={f: tuple(t + 2 * r for t, r in zip(plane_tile, radii[f][1:])) for f in staged},
        column_radius=max((r[0] for r in radii.values()), default=0),
    )


def _halo_cells(plane_tile, r, star: bool) -> list[tuple[str, int, int, int, int]]:
    """In-plane halo of a tile as rectangles (name, a_start, a_len, b_start, b_len) in box coordinates."""
    if len(plane_tile) == 1:
        (tx,), (rx,) = plane_tile, r
        return [("left", 0, 1, 0, rx), ("right", 0, 1, rx + tx, rx)] if rx else []
    (ty, tx), (ry, rx) = plane_tile, r
    wide = tx if star else tx + 2 * rx
    b0 = rx if star else 0
    rects = []
    if ry:
        rects += [("top", 0, ry, b0, wide), ("bottom", ry + ty, ry, b0, wide)]
    if rx:
        rects += [("left", ry, ty, 0, rx), ("right", ry, ty, rx + tx, rx)]
    return rects


def _march_setup(nd: int, plane_tile, radii, boxes, star: bool) -> tuple[list[str], dict[str, int]]:
    """Thread coordinates in the plane tile and each stencil field's halo slots, shared by the plane marchers.

    Thread tid copies the halo cells tid, tid + threads, ... of the in-plane
    halo rectangles; those positions are fixed per block, so they are computed
    once (shared offset sidx, global offset goff, in-range flag load). A thread
    outside the interior but within the halo reach (edge) still owns its own
    cell of the box. Returns the lines and the number of halo slots per field.
    """
    threads = math.prod(plane_tile)
    if nd == 3:
        ty, tx = plane_tile
        lines = [
            "    const int tx = threadIdx.x, ty = threadIdx.y;",
            f"    const int tid = ty * {tx} + tx;",
            f"    const int b2 = blockIdx.x * {tx}, b1 = blockIdx.y * {ty};",
            "    const int i2 = b2 + tx, i1 = b1 + ty;",
            "    const bool active = i1 < n1 && i2 < n2;",
            *("    " + s for s in _strides(3)),
            "    const long long col = ((long long)i1 + g) * s1 + (i2 + g);",
        ]
    else:
        (tx,) = plane_tile
        lines = [
            "    const int tx = threadIdx.x;",
            "    const int tid = tx;",
            f"    const int b1 = blockIdx.x * {tx};",
            "    const int i1 = b1 + tx;",
            "    const bool active = i1 < n1;",
            *("    " + s for s in _strides(2)),
            "    const long long col = i1 + g;",
        ]
    slot_count = {}
    for f in radii:
        r = radii[f][1:]
        box = boxes[f]
        rects = _halo_cells(plane_tile, r, star)
        total = sum(al * bl for _, _, al, _, bl in rects)
        slot_count[f] = math.ceil(total / threads)
        in_range = f"i1 < n1 + {r[0]} && i2 < n2 + {r[1]}" if nd == 3 else f"i1 < n1 + {r[0]}"
        lines.append(f"    const bool edge_{f} = !active && {in_range};")
        for m in range(slot_count[f]):
            if nd == 3:
                place = _place_3d(f, m, r, total, box[1], 1)
            else:
                place = [
                    f"        const int j1 = b1 + b - {r[0]};",
                    f"        load_{f}_{m} = h < {total} && j1 < n1 + {r[0]};",
                    f"        sidx_{f}_{m} = b;",
                    f"        goff_{f}_{m} = j1 + g;",
                ]
            lines += _halo_slot(f, m, threads, rects, place)
    return lines, slot_count


def _halo_slot(f: str, m: int, threads: int, rects, place: list[str]) -> list[str]:
    """Halo slot m of field f: the cell (a, b) of the halo rectangles that thread tid copies, then
    `place`, which turns it into the slot's shared index, global offset and in-range flag."""
    lines = [f"    int sidx_{f}_{m} = 0; long long goff_{f}_{m} = 0; bool load_{f}_{m} = false;", "    {",
             f"        int h = tid + {m * threads}, a = 0, b = 0;"]
    kw, start = "if", 0
    for _, a0, al, bs, bl in rects:
        lines.append(f"        {kw} (h < {start + al * bl}) {{ const int k = h - {start}; a = {a0} + k / {bl}; b = {bs} + k % {bl}; }}")
        kw, start = "else if", start + al * bl
    return lines + place + ["    }"]


def _place_3d(f: str, m: int, r, total: int, row: int, vector: int) -> list[str]:
    """`_halo_slot`'s placement in a 3D plane whose x is counted in vectors of `vector` cells."""
    b, s1, x = ("b", "s1", "(j2 + g)") if vector == 1 else (f"{vector} * b", "s1v", f"(j2 + g) / {vector}")
    return [
        f"        const int j1 = b1 + a - {r[0]}, j2 = b2 + {b} - {r[1]};",
        f"        load_{f}_{m} = h < {total} && j1 < n1 + {r[0]} && j2 < n2 + {r[1]};",
        f"        sidx_{f}_{m} = a * {row} + b;",
        f"        goff_{f}_{m} = ((long long)j1 + g) * {s1} + {x};",
    ]


def _in_box(r, box, o) -> str:
    """Index, in a plane box of in-plane halo r, of the cell at offset o (axis-0 part ignored) from the thread's own."""
    if len(box) == 2:
        return f"(ty + {r[0] + o[1]}) * {box[1]} + tx + {r[1] + o[2]}"
    return f"tx + {r[0] + o[1]}"


def _resident_threads(ndim: int, column_radius: int) -> int:
    """Threads per SM that streaming's __launch_bounds__ asks for, i.e. its register cap.

    Measured on the H100 (docs/performance.md): 1536 for heat3d (40 registers),
    1280 for heat2d; a radius-8 column needs its 64 registers (1536 spills).
    """
    if column_radius > 4:
        return 1024
    return 1536 if ndim == 3 else 1280


def _queue_shift(radii: dict, by: int) -> list[str]:
    """Each column queue moves `by` planes on: entry j takes entry j + by."""
    return [f"        q_{f}_{j} = q_{f}_{j + by};" for f, r in radii.items() for j in range(2 * r[0])]


def _march_outputs(sweep: Sweep, dtype, radii: dict, unroll: int, active: str | None, inplane) -> list[str]:
    """The `unroll` output planes of one trip of a march, then the queue shift and the loop's end.

    Column neighbours come from the register queue q, pointwise values from
    v, in-plane neighbours from `inplane(field, offset, k)`; `active` guards the
    store where the block has idle threads (None: they have returned).
    """
    lines = []
    for k in range(unroll):

        def access(f, o, k=k):
            if f in radii:
                if o[0] != 0 or not any(o[1:]):
                    return f"q_{f}_{radii[f][0] + o[0] + k}"
                return inplane(f, o, k)
            return f"v_{f}_{k}"

        conditions = ([active] if active else []) + ([f"z + {k} < z1"] if k else [])
        guard = f"if ({' && '.join(conditions)}) " if conditions else ""
        lines.append(f"        {guard}f_{sweep.out}[p + col + {k} * s0] = {_expression(sweep, dtype, access)};")
    return lines + _queue_shift(radii, unroll) + ["    }"]


def _march_kernel(name: str, lines: list[str], strategy: str, sweep: Sweep, tile, smem: int = 0) -> Kernel:
    """A marching kernel: the block is the plane tile (x fastest) and covers `chunk` planes."""
    plane_tile = tuple(tile[1:])
    block = (plane_tile[-1], plane_tile[0] if sweep.ndim == 3 else 1, 1)
    source = "\n".join(lines + ["}"]) + "\n"
    return Kernel(name, source, strategy, tile, block, tuple(tile), _sweep_args(sweep, False), smem)


def _fit_unroll(unroll: int, plane_bytes: int, strategy: str, tile) -> int:
    """Planes per group that fit twice (double-buffered) in static shared memory: halved until they do."""
    while unroll > 1 and 2 * unroll * plane_bytes > STATIC_SMEM_LIMIT:
        unroll //= 2
    if 2 * unroll * plane_bytes > STATIC_SMEM_LIMIT:
        raise StencilforgeError(
            f"strategy {strategy} with tile {tuple(tile)} needs {2 * plane_bytes} bytes of shared memory per block "
            f"(limit {STATIC_SMEM_LIMIT}); choose a smaller tile"
        )
    return unroll


def _prefetch(lay: _March, slots: dict, unroll: int, zs: str, ps: str, indent: str, ptr: str = "f", s0: str = "s0") -> list[str]:
    """Loads of the group of planes starting at plane zs (offset ps, counted in elements of `ptr`'s
    arrays) into the n/h/w registers: the column's next values, the halo slots, the pointwise fields."""
    lines = []
    for k in range(unroll):
        lines.append(f"{indent}if ({zs} + {k} < z1) {{")
        for f in lay.staged:
            lines.append(f"{indent}    if (lc_{f}) n_{f}_{k} = {ptr}_{f}[{ps} + col + {lay.radii[f][0] + k} * {s0}];")
            lines += [f"{indent}    if (load_{f}_{m}) h_{f}_{m}_{k} = {ptr}_{f}[{ps} + {k} * {s0} + goff_{f}_{m}];"
                      for m in range(slots[f])]
        lines += [f"{indent}    if (active) w_{f}_{k} = {ptr}_{f}[{ps} + col + {k} * {s0}];" for f in lay.points]
        lines.append(f"{indent}}}")
    return lines


def _march_head(lay: _March, slots: dict, unroll: int, typ: str, zero: str, ptr: str, s0: str, axis: str, centre: dict) -> list[str]:
    """What `streaming` and `streaming_vec` share from the chunk's bounds to the loop's barrier, in
    elements of type `typ` (zero: its zero) read through `ptr`_f with plane stride `s0`, the callers
    having declared each stencil field's in-range flag lc_f: per stencil field its zeroed queue,
    prefetch and halo registers and the queue's first 2r values (where lc_f); the pointwise
    registers; the first group's loads; then the loop head,
    which feeds the queues, stages the group in shared memory (the thread's own cell at centre[f])
    and issues the next group's loads before the barrier."""
    lines = [
        f"    const int z0 = blockIdx.{axis} * {lay.chunk};",
        f"    const int z1 = min(z0 + {lay.chunk}, n0);",
        f"    long long p = ((long long)z0 + g) * {s0};",
    ]
    for f in lay.staged:
        rz = lay.radii[f][0]
        lines.append(f"    {typ} {', '.join(f'q_{f}_{j} = {zero}' for j in range(2 * rz + unroll))};")
        lines.append(f"    {typ} {', '.join(f'n_{f}_{k} = {zero}' for k in range(unroll))};")
        if slots[f]:
            lines.append(f"    {typ} {', '.join(f'h_{f}_{m}_{k} = {zero}' for m in range(slots[f]) for k in range(unroll))};")
        if rz:
            lines.append(f"    if (lc_{f}) {{")
            lines += [f"        q_{f}_{j} = {ptr}_{f}[p + col + {j - rz} * {s0}];" for j in range(2 * rz)]
            lines.append("    }")
    for f in lay.points:
        lines.append(f"    {typ} {', '.join(f'{level}_{f}_{k} = {zero}' for level in 'vw' for k in range(unroll))};")
    lines += _prefetch(lay, slots, unroll, "z0", "p", "    ", ptr, s0)
    lines.append("    int st = 0;")
    lines.append(f"    for (int z = z0; z < z1; z += {unroll}, p += {unroll} * {s0}, st ^= 1) {{")
    for f in lay.staged:
        lines += [f"        q_{f}_{2 * lay.radii[f][0] + k} = n_{f}_{k};" for k in range(unroll)]
    for f in lay.points:
        lines += [f"        v_{f}_{k} = w_{f}_{k};" for k in range(unroll)]
    for k in range(unroll):
        lines.append("        {" if k == 0 else f"        if (z + {k} < z1) {{")
        for f in lay.staged:
            lines.append(f"            if (lc_{f}) s_{f}[st][{k}][{centre[f]}] = q_{f}_{lay.radii[f][0] + k};")
            lines += [f"            if (load_{f}_{m}) s_{f}[st][{k}][sidx_{f}_{m}] = h_{f}_{m}_{k};" for m in range(slots[f])]
        lines.append("        }")
    lines += _prefetch(lay, slots, unroll, f"z + {unroll}", f"p + {unroll} * {s0}", "        ", ptr, s0)
    lines.append("        __syncthreads();")
    return lines


def streaming_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """2.5D: march along axis 0 with a register queue per stencil field and the plane in shared memory.

    tile = (chunk, ty, tx) in 3D or (chunk, tx) in 2D: the block is (tx, ty)
    threads and walks `chunk` planes, re-reading 2r planes at each chunk start.
    Planes go UNROLL at a time (2 for a column radius above 4), and the loads
    of the next group (column, halo and pointwise values) are issued into
    registers before the barrier and the arithmetic of the current one, so DRAM
    requests stay in flight while the block waits and computes (ncu: barrier
    and long-scoreboard stalls dominated without it). Shared planes are double
    buffered, so one barrier per group suffices. The halo cells each thread
    loads are fixed per block and computed once.
    """
    lay = _march(sweep, tile)
    nd, plane_tile, radii, staged, star, threads, boxes = lay.nd, lay.plane_tile, lay.radii, lay.staged, lay.star, lay.threads, lay.boxes
    unroll = _fit_unroll(lay.unroll, sum(math.prod(b) for b in boxes.values()) * np.dtype(dtype).itemsize, "streaming", tile)
    min_blocks = max(1, (RESIDENT_THREADS or _resident_threads(nd, lay.column_radius)) // threads)
    lines = [
        f'extern "C" __global__ void __launch_bounds__({threads}, {min_blocks}) {name}({_params(sweep, False)})',
        "{",
    ]
    for f in staged:
        lines.append(f"    __shared__ real s_{f}[2][{unroll}][{math.prod(boxes[f])}];")
    setup, slots = _march_setup(nd, plane_tile, radii, boxes, star)
    lines += setup
    centre = {f: _in_box(radii[f][1:], boxes[f], (0,) * nd) for f in staged}
    lines += [f"    const bool lc_{f} = active || edge_{f};" for f in staged]
    lines += _march_head(lay, slots, unroll, "real", "0", "f", "s0", "z" if nd == 3 else "y", centre)
    lines += _march_outputs(
        sweep, dtype, radii, unroll, "active", lambda f, o, k: f"s_{f}[st][{k}][{_in_box(radii[f][1:], boxes[f], o)}]"
    )
    return _march_kernel(name, lines, "streaming", sweep, tile)


_VECTOR_TYPES = {("float", 4): "float4", ("float", 2): "float2", ("double", 2): "double2"}
_LANES = "xyzw"


def vector_width(sweep: Sweep, dtype) -> int:
    """Cells per thread of `streaming_vec`: the widest vector of the dtype (16 bytes at most) that
    divides the x radius of a 3D sweep, or 0 where none does (then only `streaming` applies)."""
    if sweep.ndim != 3:
        return 0
    rx = max((r[-1] for r in _field_radii(sweep).values()), default=0)
    return next((width for (c, width) in _VECTOR_TYPES if c == ctype(dtype) and rx % width == 0), 0)


MARCHING_STRATEGIES = ("streaming", "streaming_vec", "streaming_l1", "pipelined")


def code_signature(plan: Sweep | AxisOperator, dtype) -> str:
    """A digest of what every applicable strategy generates for the plan's structure (default
    tiles, every coefficient 1): a tuned winner is kept only while the code it was measured on is."""
    if isinstance(plan, Sweep):
        unit = Sweep(plan.out, tuple(Term(t.field, Stencil.from_dict({o: 1.0 for o, _ in t.stencil.entries}), t.factor)
                                     for t in plan.terms))
        sources = [sweep_kernel(unit, s, dtype).source for s in applicable_strategies(unit, dtype)]
    else:
        sources = [operator_kernel(plan, s, dtype).source for s in applicable_strategies(plan, dtype)]
    return hashlib.sha256("\0".join(sources).encode()).hexdigest()[:16]


def applicable_strategies(plan: Sweep | AxisOperator, dtype) -> tuple[str, ...]:
    """The strategies offered for a plan: all of its kind, less the vector ones where no vector of
    cells fits (`streaming_vec`: an odd x radius or 2D; `rows_vec`: derivatives along y) and the
    marching ones where the stencil leaves the column (`streaming_applicable`: box stencils)."""
    if isinstance(plan, AxisOperator):
        return tuple(s for s in OPERATOR_STRATEGIES if s != "rows_vec" or plan.axis == plan.ndim - 1)
    marching = streaming_applicable(plan) is None
    return tuple(
        s for s in SWEEP_STRATEGIES
        if (s != "streaming_vec" or vector_width(plan, dtype)) and (marching or s not in MARCHING_STRATEGIES)
    )


def streaming_vector_sweep(sweep: Sweep, dtype, tile: tuple[int, int, int], name: str) -> Kernel:
    """streaming with `vector_width` consecutive cells per thread along x, every access a vector.

    The plane tile is cut into chunks of `vector` cells: a thread owns one
    chunk, its column queue holds vectors, and the shared plane (halo included,
    whose x width is a multiple of the chunk) is read one vector per chunk,
    so a radius-8 row segment for 4 cells is 5 loads instead of 64. Global
    loads and stores are whole vectors: the launcher runs this kernel only
    where the ghost width and the x extent are multiples of the width (rows
    then start aligned) and falls back to scalar streaming elsewhere. Fewer
    instructions and registers per cell, which makes it auto's kernel for
    long even-radius stencils (benchmarks/results/h100-bench-74bc822.json).
    """
    vector = vector_width(sweep, dtype)
    if not vector:
        raise StencilforgeError("strategy streaming_vec needs a 3D sweep with an even x radius; use streaming")
    lay = _march(sweep, tile)
    (ty_cells, tx_cells), radii, staged, star = lay.plane_tile, lay.radii, lay.staged, lay.star
    if tx_cells % vector:
        raise StencilforgeError(f"strategy streaming_vec needs a tile whose x extent is a multiple of {vector}, got {tuple(tile)}")
    vt = _VECTOR_TYPES[(ctype(dtype), vector)]
    lanes = _LANES[:vector]
    tx = tx_cells // vector
    threads = ty_cells * tx
    width = {f: tx + 2 * radii[f][2] // vector for f in staged}
    rows = {f: ty_cells + 2 * radii[f][1] for f in staged}
    unroll = _fit_unroll(lay.unroll, sum(rows[f] * width[f] for f in staged) * vector * np.dtype(dtype).itemsize, "streaming_vec", tile)
    resident = RESIDENT_THREADS or _resident_threads(3, lay.column_radius) // vector
    lines = [
        f'extern "C" __global__ void __launch_bounds__({threads}, {max(1, resident // threads)}) {name}({_params(sweep, False)})',
        "{",
    ]
    for f in staged:
        lines.append(f"    __shared__ {vt} s_{f}[2][{unroll}][{rows[f] * width[f]}];")
    lines += [
        "    const int tx = threadIdx.x, ty = threadIdx.y;",
        f"    const int tid = ty * {tx} + tx;",
        f"    const int b2 = blockIdx.x * {tx_cells}, b1 = blockIdx.y * {ty_cells};",
        f"    const int i2 = b2 + {vector} * tx, i1 = b1 + ty;",
        "    const bool active = i1 < n1 && i2 < n2;",
        *("    " + s for s in _strides(3)),
        f"    const long long s0v = s0 / {vector}, s1v = s1 / {vector};",
        f"    const long long col = ((long long)i1 + g) * s1v + (i2 + g) / {vector};",
    ]
    for n in _sweep_args(sweep, False):
        const = "" if n == sweep.out else "const "
        lines.append(f"    {const}{vt}* __restrict__ v_{n} = reinterpret_cast<{const}{vt}*>(f_{n});")
    slots = {}
    for f in staged:
        ry, rx = radii[f][1], radii[f][2]
        rects = _halo_cells((ty_cells, tx), (ry, rx // vector), star)
        total = sum(al * bl for _, _, al, _, bl in rects)
        slots[f] = math.ceil(total / threads)
        lines.append(f"    const bool lc_{f} = active || (i1 < n1 + {ry} && i2 < n2 + {rx});")
        for m in range(slots[f]):
            lines += _halo_slot(f, m, threads, rects, _place_3d(f, m, (ry, rx), total, width[f], vector))
    centre = {f: f"(ty + {radii[f][1]}) * {width[f]} + tx + {radii[f][2] // vector}" for f in staged}
    lines += _march_head(lay, slots, unroll, vt, f"make_{vt}({', '.join(['0'] * vector)})", "v", "s0v", "z", centre)
    for k in range(unroll):
        planes: dict[tuple[str, int, int], str] = {}

        def access(f, o, c, k=k, planes=planes):
            if f not in radii:
                return f"v_{f}_{k}.{lanes[c]}"
            if o[0] != 0 or not any(o[1:]):
                return f"q_{f}_{radii[f][0] + o[0] + k}.{lanes[c]}"
            ry, rx = radii[f][1], radii[f][2]
            e = rx + o[2] + c
            key = (f, ry + o[1], e // vector)
            if key not in planes:
                planes[key] = f"t_{f}_{k}_{key[1]}_{key[2]}"
            return f"{planes[key]}.{lanes[e % vector]}"

        values = [f"            const real r{c} = {_expression(sweep, dtype, lambda f, o, c=c: access(f, o, c))};" for c in range(vector)]
        lines.append("        {" if k == 0 else f"        if (z + {k} < z1) {{")
        for (f, row, cx), var in planes.items():
            lines.append(f"            const {vt} {var} = s_{f}[st][{k}][(ty + {row}) * {width[f]} + tx + {cx}];")
        lines += values
        lanes_out = ", ".join(f"r{c}" for c in range(vector))
        lines.append(f"            if (active) v_{sweep.out}[p + col + {k} * s0v] = make_{vt}({lanes_out});")
        lines.append("        }")
    lines += _queue_shift(radii, unroll) + ["    }", "}"]
    block = (tx, ty_cells, 1)
    return Kernel(name, "\n".join(lines) + "\n", "streaming_vec", tile, block, tuple(tile), _sweep_args(sweep, False), vector=vector)


_CP_ASYNC = """#ifndef SF_CP_ASYNC
#define SF_CP_ASYNC
// one cell global -> shared without a register (sm_80+); .ca because .cg takes 16-byte copies only
static __device__ __forceinline__ void sf_cp_async(unsigned dst, const real* src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" :: "r"(dst), "l"(src), "n"(sizeof(real)) : "memory");
}
#endif
"""


def _mod_add(var: str, c: int, n: int) -> str:
    """(var + c) mod n for var in [0, n), without a division."""
    c %= n
    return var if c == 0 else f"({var} < {n - c} ? {var} + {c} : {var} - {n - c})"


def _pipeline_depth(stage_bytes: int, smem, blocks: int, planes: int) -> int:
    """Planes a block copies ahead: its share of IN_FLIGHT, within its share of the SM's shared memory."""
    ahead = min(MAX_AHEAD, planes, max(2, math.ceil(IN_FLIGHT / blocks / stage_bytes)))
    share = min(SMEM_LIMIT, SM_SMEM // blocks - 1024)
    while ahead > 2 and smem(ahead) > share:
        ahead -= 1
    while ahead > 1 and smem(ahead) > SMEM_LIMIT:
        ahead -= 1
    return ahead


# One kernel's source emitted top to bottom, a branch per optional part; split, its order would be harder to follow
def pipelined_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str, ahead: int | None = None) -> Kernel:  # noqa: C901
    """2.5D march like `streaming`, but planes reach shared memory through a ring of cp.async stages.

    `streaming` stages the next plane group through registers and then waits
    for it, so a block has one group in flight and occupancy trades against
    prefetch depth. Here each plane
    (box with in-plane halo of every stencil field, tile of every pointwise
    field) is copied with `cp.async` straight into a ring slot `ahead` planes
    before it is consumed, so ahead x plane bytes per block stay in flight
    through barriers and arithmetic and cost no registers (default depth: the
    block's share of IN_FLIGHT within its share of shared memory). The column
    comes from a register queue filled from the ring, as in `streaming`.
    On the H100 it wins only 2D float32 single-field stencils that read their
    centre cell (benchmarks/results/h100-strategies-2d-16384-42f63af.json);
    in 3D it is no faster than `streaming`.

    Ring plane m (0 <= m < L = planes + 2R, R the longest column radius) is
    plane z0 - R + m, one commit group, in slot m mod S. Step k: wait_group
    (ahead - 1) completes this thread's copies of plane k; the barrier then
    makes every thread's copies visible and guarantees every thread finished
    step k - 1; only then is plane k + ahead issued. Step k reads plane k (the
    queue's new entry) and plane k - R (in-plane neighbours), so plane j is last
    read in step j + R. With S = ahead + R + 1 the slot written in step k held
    plane k - R - 1, last read in step k - 1, before the barrier. Pointwise
    tiles have a ring of ahead + 1 slots indexed by output plane, and each
    thread copies and reads only its own cell.
    """
    lay = _march(sweep, tile)
    nd, chunk, plane_tile, radii, staged, points, star, threads, boxes = (
        lay.nd, lay.chunk, lay.plane_tile, lay.radii, lay.staged, lay.points, lay.star, lay.threads, lay.boxes
    )
    itemsize = np.dtype(dtype).itemsize
    cells = {f: math.prod(boxes[f]) for f in staged}
    lag = lay.column_radius
    blocks = max(1, (RESIDENT_THREADS or _resident_threads(nd, lag)) // threads)  # an estimate: ptxas picks registers

    def smem(a: int) -> int:
        return ((a + lag + 1) * sum(cells.values()) + (a + 1) * threads * len(points)) * itemsize

    if ahead is None:
        stage = (sum(cells.values()) + threads * len(points)) * itemsize
        ahead = _pipeline_depth(stage, smem, blocks, chunk + 2 * lag)
    if ahead < 1:
        raise StencilforgeError(f"strategy pipelined needs at least 1 plane in flight, got {ahead}")
    _check_smem(smem(ahead), "pipelined", tile)
    ring, pring = ahead + lag + 1, ahead + 1
    offset, at = {}, 0
    for f in staged:
        offset[f], at = at, at + ring * cells[f]
    for f in points:
        offset[f], at = at, at + pring * threads
    inplane = {t.field for t in sweep.terms if t.field in radii for o, _ in t.stencil.entries if o[0] == 0 and any(o[1:])}
    first = {f: lag - radii[f][0] for f in staged}  # a shorter column skips the first and last `first` ring planes
    # steps per loop trip, i.e. per shift of the queues (2r moves): two amortise a short column; a long one
    # needs the registers. No minimum of blocks in __launch_bounds__: ptxas then rematerialised the
    # addresses every step (50-90% more instructions per plane for heat3d and wave3d at equal registers).
    unroll = min(UNROLL if 1 < lag <= 4 else 2, chunk)
    lines = [
        *_CP_ASYNC.splitlines(),
        f'extern "C" __global__ void __launch_bounds__({threads}) {name}({_params(sweep, False)})',
        "{",
        f"    // {ring} plane slots per stencil field, {ahead} planes in flight ahead of the one consumed",
        "    extern __shared__ real sf_smem[];",
    ]
    setup, slots = _march_setup(nd, plane_tile, radii, boxes, star)
    lines += setup
    lines += [
        f"    const int z0 = blockIdx.{'z' if nd == 3 else 'y'} * {chunk};",
        f"    const int L = min({chunk}, n0 - z0) + {2 * lag};  // ring plane m is plane z0 - {lag} + m",
        f"    const long long p0 = ((long long)z0 + g - {lag}) * s0;",
        "    const unsigned sm = (unsigned)__cvta_generic_to_shared(sf_smem);",
    ]

    def plane(m: int) -> str:
        return f"p0 + {m} * s0" if m else "p0"

    # source pointers walk one plane per copy issued, from each field's first ring plane
    for f in staged:
        lines.append(f"    const bool lc_{f} = active || edge_{f};")
        lines.append(f"    const int c_{f} = {_in_box(radii[f][1:], boxes[f], (0,) * nd)};")
        lines.append(f"    const real* src_{f} = f_{f} + col + {plane(first[f])};")
        lines += [f"    const real* src_{f}_{j} = f_{f} + goff_{f}_{j} + {plane(first[f])};" for j in range(slots[f])]
        lines.append(f"    real {', '.join(f'q_{f}_{j} = 0' for j in range(2 * radii[f][0] + unroll))};")
    lines += [f"    const real* src_{f} = f_{f} + col + {plane(lag)};" for f in points]  # ring plane 2R: output plane z0

    def base(f: str, slot: str | int, size: int, plus: str = "") -> str:
        """Element offset of a ring slot of field f (slot a number or a variable), plus an index in it."""
        if isinstance(slot, int):
            terms = [str(offset[f] + slot * size)] if offset[f] + slot * size else []
        else:
            terms = ([str(offset[f])] if offset[f] else []) + [f"{slot} * {size}"]
        return " + ".join(terms + ([plus] if plus else [])) or "0"

    def issue(m: str, known: int | None, ind: str) -> None:
        """Copies of ring plane m (the number `known`, or a run-time value whose slots are sw, pw) and the commit."""
        body, walk = [], []
        for f in staged:
            if known is not None and known < first[f]:
                continue
            at = f"({base(f, 'sw', cells[f])}) * {itemsize}" if known is None else (offset[f] + known % ring * cells[f]) * itemsize
            copies = [
                f"const unsigned d_{f} = sm + {at};" if at else f"const unsigned d_{f} = sm;",
                f"if (lc_{f}) sf_cp_async(d_{f} + c_{f} * {itemsize}, src_{f});",
                *(f"if (load_{f}_{j}) sf_cp_async(d_{f} + sidx_{f}_{j} * {itemsize}, src_{f}_{j});" for j in range(slots[f])),
            ]
            if first[f] and (known is None or known + first[f] > 2 * lag):
                body += [f"if ({m} < L - {first[f]}) {{", *("    " + c for c in copies), "}"]
            else:
                body += copies
            walk += [f"src_{f} += s0;", *(f"src_{f}_{j} += s0;" for j in range(slots[f]))]
        if points and (known is None or known >= 2 * lag):  # ring plane m carries output plane m - 2R
            slot = "pw" if known is None else (known - 2 * lag) % pring
            body.append("if (active) {")
            body += [f"    sf_cp_async(sm + ({base(f, slot, threads, 'tid')}) * {itemsize}, src_{f});" for f in points]
            body.append("}")
            walk += [f"src_{f} += s0;" for f in points]
        lines.append(f"{ind}if ({m} < L) {{" if known is None or known > 2 * lag else f"{ind}{{")  # L > 2R
        if known is None:
            lines.append(f"{ind}    const int sw = {_mod_add('s', ahead, ring)};")
            if points:
                lines.append(f"{ind}    const int pw = {_mod_add('pr', ahead, pring)};")
        lines.extend(f"{ind}    {b}" for b in body)
        lines.append(f"{ind}}}")
        lines.append(f'{ind}asm volatile("cp.async.commit_group;" ::: "memory");')
        if walk:
            lines.append(ind + " ".join(walk))

    def wait(ind: str) -> None:
        """This thread's copies of the plane about to be consumed are done; after the barrier, everyone's are,
        and every thread has finished the previous step, so the slot written next is free."""
        lines.append(f'{ind}asm volatile("cp.async.wait_group {ahead - 1};" ::: "memory");')
        lines.append(f"{ind}__syncthreads();")

    for m in range(ahead):
        issue(str(m), m, "    ")
    for k in range(2 * lag):  # fill the column queues: ring plane k goes to entry k - 2R + 2r
        wait("    ")
        issue(str(k + ahead), k + ahead, "    ")
        reads = [
            f"q_{f}_{k - 2 * lag + 2 * radii[f][0]} = sf_smem[{base(f, (k - lag + radii[f][0]) % ring, cells[f], f'c_{f}')}];"
            for f in staged
            if k >= 2 * (lag - radii[f][0])
        ]
        if reads:
            lines += ["    if (active) {", *("        " + r for r in reads), "    }"]
    lines.append(f"    real* out = f_{sweep.out} + col + {plane(lag)};")
    lines.append(f"    int k = {2 * lag}, s = {2 * lag % ring}{', pr = 0' if points else ''};")

    def consume(u: int, ind: str) -> None:
        """Step k + u: wait, issue k + u + ahead, then the output plane from queue entries u.. and slot k + u - R."""
        wait(ind)
        issue(f"k + {u + ahead}", None, ind)
        lines.append(f"{ind}if (active) {{")
        for f in staged:
            rz = radii[f][0]
            lines.append(f"{ind}    q_{f}_{2 * rz + u} = sf_smem[{base(f, _mod_add('s', ring - lag + rz, ring), cells[f], f'c_{f}')}];")
            if f in inplane:
                lines.append(f"{ind}    const int nb_{f} = {base(f, _mod_add('s', ring - lag, ring), cells[f])};")

        def access(f, o):
            if f in radii:
                if o[0] != 0 or not any(o[1:]):
                    return f"q_{f}_{radii[f][0] + o[0] + u}"
                return f"sf_smem[nb_{f} + {_in_box(radii[f][1:], boxes[f], o)}]"
            return f"sf_smem[{base(f, 'pr', threads, 'tid')}]"

        lines.append(f"{ind}    *out = {_expression(sweep, dtype, access)};")
        lines.append(f"{ind}}}")
        lines.append(f"{ind}out += s0;")
        lines.append(f"{ind}s = s == {ring - 1} ? 0 : s + 1;")
        if points:
            lines.append(f"{ind}pr = pr == {pring - 1} ? 0 : pr + 1;")

    # `unroll` steps per trip (one shift of the queues), then the remaining steps one at a time
    lines.append(f"    for (; k + {unroll} <= L; k += {unroll}) {{")
    for u in range(unroll):
        consume(u, "        ")
    lines += _queue_shift(radii, unroll)
    lines.append("    }")
    if unroll > 1:
        lines.append("    for (; k < L; ++k) {")
        consume(0, "        ")
        lines += _queue_shift(radii, 1)
        lines.append("    }")
    return _march_kernel(name, lines, "pipelined", sweep, tile, smem(ahead))


def streaming_cached_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """2.5D without shared memory: the column in a register queue, in-plane neighbours read through L1.

    No barriers, so warps never wait for each other and the loads of UNROLL
    planes stay in flight; the in-plane neighbours of a tile were just loaded by
    adjacent warps and hit L1/L2. Measured against `streaming` in
    docs/performance.md. Same tile convention as `streaming`.
    """
    lay = _march(sweep, tile)
    nd, chunk, plane_tile, radii = lay.nd, lay.chunk, lay.plane_tile, lay.radii
    staged, points, threads = lay.staged, lay.points, lay.threads
    unroll = lay.unroll
    min_blocks = max(1, 1024 // threads)  # at least 1024 resident threads: caps registers at 64
    lines = [
        f'extern "C" __global__ void __launch_bounds__({threads}, {min_blocks}) {name}({_params(sweep, False)})',
        "{",
    ]
    if nd == 3:
        ty, tx = plane_tile
        lines += [
            f"    const int i2 = blockIdx.x * {tx} + threadIdx.x, i1 = blockIdx.y * {ty} + threadIdx.y;",
            "    if (i1 >= n1 || i2 >= n2) return;",
            *("    " + s for s in _strides(3)),
            "    const long long col = ((long long)i1 + g) * s1 + (i2 + g);",
        ]
    else:
        (tx,) = plane_tile
        lines += [
            f"    const int i1 = blockIdx.x * {tx} + threadIdx.x;",
            "    if (i1 >= n1) return;",
            *("    " + s for s in _strides(2)),
            "    const long long col = i1 + g;",
        ]
    chunk_axis = "z" if nd == 3 else "y"
    lines += [
        f"    const int z0 = blockIdx.{chunk_axis} * {chunk};",
        f"    const int z1 = min(z0 + {chunk}, n0);",
        "    long long p = ((long long)z0 + g) * s0;",
    ]
    for f in staged:
        rz = radii[f][0]
        lines.append(f"    real {', '.join(f'q_{f}_{j} = 0' for j in range(2 * rz + unroll))};")
        for j in range(2 * rz):
            lines.append(f"    q_{f}_{j} = f_{f}[p + col + {j - rz} * s0];")
    for f in points:
        lines.append(f"    real {', '.join(f'v_{f}_{k} = 0' for k in range(unroll))};")
    lines.append(f"    for (int z = z0; z < z1; z += {unroll}, p += {unroll} * s0) {{")
    for k in range(unroll):
        lines.append("        {" if k == 0 else f"        if (z + {k} < z1) {{")
        for f in staged:
            rz = radii[f][0]
            lines.append(f"            q_{f}_{2 * rz + k} = f_{f}[p + col + {rz + k} * s0];")
        for f in points:
            lines.append(f"            v_{f}_{k} = f_{f}[p + col + {k} * s0];")
        lines.append("        }")
    lines += _march_outputs(sweep, dtype, radii, unroll, None, lambda f, o, k: f"f_{f}[{_at(f'p + col + {k} * s0', o)}]")
    return _march_kernel(name, lines, "streaming_l1", sweep, tile)


def reduce_sweep(sweep: Sweep, dtype, name: str) -> Kernel:
    """sum over the interior of (sweep rhs)^2 in double, one partial sum per block (deterministic)."""
    nd = sweep.ndim
    expr = _expression(sweep, dtype, lambda f, o: f"f_{f}[{_at('c', o)}]")
    last = nd - 1
    lines = [
        f'extern "C" __global__ void __launch_bounds__({REDUCE_THREADS}) {name}({_params(sweep, True)})',
        "{",
        f"    __shared__ double warp_sum[{REDUCE_THREADS // 32}];",
        *("    " + s for s in _strides(nd)),
        "    double acc = 0.0;",
    ]
    rows = " * ".join(f"(long long)n{a}" for a in range(last))
    lines.append(f"    for (long long row = blockIdx.x; row < {rows}; row += gridDim.x) {{")
    if nd == 3:
        lines.append("        const int i0 = (int)(row / n1), i1 = (int)(row - (long long)i0 * n1);")
    else:
        lines.append("        const int i0 = (int)row;")
    lines.append(f"        for (int i{last} = threadIdx.x; i{last} < n{last}; i{last} += {REDUCE_THREADS}) {{")
    lines.append("            " + _centre(nd))
    lines.append(f"            const real v = {expr};")
    lines.append("            acc += (double)v * (double)v;")
    lines.append("        }")
    lines.append("    }")
    lines += [
        "    for (int d = 16; d > 0; d >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, d);",
        "    if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = acc;",
        "    __syncthreads();",
        "    if (threadIdx.x < 32) {",
        f"        acc = threadIdx.x < {REDUCE_THREADS // 32} ? warp_sum[threadIdx.x] : 0.0;",
        "        for (int d = 16; d > 0; d >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, d);",
        "        if (threadIdx.x == 0) partial[blockIdx.x] = acc;",
        "    }",
        "}",
    ]
    return Kernel(name, "\n".join(lines) + "\n", "reduce", (), (REDUCE_THREADS, 1, 1), (), _sweep_args(sweep, True))


# ---------------------------------------------------------------- axis operators


def _check_operator(op: AxisOperator) -> None:
    if op.ndim != 2:
        raise StencilforgeError("the cuda backend implements axis operators for 2D arrays only")
    if op.axis not in (0, 1):
        raise StencilforgeError(f"axis must be 0 or 1, got {op.axis}")
    for d in op.outputs:
        if len(d.left) < d.radius or len(d.right) < d.radius:
            raise StencilforgeError(f"derivative {d.out!r} needs at least {d.radius} closure rows at each end")
    _check_names([op.inp] + [d.out for d in op.outputs])


def _weighted(weights, dtype, access) -> str:
    return " + ".join(f"{literal(w, dtype)} * {access(o)}" for o, w in weights)


def _closure_chain(d: Derivative1D, pos: str, n: str, dtype, glob, fast: str, indent: str, out: str) -> list[str]:
    """if/else chain over closure rows (read from global memory), the interior row last."""
    scale = literal(d.scale, dtype)
    lines = []
    kw = "if"
    for k, row in enumerate(d.left):
        lines.append(f"{indent}{kw} ({pos} == {k}) {out} = ({_weighted(row, dtype, glob)}) * {scale};")
        kw = "else if"
    for k, row in enumerate(d.right):
        lines.append(
            f"{indent}{kw} ({pos} == {n} - {k + 1}) {out} = ({_weighted(row, dtype, glob)}) * {scale};"
        )
        kw = "else if"
    lines.append(f"{indent}else {out} = ({fast}) * {scale};")
    return lines


def _op_params(op: AxisOperator) -> str:
    ps = [f"const real* __restrict__ f_{op.inp}"] + [f"real* __restrict__ f_{d.out}" for d in op.outputs]
    return ", ".join(ps + ["const int n0", "const int n1"])


def _op_args(op: AxisOperator) -> tuple[str, ...]:
    return (op.inp,) + tuple(d.out for d in op.outputs)


def naive_operator(op: AxisOperator, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    _check_operator(op)
    lines = [
        f'extern "C" __global__ void __launch_bounds__({math.prod(tile)}) {name}({_op_params(op)})',
        "{",
        f"    const int i1 = blockIdx.x * {tile[1]} + threadIdx.x;",
        f"    const int i0 = blockIdx.y * {tile[0]} + threadIdx.y;",
        "    if (i0 >= n0 || i1 >= n1) return;",
        "    const long long c = (long long)i0 * n1 + i1;",
    ]
    lines += _cell_outputs(op, dtype) + ["}"]
    return Kernel(name, "\n".join(lines) + "\n", "naive", tile, _block(tile), tile, _op_args(op))


def _cell_outputs(op: AxisOperator, dtype) -> list[str]:
    """Each output at cell (i0, i1), linear index c, stored as soon as computed (one thread per cell)."""
    u = f"f_{op.inp}"
    pos, n = ("i1", "n1") if op.axis == 1 else ("i0", "n0")
    step = "" if op.axis == 1 else " * n1"

    def glob(o):
        return f"{u}[c + ({o}){step}]"

    lines = []
    for m, d in enumerate(op.outputs):
        lines.append(f"    real o{m};")
        lines += _closure_chain(d, pos, n, dtype, glob, _weighted(d.interior, dtype, glob), "    ", f"o{m}")
        lines.append(f"    f_{d.out}[c] = o{m};")
    return lines


FLAT_CELLS = 2**31  # `flat` indexes cells in 32 bits and corrects a quotient by one step; beyond, rows runs


def flat_operator(op: AxisOperator, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """One thread per cell over the array flattened, in blocks of tile[0] threads, the naive peer's
    launch with run-time shapes: the row index is c * (1 / n1) in double, truncated and corrected by
    one, in place of an integer division by n1 (measured against the division, rows and the peer in
    benchmarks/results/h100-derivatives-flat.txt). Kernel.fits keeps it below FLAT_CELLS."""
    _check_operator(op)
    lines = [
        f'extern "C" __global__ void __launch_bounds__({tile[0]}) {name}({_op_params(op)}, const double inv_n1)',
        "{",
        f"    const unsigned cu = blockIdx.x * {tile[0]}u + threadIdx.x;",
        "    if (cu >= (unsigned)n0 * (unsigned)n1) return;",
        "    unsigned q = (unsigned)((double)cu * inv_n1);",
        "    if (q * (unsigned)n1 > cu) q -= 1; else if ((q + 1) * (unsigned)n1 <= cu) q += 1;",
        "    const int i0 = q, i1 = cu - q * (unsigned)n1;",
        "    const long long c = cu;",
    ]
    lines += _cell_outputs(op, dtype) + ["}"]
    return Kernel(name, "\n".join(lines) + "\n", "flat", tile, (tile[0], 1, 1), tile, _op_args(op), flat=True)


def rows_operator(op: AxisOperator, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """tile = (R, X): a block of X threads along x, each writing its column in R consecutive rows,
    all values computed before the first store so the loads of every row are in flight together."""
    _check_operator(op)
    u = f"f_{op.inp}"
    rows, tx = tile
    step = "" if op.axis == 1 else " * n1"
    lines = [
        f'extern "C" __global__ void __launch_bounds__({tx}) {name}({_op_params(op)})',
        "{",
        f"    const int i1 = blockIdx.x * {tx} + threadIdx.x;",
        "    if (i1 >= n1) return;",
        f"    const int row = blockIdx.y * {rows};",
    ]
    for k in range(rows):
        pos = "i1" if op.axis == 1 else f"y{k}"
        lines += [
            f"    const int y{k} = row + {k};",
            f"    const long long c{k} = (long long)y{k} * n1 + i1;",
            f"    real {', '.join(f'o{m}_{k}' for m in range(len(op.outputs)))};",
            f"    if (y{k} < n0) {{",
        ]
        for m, d in enumerate(op.outputs):

            def glob(o, k=k):
                return f"{u}[c{k} + ({o}){step}]"

            n = "n1" if op.axis == 1 else "n0"
            lines += _closure_chain(d, pos, n, dtype, glob, _weighted(d.interior, dtype, glob), "        ", f"o{m}_{k}")
        lines.append("    }")
    for k in range(rows):
        stores = " ".join(f"f_{d.out}[c{k}] = o{m}_{k};" for m, d in enumerate(op.outputs))
        lines.append(f"    if (y{k} < n0) {{ {stores} }}")
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "rows", tile, (tx, 1, 1), tile, _op_args(op))


def rows_vector_operator(op: AxisOperator, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """`rows` along x with 4 floats or 2 doubles per thread: interior cells read their neighbours as a few
    aligned vectors and store one vector per output; cells in reach of a closure take the scalar chain.
    The launcher runs it only where the row length is a multiple of the width and the pointers aligned.
    Half the memory instructions of `rows`: one derivative along x in float64 went from 93% of the
    copy bandwidth to 99% on the H100 (the fused pair, two stores per read, did not gain)."""
    _check_operator(op)
    if op.axis != 1:
        raise StencilforgeError("strategy rows_vec applies to derivatives along x (axis 1)")
    vt, vector = next((t, w) for (c, w), t in _VECTOR_TYPES.items() if c == ctype(dtype))  # the widest
    rows, tx = tile
    u = f"f_{op.inp}"
    left = max(len(d.left) for d in op.outputs)
    right = max(len(d.right) for d in op.outputs)
    lines = [
        f'extern "C" __global__ void __launch_bounds__({tx}) {name}({_op_params(op)})',
        "{",
        f"    const int i1 = (blockIdx.x * {tx} + threadIdx.x) * {vector};",
        "    if (i1 >= n1) return;",
        f"    const int row = blockIdx.y * {rows};",
        f"    const bool inner = i1 >= {left} && i1 + {vector - 1} < n1 - {right};",
        f"    const {vt}* __restrict__ v_{op.inp} = reinterpret_cast<const {vt}*>({u});",
    ]
    lines += [f"    {vt}* __restrict__ v_{d.out} = reinterpret_cast<{vt}*>(f_{d.out});" for d in op.outputs]
    for k in range(rows):
        outs = [f"o{m}_{k}_{j}" for m in range(len(op.outputs)) for j in range(vector)]
        lines += [
            f"    const int y{k} = row + {k};",
            f"    const long long c{k} = (long long)y{k} * n1 + i1;",
            f"    real {', '.join(outs)};",
            f"    if (y{k} < n0) {{",
            "        if (inner) {",
        ]
        chunks: dict[int, str] = {}
        values = []
        for m, d in enumerate(op.outputs):
            for j in range(vector):

                def lane(o, j=j, k=k, chunks=chunks):
                    e = j + o
                    chunks.setdefault(e // vector, f"t{k}_{'m' if e < 0 else 'p'}{abs(e // vector)}")
                    return f"{chunks[e // vector]}.{_LANES[e % vector]}"

                values.append(f"            o{m}_{k}_{j} = ({_weighted(d.interior, dtype, lane)}) * {literal(d.scale, dtype)};")
        for a, var in sorted(chunks.items()):
            lines.append(f"            const {vt} {var} = v_{op.inp}[c{k} / {vector} + {a}];")
        lines += values
        lines.append("        } else {")
        for m, d in enumerate(op.outputs):
            for j in range(vector):

                def glob(o, j=j, k=k):
                    return f"{u}[c{k} + {j} + ({o})]"

                fast = _weighted(d.interior, dtype, glob)
                lines += _closure_chain(d, f"i1 + {j}", "n1", dtype, glob, fast, "            ", f"o{m}_{k}_{j}")
        lines += ["        }", "    }"]
    for k in range(rows):
        stores = " ".join(
            f"v_{d.out}[c{k} / {vector}] = make_{vt}({', '.join(f'o{m}_{k}_{j}' for j in range(vector))});"
            for m, d in enumerate(op.outputs)
        )
        lines.append(f"    if (y{k} < n0) {{ {stores} }}")
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "rows_vec", tile, (tx, 1, 1), (rows, tx * vector), _op_args(op), vector=vector)


def pencil_operator(op: AxisOperator, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """Fused one-pass operator; tile = (rows, tx) along x, (chunk, tx) along y.

    Each thread handles several cells whose loads are issued together (rows of
    the x pencil, UNROLL rows of the y march), so enough bytes are in flight to
    reach the bandwidth with float64 and one read per cell.
    """
    _check_operator(op)
    u = f"f_{op.inp}"
    r = max(d.radius for d in op.outputs)
    rows_or_chunk, tx = tile
    lines = [f'extern "C" __global__ void __launch_bounds__({tx}) {name}({_op_params(op)})', "{"]
    if op.axis == 1:
        rows = rows_or_chunk
        if tx < 2 * r:
            raise StencilforgeError(f"strategy pencil needs at least {2 * r} threads along x, got tile {tuple(tile)}")
        width = tx + 2 * r
        smem = rows * width * np.dtype(dtype).itemsize
        if smem > STATIC_SMEM_LIMIT:
            raise StencilforgeError(f"strategy pencil with tile {tuple(tile)} needs {smem} bytes of shared memory; choose a smaller tile")
        lines += [
            f"    __shared__ real s_u[{rows}][{width}];",
            "    const int tx = threadIdx.x;",
            f"    const int b1 = blockIdx.x * {tx}, b0 = blockIdx.y * {rows};",
            "    const int i1 = b1 + tx;",
            f"    const int h1 = tx < {r} ? b1 - {r} + tx : b1 + {tx} + tx - {r};",
            f"    const int hs = tx < {r} ? tx : {tx} + tx;",
            f"    const bool halo = tx < {2 * r} && h1 >= 0 && h1 < n1;",
        ]
        for a in range(rows):
            lines.append(f"    if (b0 + {a} < n0) {{")
            lines.append(f"        const long long row = (long long)(b0 + {a}) * n1;")
            lines.append(f"        if (i1 < n1) s_u[{a}][tx + {r}] = {u}[row + i1];")
            lines.append(f"        if (halo) s_u[{a}][hs] = {u}[row + h1];")
            lines.append("    }")
        lines += ["    __syncthreads();", "    if (i1 >= n1) return;"]

        def glob(o):
            return f"{u}[c + ({o})]"

        for a in range(rows):
            lines.append(f"    if (b0 + {a} < n0) {{")
            lines.append(f"        const long long c = (long long)(b0 + {a}) * n1 + i1;")
            for m, d in enumerate(op.outputs):
                fast = _weighted(d.interior, dtype, lambda o, a=a: f"s_u[{a}][tx + {r + o}]")
                lines.append(f"        real o{m};")
                lines += _closure_chain(d, "i1", "n1", dtype, glob, fast, "        ", f"o{m}")
                lines.append(f"        f_{d.out}[c] = o{m};")
            lines.append("    }")
        lines.append("}")
        cover, block = (rows, tx), (tx, 1, 1)
    else:
        chunk = rows_or_chunk
        unroll = min(UNROLL, chunk)
        lines += [
            f"    const int i1 = blockIdx.x * {tx} + threadIdx.x;",
            "    if (i1 >= n1) return;",
            f"    const int y0 = blockIdx.y * {chunk};",
            f"    const int y1 = min(y0 + {chunk}, n0);",
            f"    real {', '.join(f'q{j} = 0' for j in range(2 * r + unroll))};",
        ]
        for j in range(2 * r):
            lines.append(f"    {{ const int y = y0 + {j - r}; q{j} = (y >= 0 && y < n0) ? {u}[(long long)y * n1 + i1] : (real)0; }}")
        lines.append(f"    for (int y = y0; y < y1; y += {unroll}) {{")
        for k in range(unroll):
            lines.append(f"        q{2 * r + k} = (y + {r + k} < n0) ? {u}[(long long)(y + {r + k}) * n1 + i1] : (real)0;")

        def glob(o):
            return f"{u}[c + ({o}) * (long long)n1]"

        for k in range(unroll):
            lines.append("        {" if k == 0 else f"        if (y + {k} < y1) {{")
            lines.append(f"            const int yk = y + {k};")
            lines.append("            const long long c = (long long)yk * n1 + i1;")
            for m, d in enumerate(op.outputs):
                fast = _weighted(d.interior, dtype, lambda o, k=k: f"q{r + o + k}")
                lines.append(f"            real o{m};")
                lines += _closure_chain(d, "yk", "n0", dtype, glob, fast, "            ", f"o{m}")
                lines.append(f"            f_{d.out}[c] = o{m};")
            lines.append("        }")
        for j in range(2 * r):
            lines.append(f"        q{j} = q{j + unroll};")
        lines += ["    }", "}"]
        cover, block = (chunk, tx), (tx, 1, 1)
    return Kernel(name, "\n".join(lines) + "\n", "pencil", tile, block, cover, _op_args(op))


# ---------------------------------------------------------------- entry points


def default_tile(plan: Sweep | AxisOperator, strategy: str, dtype="float32") -> tuple[int, ...]:
    """Tile shapes (C order) that fill a block with 256-512 threads and keep x contiguous."""
    if isinstance(plan, AxisOperator):
        if strategy == "naive":
            return (8, 32)
        if strategy == "flat":  # H100, fused d1+d2 along x, float64: 128 threads 97.3% of copy, 256 97.0%
            return (128,)
        if strategy == "rows":  # H100, fused d1+d2 along x: 1x128 96.8% of copy, 4x256 92.0%; single: 93.1% / 93.8%
            return (1, 128)
        if strategy == "rows_vec":  # H100, d1 along x, float64: 1x256 99.1% of copy, 1x128 98.9%; fused d1+d2 96.4% (rows 96.7%)
            return (1, 256)
        return (4, 256) if plan.axis == 1 else (64, 128)
    nd = plan.ndim
    if strategy == "naive":
        return (8, 32) if nd == 2 else (2, 4, 32)
    if strategy == "tiled":
        return (16, 32) if nd == 2 else (4, 8, 32)
    if strategy == "rows":  # H100: poisson2d 4x512 96.3-96.9% of copy (99% before the pinned arithmetic); heat3d 1x4x256 77.5%
        return (4, 512) if nd == 2 else (1, 4, 256)
    if nd == 2:  # H100 and H200: pipelined gains on rows of 512, streaming does not (docs/performance.md)
        return (64, 512) if strategy == "pipelined" else (64, 256)
    if strategy == "streaming":  # 2 x 256 planes for short halos; long ones: 256 planes of 32 x 32 (H100, commit 824fd67)
        return (64, 2, 256) if plan.radius <= 2 else (256, 32, 32)
    if strategy == "streaming_vec":
        # Chunks of 64 planes, not 256 (benchmarks/results/h100-wave3d-streaming-vec-chunks-and-narrow.json).
        # In float32, r > 4 takes 8 x 32 cells (h100-wave3d-vec-tiles-{512,1024}-9092a3d.json); r4 keeps 4 x 128,
        # where 8 x 32 spills under the launch bounds; float64 takes 16 x 64 (measured at commit d507bb0).
        if np.dtype(dtype).itemsize == 8:
            return (64, 16, 64)
        return (64, 8, 32) if plan.radius > 4 else (64, 4, 128)
    if strategy == "pipelined":  # no other tile measured clearly faster on the H100 (commit 46ef0f7)
        return (64, 4, 128) if plan.radius <= 2 else (64, 16, 32)
    return (32, 8, 64)


def _check_tile(tile, expected: int, strategy: str, threads: Callable[[tuple[int, ...]], int]) -> tuple[int, ...]:
    try:
        tile = tuple(int(t) for t in tile)
    except (TypeError, ValueError):
        raise StencilforgeError(f"tile must be a sequence of integers, got {tile!r}") from None
    if len(tile) != expected or any(t < 1 for t in tile):
        raise StencilforgeError(f"strategy {strategy} needs a tile of {expected} positive integers, got {tile}")
    if threads(tile) > MAX_THREADS:
        raise StencilforgeError(f"tile {tile} gives {threads(tile)} threads per block; the limit is {MAX_THREADS}")
    return tile


def sweep_kernel(sweep: Sweep, strategy: str, dtype, tile=None) -> Kernel:
    """The kernel writing `sweep.out` over the interior with one strategy."""
    _check_names(set(sweep.inputs) | {sweep.out})
    if strategy not in SWEEP_STRATEGIES:
        raise StencilforgeError(f"strategy {strategy!r} does not apply to a stencil sweep: choose one of {', '.join(SWEEP_STRATEGIES)}")
    if sweep.ndim not in (2, 3):
        raise StencilforgeError(f"the cuda backend supports 2D and 3D sweeps, not {sweep.ndim}D")
    tile = default_tile(sweep, strategy, dtype) if tile is None else tile
    name = f"sf_{strategy}_{sweep.out}"
    if strategy in ("streaming", "streaming_vec", "streaming_l1", "pipelined"):
        cells = max(1, vector_width(sweep, dtype)) if strategy == "streaming_vec" else 1
        tile = _check_tile(tile, sweep.ndim, strategy, lambda t: math.prod(t[1:]) // cells)
        build = {
            "streaming": streaming_sweep,
            "streaming_vec": streaming_vector_sweep,
            "streaming_l1": streaming_cached_sweep,
            "pipelined": pipelined_sweep,
        }[strategy]
        return build(sweep, dtype, tile, name)
    if strategy == "rows":
        return rows_sweep(sweep, dtype, _check_tile(tile, sweep.ndim, strategy, lambda t: t[-1]), name)
    tile = _check_tile(tile, sweep.ndim, strategy, math.prod)
    if strategy == "naive":
        return naive_sweep(sweep, dtype, tile, name)
    return tiled_sweep(sweep, dtype, tile, name)


def operator_kernel(op: AxisOperator, strategy: str, dtype, tile=None) -> Kernel:
    if strategy not in OPERATOR_STRATEGIES:
        raise StencilforgeError(
            f"strategy {strategy!r} does not apply to a derivative operator: choose one of {', '.join(OPERATOR_STRATEGIES)}"
        )
    tile = default_tile(op, strategy) if tile is None else tile
    name = f"sf_{strategy}_axis{op.axis}_" + "_".join(d.out for d in op.outputs)
    if strategy == "naive":
        return naive_operator(op, dtype, _check_tile(tile, 2, strategy, math.prod), name)
    if strategy == "flat":
        return flat_operator(op, dtype, _check_tile(tile, 1, strategy, math.prod), name)
    if strategy == "rows":
        return rows_operator(op, dtype, _check_tile(tile, 2, strategy, lambda t: t[1]), name)
    if strategy == "rows_vec":
        return rows_vector_operator(op, dtype, _check_tile(tile, 2, strategy, lambda t: t[1]), name)
    return pencil_operator(op, dtype, _check_tile(tile, 2, strategy, lambda t: t[1]), name)


def residual_kernel(sweep: Sweep, dtype) -> Kernel:
    _check_names(sweep.inputs)
    return reduce_sweep(sweep, dtype, f"sf_sumsq_{sweep.out}")
