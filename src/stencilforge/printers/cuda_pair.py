"""CUDA C for two steps of a problem's one pass in one kernel (2D), the middle state in shared memory.

A block owns a tile of cells. It first computes the middle state (after one
step) on its tile widened by the pass's reach r, from the input in global
memory, into shared memory; then the second step on its tile, reading the
middle state from there, and writes the result. Each middle cell runs the
single step's statements on the same input, and the kernel is compiled
without FMA contraction, so two steps in one pass give the bits two passes
give. A middle cell in the ghost layer holds what the walls would put there:
for periodic or Neumann walls the value of its interior image (the step
evaluated at the image cell); for Dirichlet walls the wall value at t + dt,
which the caller puts in the output's ghost cells (the kernel writes only the
output's interior).

Input and output are different arrays (the input's level 0, the output's
level 1): blocks read the input's halo while others write their tiles.
"""

from __future__ import annotations

from typing import Mapping

from ..ir.analysis import Pass, slot_name
from ..ir.nodes import Access, Constant
from .cuda import GHOST_IMAGE, OPTIONS, _ctype, _image_stores, _Printer

__all__ = ["OPTIONS", "TILE", "THREADS", "pair_source", "launch_grid"]

TILE = (32, 64)  # output cells per block (y, x)
THREADS = 256


class _PairPrinter(_Printer):
    """Accesses of the second step read the middle state of the written fields from shared memory."""

    def __init__(self, ndim: int, dtype, middle: dict[str, str] | None, reach: int, width: int):
        super().__init__(ndim, dtype)
        self.middle, self.reach, self.width = middle, reach, width

    def time(self) -> str:
        return "t" if self.middle is None else "t2"

    def access(self, node: Access) -> str:
        if self.middle is not None and node.level == 0 and node.field.name in self.middle:
            dy, dx = node.offset
            r = self.reach
            return f"{self.middle[node.field.name]}[(oy + {r + dy}) * {self.width} + ox + {r + dx}]"
        return super().access(node)


def pair_source(p: Pass, dtype, constants: tuple[Constant, ...], walls: tuple[str, ...] | None, reach: int,
                tile: tuple[int, int] = TILE, threads: int = THREADS,
                images: Mapping[str, tuple[str, ...]] | None = None, name: str = "sf_pair") -> tuple[str, tuple[str, ...]]:
    """(source, array argument order) of a kernel advancing `p` two steps on a 2D grid.

    `walls`: the written fields' walls per axis ("Periodic" or "Neumann"), or None for Dirichlet
    walls, whose values at t + dt the output's ghost cells must hold. `reach`: the largest offset
    at which the pass reads a field it writes.
    Arguments: the arrays, each constant, t and t + dt in the dtype, per axis lo, h (double),
    n (interior points) and start (the global index of the first one), then the ghost width g.
    `images`: as in `cuda.pass_source`, for the result. Launch with `launch_grid`.
    """
    T = _ctype(dtype)
    oy, ox = tile
    r = reach
    my, mx = oy + 2 * r, ox + 2 * r
    written = {slot[0]: slot_name(slot) for slot in p.writes}
    middle = {f: f"m_{f}" for f in written}
    first = _PairPrinter(2, dtype, None, r, mx)
    second = _PairPrinter(2, dtype, middle, r, mx)
    step1, step2 = [], []
    for k, eq in enumerate(p.equations):
        f, slot = eq.target.field.name, slot_name((eq.target.field.name, eq.target.level))
        step1 += [f"const {T} e{k} = {first(eq.expr)};", f"m_{f}[k] = e{k};"]
        first.locals[slot] = f"e{k}"
        step2 += [f"const {T} e{k} = {second(eq.expr)};", f"a_{slot}[c] = e{k};"]
        if images and slot in images:
            step2 += ["if (near) {"] + ["    " + s for s in _image_stores(2, images[slot], f"a_{slot}", f"e{k}")] + ["}"]
        second.locals[slot] = f"e{k}"
    outputs = list(written.values())
    arrays = tuple(dict.fromkeys(outputs + list(first.arrays) + list(second.arrays)))
    args = [f"{T}* __restrict__ a_{s}" if s in outputs else f"const {T}* __restrict__ a_{s}" for s in arrays]
    args += [f"const {T} p_{c.name}" for c in constants] + [f"const {T} t", f"const {T} t2"]
    args += [f"const double lo{a}, const double h{a}, const int n{a}, const int start{a}" for a in range(2)] + ["const int g"]

    if walls is None:  # Dirichlet: the output's ghost cell holds the wall value at t + dt
        ghost = [f"m_{f}[k] = a_{slot_name((f, 1))}[(j0 + g) * s0 + (j1 + g)];" for f in written]
        middle_cell = ["if (j0 < 0 || j0 >= n0 || j1 < 0 || j1 >= n1) {"] + ["    " + s for s in ghost] + ["    continue;", "}",
                                                                              "const int i0 = j0, i1 = j1;"]
    else:
        middle_cell = []
        for a, kind in enumerate(walls):
            below, above = (e.format(j=f"j{a}", n=f"n{a}") for e in GHOST_IMAGE[kind])
            middle_cell.append(f"const int i{a} = j{a} < 0 ? {below} : j{a} >= n{a} ? {above} : j{a};")
    lines = [
        f'extern "C" __global__ void __launch_bounds__({threads}) {name}({", ".join(args)})',
        "{",
        *[f"    __shared__ {T} m_{f}[{my * mx}];" for f in written],
        "    const int s1 = 1;",
        "    const int s0 = n1 + 2 * g;",
        f"    const int y0 = blockIdx.y * {oy}, x0 = blockIdx.x * {ox};",
        f"    const bool near = y0 < g || y0 + {oy} > n0 - g || x0 < g || x0 + {ox} > n1 - g;",
        f"    for (int k = threadIdx.x; k < {my * mx}; k += {threads}) {{",
        f"        const int j0 = y0 - {r} + k / {mx}, j1 = x0 - {r} + k % {mx};",
        f"        if (j0 >= n0 + {r} || j1 >= n1 + {r}) continue;  // past the cells the last tiles read",
        *["        " + s for s in middle_cell],
        "        const int c = (i0 + g) * s0 + (i1 + g) * s1;",
        *["        " + s for s in step1],
        "    }",
        "    __syncthreads();",
        f"    for (int q = threadIdx.x; q < {oy * ox}; q += {threads}) {{",
        f"        const int oy = q / {ox}, ox = q % {ox};",
        "        const int i0 = y0 + oy, i1 = x0 + ox;",
        "        if (i0 >= n0 || i1 >= n1) continue;",
        "        const int c = (i0 + g) * s0 + (i1 + g) * s1;",
        *["        " + s for s in step2],
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n", arrays


def launch_grid(shape: tuple[int, ...], tile: tuple[int, int] = TILE, threads: int = THREADS):
    """(blocks, threads) for `pair_source`'s kernel over the interior `shape`."""
    return (-(-shape[1] // tile[1]), -(-shape[0] // tile[0]), 1), (threads, 1, 1)
