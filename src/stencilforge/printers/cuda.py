"""CUDA C for one pass: one thread per interior cell, x along threadIdx.x for coalesced rows.

Literals are exact hexadecimal floats in the dtype and the kernel is compiled
without contracting multiplies and adds into FMAs, so a cell's operations are
the ones the numpy oracle performs. Constants and t are kernel arguments:
changing a parameter's value launches the same machine code. A field stored in
float16 is passed as 16-bit words, widened on load and rounded to nearest on
store by the PTX conversions (`HALF`), as numpy's casts do.
"""

from __future__ import annotations

from itertools import product
from typing import Mapping

import numpy as np

from ..ir.analysis import Pass, accesses, slot_name
from ..ir.nodes import Access, Constant, Coordinate, Expr, walk
from .source import InfixPrinter

FUNCTIONS = {"sqrt": "sqrt", "exp": "exp", "log": "log", "sin": "sin", "cos": "cos", "tanh": "tanh",
             "abs": "fabs", "min": "fmin", "max": "fmax"}
BLOCK = (128, 2)  # with ROWS, among the fastest shapes measured (benchmarks/results/equations_gray_scott_*.json)
ROWS = {1: 1, 2: 2, 3: 4}  # rows per thread by dimension
OPTIONS = ("--fmad=false",)
HALF = """\
__device__ __forceinline__ float sf_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short sf_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
"""
HALF_WORDS = """\
__device__ __forceinline__ float sf_lo(unsigned int w) { return sf_h2f((unsigned short)(w & 0xffffu)); }
__device__ __forceinline__ float sf_hi(unsigned int w) { return sf_h2f((unsigned short)(w >> 16)); }
__device__ __forceinline__ unsigned int sf_word(const unsigned short* a, long long row, long long q, long long words)
{ return q >= 0 && q < words ? ((const unsigned int*)a)[row + q] : 0u; }
"""


STORED_CTYPE = {"float16": "unsigned short", "float32": "float", "float64": "double"}  # an array's element in C


def _ctype(dtype) -> str:
    return {"float32": "float", "float64": "double"}[np.dtype(dtype).name]


def half_slots(p: Pass) -> frozenset[str]:
    """The pass's arrays whose field is stored in float16."""
    return frozenset(slot_name((a.field.name, a.level)) for eq in p.equations for a in [eq.target, *accesses(eq.expr)]
                     if a.field.half)


class _Printer(InfixPrinter):
    def __init__(self, ndim: int, dtype, half: frozenset[str] = frozenset()):
        self.ndim, self.dtype, self.T = ndim, np.dtype(dtype), _ctype(dtype)
        self.half = half
        self.locals: dict[str, str] = {}
        self.arrays: dict[str, None] = {}

    def literal(self, value: float) -> str:
        text = float(self.dtype.type(value)).hex()
        return f"{text}f" if self.T == "float" else text

    def coordinate(self, node: Coordinate) -> str:
        a = node.axis
        return f"(({self.T})(lo{a} + (double)(i{a} + start{a} + {node.shift}) * h{a}))"

    def access(self, node: Access) -> str:
        slot = slot_name((node.field.name, node.level))
        if not any(node.offset) and slot in self.locals:
            return self.locals[slot]
        self.arrays.setdefault(slot)
        shift = " + ".join(f"({o}) * s{a}" for a, o in enumerate(node.offset) if o)
        load = f"a_{slot}[c{' + ' + shift if shift else ''}]"
        return f"sf_h2f({load})" if slot in self.half else load

    def call(self, fn, args):
        return f"{FUNCTIONS[fn]}({', '.join(args)})"

    def select(self, cond, a, b):
        return f"({cond} ? {a} : {b})"


