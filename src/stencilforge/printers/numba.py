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

from ..ir.analysis import Pass, slot_name
from ..ir.nodes import Access, Call, Constant, Coordinate, walk
from .source import InfixPrinter

HEADER = (
    "import numba\nimport numpy as np\n\n"
    "JIT = numba.njit(parallel=True, cache=True, nogil=True, error_model='numpy')\n"
    "ROW = numba.njit(nogil=True, error_model='numpy')  # compiled into the cached kernel\n\n"
)
FUNCTIONS = {"sqrt": "np.sqrt", "exp": "np.exp", "log": "np.log", "sin": "np.sin", "cos": "np.cos",
             "tanh": "np.tanh", "abs": "abs", "min": "min", "max": "max"}
# Calls whose results NumPy and these kernels round alike: IEEE's correctly rounded square root, and abs. NumPy's
# exp, log, sin, cos and tanh are loops of its own that LLVM's differ from in the last bits, and Python's min and max
# treat NaN unlike numpy.minimum and numpy.maximum.
EXACT_CALLS = frozenset({"sqrt", "abs"})


def _index(i: str, o: int) -> str:
    return f"{i} + {o}" if o > 0 else (f"{i} - {-o}" if o < 0 else i)


class _Printer(InfixPrinter):
    def __init__(self, ndim: int, dtype_name: str):
        self.ndim, self.T = ndim, f"np.{dtype_name}"
        self.literals: list[float] = []  # one slot per occurrence, so the source never depends on values
        self.views: dict[tuple[str, tuple[int, ...]], str] = {}
        self.locals: dict[str, str] = {}  # slots computed earlier in this pass: their value at the cell

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
    each operation, coordinates and integer powers included, in the same order and dtype, so only the calls outside
    EXACT_CALLS part them (tests/test_equations.py checks random problems)."""
    return all(n.fn in EXACT_CALLS for eq in p.equations for n in walk(eq.expr) if isinstance(n, Call))


def pass_source(p: Pass, ndim: int, dtype, constants: tuple[Constant, ...]) -> tuple[str, np.ndarray, tuple[str, ...]]:
    """(source, literal values, array argument order) of the pass's kernel."""
    pr = _Printer(ndim, np.dtype(dtype).name)
    body = []
    for k, eq in enumerate(p.equations):
        value = pr(eq.expr)
        slot = slot_name((eq.target.field.name, eq.target.level))
        body.append(f"e{k} = {value}")
        body.append(f"w_{slot}[j] = e{k}")
        pr.locals[slot] = f"e{k}"
    arrays = tuple(dict.fromkeys([slot_name(s) for s in p.writes] + [v[0] for v in pr.views]))
    geometry = [f"lo{a}, h{a}, s{a}" for a in range(ndim)]
    args = ", ".join([f"a_{s}" for s in arrays] + ["lit"] + [f"p_{c.name}" for c in constants] + ["t"] + geometry + ["g"])
    outer = [f"i{a}" for a in range(ndim - 1)]
    first = f"a_{arrays[0]}"

    def view(slot: str, offset: tuple[int, ...]) -> str:
        lo = _index("g", offset[-1])
        idx = [_index(i, o) for i, o in zip(outer, offset[:-1])] + [f"{lo}:{lo} + m"]
        return f"a_{slot}[{', '.join(idx)}]"

    cells = [f"c{k} = lit[{k}]" for k in range(len(pr.literals))] + [f"m = {first}.shape[{ndim - 1}] - 2 * g"]
    cells += [f"{name} = {view(slot, offset)}" for (slot, offset), name in pr.views.items()]
    cells += [f"w_{slot_name(s)} = {view(slot_name(s), (0,) * ndim)}" for s in p.writes]
    cells.append(f"for j in {'numba.prange' if ndim == 1 else 'range'}(m):")
    cells += [f"    {b}" for b in body]
    if ndim == 1:
        lines = [f"@JIT\ndef kernel({args}):"] + [f"    {c}" for c in cells]
    else:
        lines = [f"@ROW\ndef row({args}, {', '.join(outer)}):"] + [f"    {c}" for c in cells]
        lines.append(f"\n\n@JIT\ndef kernel({args}):")
        for a in range(ndim - 1):
            loop = "numba.prange" if a == 0 else "range"
            lines.append(f"{'    ' * (a + 1)}for i{a} in {loop}(g, {first}.shape[{a}] - g):")
        lines.append(f"{'    ' * ndim}row({args}, {', '.join(outer)})")
    literals = np.array(pr.literals, dtype=dtype)
    return HEADER + "\n".join(lines) + "\n", literals, arrays
