"""CUDA C for two steps of a problem's one pass in one kernel, the middle state in shared memory.

A block owns a tile of cells. It first computes the middle state (after one
step) on its tile widened by the pass's reach r, from the input in global
memory, into shared memory; then the second step on its tile, reading the
middle state from there, and writes the result. Each middle cell runs the
single step's statements on the same input, and the kernel is compiled
without FMA contraction, so two steps in one pass give the bits two passes
give. A middle cell in the ghost layer holds what the walls would put there:
for periodic or Neumann walls the value of its interior image (the step
evaluated at the image cell), for static Dirichlet walls the wall value the
input's ghost cell already holds.

In 3D a block marches along z through a chunk of planes, keeping the
middle state's last 2r + 1 planes in a ring. Input and output are different arrays (the input's level 0, the output's
level 1): blocks read the input's halo while others write their tiles.
"""

from __future__ import annotations

from typing import Mapping

from ..ir.analysis import Pass, slot_name
from ..ir.nodes import Access, Constant
from .cuda import OPTIONS, _ctype, _image_stores, _Printer

__all__ = ["OPTIONS", "TILE", "TILE3", "THREADS", "pair_source", "pair3_source", "launch_grid"]

TILE = (32, 64)  # output cells per block (y, x)
TILE3 = (32, 16, 64)  # 3D: planes a block marches through, rows, columns
THREADS = 256

IMAGE = {"Periodic": ("{j} + {n}", "{j} - {n}"), "Neumann": ("-1 - {j}", "2 * {n} - 1 - {j}")}  # a ghost index's image below, above


def _tag(d: int) -> str:
    return f"m{-d}" if d < 0 else f"p{d}"


class _PairPrinter(_Printer):
    """Accesses of the second step read the middle state of the written fields from shared memory
    (3D: from the ring of middle planes, whose plane at offset dz starts at b{dz})."""

    def __init__(self, ndim: int, dtype, middle: dict[str, str] | None, reach: int, width: int):
        super().__init__(ndim, dtype)
        self.middle, self.reach, self.width = middle, reach, width

    def time(self) -> str:
        return "t" if self.middle is None else "t2"

    def access(self, node: Access) -> str:
        if self.middle is not None and node.level == 0 and node.field.name in self.middle:
            *dz, dy, dx = node.offset
            r = self.reach
            plane = f"b{_tag(dz[0])} + " if dz else ""
            return f"{self.middle[node.field.name]}[{plane}(oy + {r + dy}) * {self.width} + ox + {r + dx}]"
        return super().access(node)


def _statements(p: Pass, ndim: int, dtype, reach: int, width: int, images) -> tuple[list[str], list[str], tuple[str, ...], list[str]]:
    """(first step's statements storing into m_f[slot + k], second step's storing into the outputs,
    the arrays in argument order, the written field names)."""
    T = _ctype(dtype)
    written = {slot[0]: slot_name(slot) for slot in p.writes}
    first = _PairPrinter(ndim, dtype, None, reach, width)
    second = _PairPrinter(ndim, dtype, {f: f"m_{f}" for f in written}, reach, width)
    step1, step2 = [], []
    for k, eq in enumerate(p.equations):
        f, slot = eq.target.field.name, slot_name((eq.target.field.name, eq.target.level))
        step1 += [f"const {T} e{k} = {first(eq.expr)};", f"m_{f}[at] = e{k};"]
        first.locals[slot] = f"e{k}"
        step2 += [f"const {T} e{k} = {second(eq.expr)};", f"a_{slot}[c] = e{k};"]
        if images and slot in images:
            step2 += ["if (near) {"] + ["    " + s for s in _image_stores(ndim, images[slot], f"a_{slot}", f"e{k}")] + ["}"]
        second.locals[slot] = f"e{k}"
    for f in written:  # the static walls' path reads every written field's input
        first.arrays.setdefault(slot_name((f, 0)))
    outputs = list(written.values())
    arrays = tuple(dict.fromkeys(outputs + list(first.arrays) + list(second.arrays)))
    return step1, step2, arrays, list(written)


def _signature(name: str, threads: int, arrays, outputs, dtype, constants, ndim: int) -> str:
    T = _ctype(dtype)
    args = [f"{T}* __restrict__ a_{s}" if s in outputs else f"const {T}* __restrict__ a_{s}" for s in arrays]
    args += [f"const {T} p_{c.name}" for c in constants] + [f"const {T} t", f"const {T} t2"]
    args += [f"const double lo{a}, const double h{a}, const int n{a}" for a in range(ndim)] + ["const int g"]
    return f'extern "C" __global__ void __launch_bounds__({threads}) {name}({", ".join(args)})'


def _middle_cell(walls, ndim: int, written: list[str]) -> list[str]:
    """Statements mapping a middle cell j (maybe in the ghost layer) to the cell i the step is evaluated
    at: its interior image; or, for static Dirichlet walls, storing the wall value and moving on."""
    centre = " + ".join(f"(j{a} + g) * s{a}" for a in range(ndim))
    if walls is None:  # static Dirichlet: the input's ghost cell holds the wall value
        outside = " || ".join(f"j{a} < 0 || j{a} >= n{a}" for a in range(ndim))
        ghost = [f"    m_{f}[at] = a_{slot_name((f, 0))}[{centre}];" for f in written]
        return [f"if ({outside}) {{", *ghost, "    continue;", "}"] + [f"const int i{a} = j{a};" for a in range(ndim)]
    lines = []
    for a, kind in enumerate(walls):
        below, above = (e.format(j=f"j{a}", n=f"n{a}") for e in IMAGE[kind])
        lines.append(f"const int i{a} = j{a} < 0 ? {below} : j{a} >= n{a} ? {above} : j{a};")
    return lines