class _WordPrinter(_Printer):
    """One of the two cells of a thread's 4-byte word p in its row (cell 0: the low half, at padded x = 2p;
    cell 1: the high half): each read takes the half it needs from the word holding it, `r` being the
    row's first word and w{a} the word strides. Word p itself is always in its row; another word outside
    the row reads 0 (only ghost cells, which are not computed, reach there)."""

    def __init__(self, ndim: int, dtype, half: frozenset[str], cell: int):
        super().__init__(ndim, dtype, half)
        self.cell = cell

    def coordinate(self, node: Coordinate) -> str:
        if node.axis != self.ndim - 1:
            return super().coordinate(node)
        return f"(({self.T})(lo{node.axis} + (double)(ix{self.cell} + start{node.axis} + {node.shift}) * h{node.axis}))"

    def access(self, node: Access) -> str:
        slot = slot_name((node.field.name, node.level))
        if not any(node.offset) and slot in self.locals:
            return self.locals[slot]
        self.arrays.setdefault(slot)
        position = node.offset[-1] + self.cell  # from padded x = 2p
        rows = "".join(f" + ({o}) * w{a}" for a, o in enumerate(node.offset[:-1]) if o)
        q = position // 2
        word = f"((const unsigned int*)a_{slot})[r{rows} + p]" if q == 0 else f"sf_word(a_{slot}, r{rows}, p + ({q}), words)"
        return f"sf_{'hi' if position % 2 else 'lo'}({word})"


# The walls' maps in C, one per side (below, above). IMAGE_SHIFTS: from an interior index i, the offset to
# the ghost cell whose image it is; GHOST_IMAGE: from an index j in a ghost layer, its interior image.
# Both are checked against the gather's map (`Simulation._ghost_images`) in tests/test_equations.py.
IMAGE_SHIFTS = {"Periodic": ("{n}", "-{n}"), "Neumann": ("-1 - 2 * {i}", "2 * {n} - 1 - 2 * {i}")}
GHOST_IMAGE = {"Periodic": ("{j} + {n}", "{j} - {n}"), "Neumann": ("-1 - {j}", "2 * {n} - 1 - {j}")}


def image_cases(walls: tuple[str, ...]) -> list[tuple[str, str]]:
    """(condition, offset) in C over i{a}, n{a}, g and the strides s{a}: the ghost cells whose interior image
    the cell i is under `walls` (per axis "Periodic" or "Neumann", a gather's map). Along each axis: the
    cell's own index, the ghost it wraps or mirrors to below (when i < g) or above (when i >= n - g); every
    combination but the cell itself. Each ghost cell has one image, so one cell writes it."""
    per_axis = []
    for a, kind in enumerate(walls):
        below, above = (shift.format(i=f"i{a}", n=f"n{a}") for shift in IMAGE_SHIFTS[kind])
        per_axis.append([None, (a, f"i{a} < g", below), (a, f"i{a} >= n{a} - g", above)])
    cases = []
    for combo in product(*per_axis):
        moved = [m for m in combo if m is not None]
        if moved:
            cases.append((" && ".join(m[1] for m in moved), " + ".join(f"({m[2]}) * s{m[0]}" for m in moved)))
    return cases


def _image_stores(ndim: int, walls: tuple[str, ...], target: str, value: str) -> list[str]:
    near = " || ".join(f"i{a} < g || i{a} >= n{a} - g" for a in range(ndim))
    stores = [f"    if ({cond}) {target}[c + {offset}] = {value};" for cond, offset in image_cases(walls)]
    return [f"if ({near}) {{"] + stores + ["}"]


def _cell_statements(p: Pass, ndim: int, dtype, half: frozenset[str], images: Mapping, Int: str):
    """A thread's statements for its cell c: (without, with the stores into ghost cells), the arrays read."""
    pr = _Printer(ndim, dtype, half)
    body, imaging = [], []
    for k, eq in enumerate(p.equations):
        slot = slot_name((eq.target.field.name, eq.target.level))
        compute = [f"const {pr.T} e{k} = {pr(eq.expr)};"]
        value = local = f"e{k}"
        if slot in half:  # stored rounded to float16; later equations of the pass read the stored value
            compute.append(f"const unsigned short b{k} = sf_f2h(e{k});")
            value, local = f"b{k}", f"sf_h2f(b{k})"
        compute.append(f"a_{slot}[c] = {value};")
        body += compute
        imaging += compute + (_image_stores(ndim, images[slot], f"a_{slot}", value) if slot in images else [])
        pr.locals[slot] = local
    return body, imaging, list(pr.arrays)


