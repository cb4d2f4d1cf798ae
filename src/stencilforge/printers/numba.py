"""Numba source for one pass: a parallel loop nest over the interior, one statement per equation.

Literals travel in an array argument and constants as scalar arguments, so
the source (and Numba's compiled code) depends only on the equations' shape:
a new grid size, spacing or parameter value reuses the cached machine code.
The innermost loop reads 1D row views that share one index, which LLVM
vectorises. In 2D and 3D that loop is a function of its own (`row`) which the
parallel loop calls: Numba's parallel passes then see a one-line body, which
compiles faster than the same loop written inside the parallel loop and runs
as fast (docs/performance.md, cold start).
"""

from __future__ import annotations

import numpy as np

from ..ir.analysis import Pass, accesses, reads_time, slot_name
from ..ir.nodes import Access, Call, Constant, Coordinate, Expr, walk
from .source import InfixPrinter

HEADER = (
    "import numba\nimport numpy as np\n\n"
    "JIT = numba.njit(parallel={parallel}, cache=True, nogil=True, error_model='numpy')\n"
)
ROW = "ROW = numba.njit(nogil=True, error_model='numpy')  # compiled into the cached kernel\n"
# Grids of at most this many interior cells get a serial loop nest: it compiles faster than the parallel one, and
# threads no longer pay below it (benchmarks/results/cpu-serial-passes-2026-12-02.json).
SERIAL_CELLS = 2**11
FUNCTIONS = {"sqrt": "np.sqrt", "exp": "np.exp", "log": "np.log", "sin": "np.sin", "cos": "np.cos",
             "tanh": "np.tanh", "abs": "abs", "min": "min", "max": "max"}
# Calls whose results NumPy and these kernels round alike: IEEE's correctly rounded square root, and abs. NumPy's
# exp, log, sin, cos and tanh may be loops of its own whose last bits differ from LLVM's (variable_diffusion's cos and exp did
# in float64 on a Xeon: cpu-hoisted-terms-2026-11-28.json), and Python's min and max treat NaN unlike numpy's.
EXACT_CALLS = frozenset({"sqrt", "abs"})


def _index(i: str, o: int) -> str:
    return f"{i} + {o}" if o > 0 else (f"{i} - {-o}" if o < 0 else i)


def _inexact(node: Expr) -> bool:
    """A call whose bits NumPy and these kernels may not share."""
    return isinstance(node, Call) and node.fn not in EXACT_CALLS


def lift_axes(e: Expr) -> frozenset[int]:
    """The axes whose coordinates a subexpression reads: its values vary along those, and are one along the others."""
    return frozenset(n.axis for n in walk(e) if isinstance(n, Coordinate))


def hoisted(p: Pass) -> tuple[Expr, ...]:
    """The pass's largest subexpressions that read no field and call a function outside EXACT_CALLS (a forcing term, a
    coefficient of the coordinates, a factor of t) and that are cheap to evaluate apart: those of no t, evaluated once,
    and those of t along one axis at most, each pass; a term of t over several axes is split into such parts, as a whole
    it would cost NumPy a full array each pass. The backend evaluates them with NumPy's oracle and the kernel reads their
    values, so it calls no such function per cell and gives the oracle's bits (`rounds_as_oracle`)."""
    found: dict[int, Expr] = {}  # by identity: a subexpression used twice is evaluated once

    def visit(node: Expr) -> None:
        if not accesses(node):
            if not any(map(_inexact, walk(node))):
                return
            if len(lift_axes(node)) <= 1 or not reads_time(node):
                found.setdefault(id(node), node)
                return
        for child in node.children():
            visit(child)

    for eq in p.equations:
        visit(eq.expr)
    return tuple(found.values())


class _Printer(InfixPrinter):
    def __init__(self, ndim: int, dtype_name: str, lifted: tuple[Expr, ...] = ()):
        self.ndim, self.T = ndim, f"np.{dtype_name}"
        self.literals: list[float] = []  # one slot per occurrence, so the source never depends on values
        self.views: dict[tuple[str, tuple[int, ...]], str] = {}
        self.locals: dict[str, str] = {}  # slots computed earlier in this pass: their value at the cell
        # `hoisted`: values read, not computed; a row's view of them, or its one value where they are constant along rows
        self.lifted = {id(e): f"lv{k}[j]" if ndim - 1 in lift_axes(e) else f"lv{k}" for k, e in enumerate(lifted)}

    def __call__(self, node: Expr) -> str:
        if id(node) in self.lifted:
            return self.lifted[id(node)]
        return super().__call__(node)

    def literal(self, value: float) -> str:
        self.literals.append(value)
        return f"c{len(self.literals) - 1}"

    def coordinate(self, node: Coordinate) -> str:
        a = node.axis
        i = f"j + s{a}" if a == self.ndim - 1 else f"i{a} - g + s{a}"  # s: the block's global start
        return f"{self.T}(lo{a} + np.float64({_index(i, node.shift)}) * h{a})"

    def access(self, node: Access) -> str:
        slot = slot_name((node.field.name, node.level))
        if not any(node.offset) and slot in self.locals:
            return self.locals[slot]
        return self.views.setdefault((slot, node.offset), f"v{len(self.views)}") + "[j]"

    def call(self, fn, args):
        return f"{FUNCTIONS[fn]}({', '.join(args)})"

    def select(self, cond, a, b):
        return f"({a} if {cond} else {b})"