def pair_source(p: Pass, dtype, constants: tuple[Constant, ...], walls: tuple[str, ...] | None, reach: int,
                tile: tuple[int, ...] = TILE, threads: int = THREADS,
                images: Mapping[str, tuple[str, ...]] | None = None, name: str = "sf_pair") -> tuple[str, tuple[str, ...]]:
    """(source, array argument order) of a kernel advancing `p` two steps on a 2D grid.

    `walls`: the written fields' walls per axis ("Periodic" or "Neumann"), or None for static
    Dirichlet walls. `reach`: the largest offset at which the pass reads a field it writes.
    Arguments: the arrays, each constant, t and t + dt in the dtype, per axis lo, h (double) and
    n (interior points), then the ghost width g. `images`: as in `cuda.pass_source`, for the
    result. Launch with `launch_grid`.
    """
    T = _ctype(dtype)
    oy, ox = tile
    r = reach
    my, mx = oy + 2 * r, ox + 2 * r
    step1, step2, arrays, written = _statements(p, 2, dtype, r, mx, images)
    outputs = [slot_name((f, 1)) for f in written]
    lines = [
        _signature(name, threads, arrays, outputs, dtype, constants, 2),
        "{",
        *[f"    __shared__ {T} m_{f}[{my * mx}];" for f in written],
        "    const int s1 = 1;",
        "    const int s0 = n1 + 2 * g;",
        f"    const int y0 = blockIdx.y * {oy}, x0 = blockIdx.x * {ox};",
        f"    const bool near = y0 < g || y0 + {oy} > n0 - g || x0 < g || x0 + {ox} > n1 - g;",
        f"    for (int at = threadIdx.x; at < {my * mx}; at += {threads}) {{",
        f"        const int j0 = y0 - {r} + at / {mx}, j1 = x0 - {r} + at % {mx};",
        f"        if (j0 >= n0 + {r} || j1 >= n1 + {r}) continue;  // past the cells the last tiles read",
        *["        " + s for s in _middle_cell(walls, 2, written)],
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


def pair3_source(p: Pass, dtype, constants: tuple[Constant, ...], walls: tuple[str, ...] | None, reach: int,
                 tile: tuple[int, ...] = TILE3, threads: int = THREADS,
                 images: Mapping[str, tuple[str, ...]] | None = None, name: str = "sf_pair") -> tuple[str, tuple[str, ...]]:
    """As `pair_source` on a 3D grid: a block owns `tile` = (planes, rows, columns) and marches along z,
    computing middle plane z into a ring of 2r + 1 planes in shared memory, then output plane z - r
    from the ring. Launch with `launch_grid3`."""
    T = _ctype(dtype)
    nz, oy, ox = tile
    r = reach
    ring = 2 * r + 1
    my, mx = oy + 2 * r, ox + 2 * r
    plane = my * mx
    step1, step2, arrays, written = _statements(p, 3, dtype, r, mx, images)
    outputs = [slot_name((f, 1)) for f in written]
    bases = [f"const int b{_tag(d)} = ((zo + {d} - z0 + {r}) % {ring}) * {plane};" for d in range(-r, r + 1)]
    lines = [
        _signature(name, threads, arrays, outputs, dtype, constants, 3),
        "{",
        *[f"    __shared__ {T} m_{f}[{ring * plane}];" for f in written],
        "    const int s2 = 1;",
        "    const int s1 = n2 + 2 * g;",
        "    const int s0 = s1 * (n1 + 2 * g);",
        f"    const int z0 = blockIdx.z * {nz}, y0 = blockIdx.y * {oy}, x0 = blockIdx.x * {ox};",
        f"    const int z1 = min(z0 + {nz}, n0);",
        f"    const bool near = z0 < g || z1 > n0 - g || y0 < g || y0 + {oy} > n1 - g || x0 < g || x0 + {ox} > n2 - g;",
        f"    for (int j0 = z0 - {r}; j0 < z1 + {r}; ++j0) {{",
        f"        const int slot = ((j0 - z0 + {r}) % {ring}) * {plane};",
        f"        for (int k = threadIdx.x; k < {plane}; k += {threads}) {{",
        "            const int at = slot + k;",
        f"            const int j1 = y0 - {r} + k / {mx}, j2 = x0 - {r} + k % {mx};",
        f"            if (j1 >= n1 + {r} || j2 >= n2 + {r}) continue;  // past the cells the last tiles read",
        *["            " + s for s in _middle_cell(walls, 3, written)],
        "            const int c = (i0 + g) * s0 + (i1 + g) * s1 + (i2 + g) * s2;",
        *["            " + s for s in step1],
        "        }",
        "        __syncthreads();",
        f"        const int zo = j0 - {r};",
        "        if (zo >= z0) {",
        *["            " + b for b in bases],
        f"            for (int q = threadIdx.x; q < {oy * ox}; q += {threads}) {{",
        f"                const int oy = q / {ox}, ox = q % {ox};",
        "                const int i0 = zo, i1 = y0 + oy, i2 = x0 + ox;",
        "                if (i1 >= n1 || i2 >= n2) continue;",
        "                const int c = (i0 + g) * s0 + (i1 + g) * s1 + (i2 + g) * s2;",
        *["                " + s for s in step2],
        "            }",
        "        }",
        "        __syncthreads();  // before the ring's oldest plane is overwritten",
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n", arrays


def launch_grid(shape: tuple[int, ...], tile: tuple[int, ...], threads: int = THREADS):
    """(blocks, threads) for `pair_source`'s (2D) or `pair3_source`'s (3D) kernel over the interior `shape`."""
    blocks = [-(-n // t) for n, t in zip(shape, tile)][::-1]
    return (blocks[0], blocks[1], blocks[2] if len(shape) == 3 else 1), (threads, 1, 1)