def _word_statements(p: Pass, ndim: int, dtype, half: frozenset[str], images: Mapping, Int: str):
    """As `_cell_statements` for the two cells of the thread's word p in row r: both computed, stored as one
    4-byte word where both are interior, else the interior one's 2 bytes."""
    x = ndim - 1
    cells = (_WordPrinter(ndim, dtype, half, 0), _WordPrinter(ndim, dtype, half, 1))
    body, imaging = [], []
    for k, eq in enumerate(p.equations):
        slot = slot_name((eq.target.field.name, eq.target.level))
        compute = [f"const {cells[0].T} e{k}_{j} = {cells[j](eq.expr)};" for j in (0, 1)]
        compute += [f"const unsigned short b{k}_{j} = sf_f2h(e{k}_{j});" for j in (0, 1)]
        compute += [f"if (in0 && in1) ((unsigned int*)a_{slot})[r + p] = (unsigned int)b{k}_0 | ((unsigned int)b{k}_1 << 16);",
                    f"else if (in0) a_{slot}[2 * (r + p)] = b{k}_0;", f"else if (in1) a_{slot}[2 * (r + p) + 1] = b{k}_1;"]
        body += compute
        imaging += compute
        for j in (0, 1) if slot in images else ():
            imaging += [f"if (in{j}) {{", f"    const {Int} i{x} = ix{j}, c = 2 * (r + p) + {j};"]
            imaging += ["    " + line for line in _image_stores(ndim, images[slot], f"a_{slot}", f"b{k}_{j}")] + ["}"]
        for j in (0, 1):
            cells[j].locals[slot] = f"sf_h2f(b{k}_{j})"
    return body, imaging, list(dict.fromkeys([*cells[0].arrays, *cells[1].arrays]))


def _block_spans(ndim: int, along: int, rows: int, vector: int, words: bool, Int: str) -> list[tuple[str, str, int]]:
    """(first, past the last, axis) of the interior cells a block covers along each axis."""
    x = ndim - 1
    if words:  # the cells of the block's words, from 2p - g
        spans = [(f"2 * ({Int})blockIdx.x * blockDim.x - g", f"2 * (({Int})blockIdx.x + 1) * blockDim.x - g", x)]
    else:
        width = f"({Int})blockDim.x * {vector}"
        spans = [(f"({Int})blockIdx.x * {width}", f"(({Int})blockIdx.x + 1) * {width}", x)]
    if ndim == 3 and along == 0:
        spans.append((f"({Int})blockIdx.y * ({Int})blockDim.y", f"(({Int})blockIdx.y + 1) * ({Int})blockDim.y", 1))
        spans.append((f"({Int})blockIdx.z * {rows}", f"(({Int})blockIdx.z + 1) * {rows}", 0))
    elif ndim >= 2:
        height = f"({Int})blockDim.y * {rows}"
        spans.append((f"({Int})blockIdx.y * {height}", f"(({Int})blockIdx.y + 1) * {height}", x - 1))
    if ndim == 3 and along == 1:
        spans.append(("i0", "i0 + 1", 0))
    return spans