def rounds_as_oracle(p: Pass) -> bool:
    """Whether the pass's kernel gives the bits of numpy's oracle (`printers.numpy.pass_kernel`): both printers spell
    each operation, coordinates and integer powers included, in the same order and dtype, and the oracle itself
    computes the `hoisted` subexpressions, so only calls outside EXACT_CALLS on fields' values part them
    (tests/test_equations.py checks random problems)."""
    lifted = {id(e) for e in hoisted(p)}

    def exact(node: Expr) -> bool:
        if id(node) in lifted:
            return True
        return not _inexact(node) and all(exact(c) for c in node.children())

    return all(exact(eq.expr) for eq in p.equations)


def pass_source(p: Pass, ndim: int, dtype, constants: tuple[Constant, ...],
                interior: int) -> tuple[str, np.ndarray, tuple[str, ...], tuple[Expr, ...]]:
    """(source, literal values, array argument order, `hoisted` subexpressions) of the pass's kernel over a grid of
    `interior` cells, which takes the arrays, then each hoisted subexpression's values over the interior, of size one
    along the axes it does not read (lift0, lift1, ...), then the literals. Its loop nest is parallel above
    SERIAL_CELLS cells; each cell's arithmetic is the same either way."""
    lifted = hoisted(p)
    pr = _Printer(ndim, np.dtype(dtype).name, lifted)
    body = []
    for k, eq in enumerate(p.equations):
        value = pr(eq.expr)
        slot = slot_name((eq.target.field.name, eq.target.level))
        body.append(f"e{k} = {value}")
        body.append(f"w_{slot}[j] = e{k}")
        pr.locals[slot] = f"e{k}"
    arrays = tuple(dict.fromkeys([slot_name(s) for s in p.writes] + [v[0] for v in pr.views]))
    geometry = [f"lo{a}, h{a}, s{a}" for a in range(ndim)]
    lifts = [f"lift{k}" for k in range(len(lifted))]
    args = ", ".join([f"a_{s}" for s in arrays] + lifts + ["lit"] + [f"p_{c.name}" for c in constants] + ["t"] + geometry + ["g"])
    outer = [f"i{a}" for a in range(ndim - 1)]
    first = f"a_{arrays[0]}"

    def view(slot: str, offset: tuple[int, ...]) -> str:
        lo = _index("g", offset[-1])
        idx = [_index(i, o) for i, o in zip(outer, offset[:-1])] + [f"{lo}:{lo} + m"]
        return f"a_{slot}[{', '.join(idx)}]"

    cells = [f"c{k} = lit[{k}]" for k in range(len(pr.literals))] + [f"m = {first}.shape[{ndim - 1}] - 2 * g"]
    cells += [f"{name} = {view(slot, offset)}" for (slot, offset), name in pr.views.items()]
    cells += [f"w_{slot_name(s)} = {view(slot_name(s), (0,) * ndim)}" for s in p.writes]
    for k, e in enumerate(lifted):  # each of size one along the axes it does not read (`lift_axes`)
        axes = lift_axes(e)
        index = [f"i{a} - g" if a in axes else "0" for a in range(ndim - 1)] + ["0:m" if ndim - 1 in axes else "0"]
        cells.append(f"lv{k} = lift{k}[{', '.join(index)}]")
    cells.append(f"for j in {'numba.prange' if ndim == 1 else 'range'}(m):")
    cells += [f"    {b}" for b in body]
    parallel = interior > SERIAL_CELLS
    head = HEADER.format(parallel=parallel)
    nest = [f"{'    ' * (a + 1)}for i{a} in {'numba.prange' if a == 0 and parallel else 'range'}(g, {first}.shape[{a}] - g):"
            for a in range(ndim - 1)]
    if ndim == 1:
        lines = [f"\n@JIT\ndef kernel({args}):"] + [f"    {c}" for c in cells]
    elif not parallel:  # one function: Numba compiles each function apart (cpu-serial-pass-one-function-2026-12-03.json)
        lines = [f"\n@JIT\ndef kernel({args}):"] + nest + [f"{'    ' * ndim}{c}" for c in cells]
    else:
        head += ROW
        lines = [f"\n@ROW\ndef row({args}, {', '.join(outer)}):"] + [f"    {c}" for c in cells]
        lines += [f"\n\n@JIT\ndef kernel({args}):"] + nest + [f"{'    ' * ndim}row({args}, {', '.join(outer)})"]
    literals = np.array(pr.literals, dtype=dtype)
    return head + "\n".join(lines) + "\n", literals, arrays, lifted