def pass_source(p: Pass, ndim: int, dtype, constants: tuple[Constant, ...], name: str = "sf_pass",
                rows: int | None = None, vector: int = 1, wide_index: bool = True,
                images: Mapping[str, tuple[str, ...]] | None = None,
                planes_per_thread: int | None = None, words: bool = False, pitch: int | None = None) -> tuple[str, tuple[str, ...]]:
    """(source, array argument order) of the pass's kernel `name`; `pitch`: the arrays' rows lie that many elements
    apart (the sweeps' layout, `Backend.field`), else a padded row.

    Arguments: the arrays, then each constant and t in the dtype, then per
    axis lo, h (double), n (interior points) and start (the global index of
    the first interior point: a decomposed block's start), then the ghost width g.
    Coordinates are formed from global indices, as the oracle forms them.
    Each thread computes `rows` consecutive rows times `vector` columns a
    block's width apart (more independent loads in flight per thread);
    `wide_index` computes offsets in 64 bits (needed past 2^31 cells).
    `planes_per_thread` (3D): each thread computes that many consecutive
    planes of its (y, x) cell instead of rows, so the z-neighbours it reads
    twice stay in registers.
    `words` (every array stored in float16, rows of an even number of padded
    cells): each thread computes the two cells of one 4-byte word per row and
    reads and writes whole words, as many bytes per load as float32 moves.
    `images` maps written slots to their walls per axis ("Periodic" or
    "Neumann"): the pass also writes those fields' ghost cells, the copies a
    gather of ghost cells from their images would make, so none need follow.
    Launch with `launch_grid`.
    """
    rows = planes_per_thread or (ROWS[ndim] if rows is None else rows)
    Int = "long long" if wide_index else "int"
    half = half_slots(p)
    x = ndim - 1
    T = _ctype(dtype)
    statements = _word_statements if words else _cell_statements
    body, imaging, read = statements(p, ndim, dtype, half, images or {}, Int)
    arrays = tuple(dict.fromkeys([slot_name(s) for s in p.writes] + read))
    written = {slot_name(s) for s in p.writes}
    args = [f"{'' if s in written else 'const '}{'unsigned short' if s in half else T}* __restrict__ a_{s}" for s in arrays]
    args += [f"const {T} p_{c.name}" for c in constants] + [f"const {T} t"]
    args += [f"const double lo{a}, const double h{a}, const long long n{a}_, const long long start{a}" for a in range(ndim)]
    args.append("const int g")
    head = [f"const {Int} n{a} = ({Int})n{a}_;" for a in range(ndim)]
    if words:
        head += [f"const {Int} words = (n{x} + 2 * g) / 2;", f"const {Int} p = ({Int})blockIdx.x * blockDim.x + threadIdx.x;",
                 "if (p >= words) return;"]
    else:
        head.append(f"const {Int} column = ({Int})blockIdx.x * blockDim.x * {vector} + threadIdx.x;")
    along = x - 1 if planes_per_thread is None else 0  # the axis a thread's rows (or planes) follow
    if ndim == 3 and along == 0:
        head.append(f"const {Int} first = ({Int})blockIdx.z * {rows};")
        head.append(f"const {Int} i1 = ({Int})blockIdx.y * blockDim.y + threadIdx.y;")
        head.append("if (i1 >= n1) return;")
    elif ndim >= 2:
        head.append(f"const {Int} first = (({Int})blockIdx.y * blockDim.y + threadIdx.y) * {rows};")
    if ndim == 3 and along == 1:
        head.append(f"const {Int} i0 = blockIdx.z;")
        head.append("if (i0 >= n0) return;")
    head.append(f"const {Int} s{x} = 1;")
    for a in range(x - 1, -1, -1):
        row = f"({Int}){pitch}" if pitch is not None and a == x - 1 else f"(n{a + 1} + 2 * g)"
        head.append(f"const {Int} s{a} = s{a + 1} * {row};")
    if words:
        head += [f"const {Int} w{a} = s{a} / 2;" for a in range(x)]
    centre = " + ".join(f"(i{a} + g) * s{a}" for a in range(ndim))

    def nest(statements: list[str]) -> list[str]:
        if words:
            row = " + ".join(f"(i{a} + g) * w{a}" for a in range(x)) or "0"
            cells = [f"const {Int} r = {row};", f"const {Int} ix0 = 2 * p - g, ix1 = ix0 + 1;",
                     f"const bool in0 = ix0 >= 0 && ix0 < n{x}, in1 = ix1 >= 0 && ix1 < n{x};"] + statements
        else:
            cells = ["#pragma unroll", f"for (int v = 0; v < {vector}; ++v) {{",
                     f"    const {Int} i{x} = column + v * ({Int})blockDim.x;", f"    if (i{x} >= n{x}) break;",
                     f"    const {Int} c = {centre};"] + ["    " + b for b in statements] + ["}"]
        if ndim >= 2:
            cells = ["#pragma unroll", f"for ({Int} i{along} = first; i{along} < first + {rows}; ++i{along}) {{",
                     f"    if (i{along} >= n{along}) return;"] + ["    " + c for c in cells] + ["}"]
        return cells

    cells = nest(body)
    if imaging != body:  # only blocks within g of a wall test their cells for ghost images
        near = " || ".join(f"{lo} < g || {hi} > n{a} - g" for lo, hi, a in _block_spans(ndim, along, rows, vector, words, Int))
        cells = [f"if ({near}) {{"] + ["    " + c for c in nest(imaging)] + ["} else {"] + ["    " + c for c in cells] + ["}"]
    lines = [f'extern "C" __global__ void {name}({", ".join(args)})', "{"] + ["    " + s for s in head + cells] + ["}"]
    return (HALF if half else "") + (HALF_WORDS if words else "") + "\n".join(lines) + "\n", arrays


def launch_grid(
    shape: tuple[int, ...], block=BLOCK, rows: int | None = None, vector: int = 1, planes_per_thread: int | None = None,
    words: int | None = None,
) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(blocks, threads) covering the interior `shape` with the kernel's indexing; `words`: a kernel printed with
    words=True, whose threads take the 4-byte words of a padded row (that many)."""
    bx, by = block
    across = -(-words // bx) if words else -(-shape[-1] // (bx * vector))
    if planes_per_thread:
        return (across, -(-shape[1] // by), -(-shape[0] // planes_per_thread)), (bx, by, 1)
    rows = ROWS[len(shape)] if rows is None else rows
    ny = -(-shape[-2] // rows) if len(shape) >= 2 else 1
    nz = shape[0] if len(shape) == 3 else 1
    return (across, (ny + by - 1) // by, nz), (bx, by if len(shape) >= 2 else 1, 1)


def tabulate_source(expr: Expr, ndim: int, out_dtype, name: str = "sf_tabulate") -> tuple[str, tuple[str, ...]]:
    """(source, constant names in argument order) of a kernel storing an expression of coordinates, t and
    constants at every cell of a box, in float64 as the oracle's `evaluate(dtype=float64)` computes it.

    Arguments: out, n cells, the box's extents past the first axis (e), each axis's global index of the
    box's first cell (start), the lattice's lower corner (lo) and spacing (h), t, then the constants. The
    value is rounded once to `out_dtype`; float16 (storage on a float32 grid) rounds through float32, as
    the host's casts do. Compile with --fmad=false."""
    pr = _Printer(ndim, np.float64)
    constants = tuple(dict.fromkeys(n.name for n in walk(expr) if isinstance(n, Constant)))
    value = pr(expr)
    out = np.dtype(out_dtype).name
    ctype = STORED_CTYPE[out]
    store = {"float16": "sf_f2h((float)v)", "float32": "(float)v", "float64": "v"}[out]
    params = [f"{ctype}* __restrict__ out", "const long long n"]
    params += [f"const long long e{a}" for a in range(1, ndim)] + [f"const long long start{a}" for a in range(ndim)]
    params += [f"const double lo{a}" for a in range(ndim)] + [f"const double h{a}" for a in range(ndim)]
    params += ["const double t"] + [f"const double p_{c}" for c in constants]
    index = ["    long long r = k;"]
    for a in range(ndim - 1, 0, -1):
        index += [f"    const long long i{a} = r % e{a};", f"    r /= e{a};"]
    index.append("    const long long i0 = r;")
    lines = [HALF if out == "float16" else "", f'extern "C" __global__ void {name}({", ".join(params)})', "{",
             "  for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (long long)gridDim.x * blockDim.x) {",
             *index, f"    const double v = {value};", f"    out[k] = {store};", "  }", "}"]
    return "\n".join(lines), constants
