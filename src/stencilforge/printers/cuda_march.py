"""CUDA C for one 3D pass marching along z: each thread walks its (y, x) column through a chunk of planes.

The values a thread reads straight above and below its own cell (offsets
(dz, 0, 0)) stay in registers as it moves from plane to plane, so each of
those planes is loaded once per column rather than once per offset; other
neighbours come through L1. The statements per cell are `cuda.pass_source`'s,
so both schedules give the same bits.
"""

from __future__ import annotations

from typing import Mapping

from ..ir.analysis import Pass, accesses, slot_name
from ..ir.nodes import Access, Constant
from .cuda import OPTIONS, _image_stores, _Printer

__all__ = ["OPTIONS", "BLOCK", "PLANES", "march_source", "launch_grid"]

BLOCK = (32, 8)  # threads along x, y
PLANES = 32  # planes a block marches through


def _tag(d: int) -> str:
    return f"m{-d}" if d < 0 else f"p{d}"


class _MarchPrinter(_Printer):
    """Reads at (dz, 0, 0) of a queued array come from the thread's registers q_{slot}_{dz}."""

    def __init__(self, dtype, queues: dict[str, tuple[int, int]]):
        super().__init__(3, dtype)
        self.queues = queues

    def access(self, node: Access) -> str:
        slot = slot_name((node.field.name, node.level))
        dz, dy, dx = node.offset
        if slot in self.queues and not dy and not dx:
            self.arrays.setdefault(slot)
            return f"q_{slot}_{_tag(dz)}"
        return super().access(node)


def march_source(p: Pass, dtype, constants: tuple[Constant, ...], block: tuple[int, int] = BLOCK, planes: int = PLANES,
                 wide_index: bool = True, images: Mapping[str, tuple[str, ...]] | None = None,
                 name: str = "sf_pass") -> tuple[str, tuple[str, ...]]:
    """(source, array argument order) of the pass's kernel, with `cuda.pass_source`'s arguments.
    Launch with `launch_grid`."""
    written = {slot_name(s) for s in p.writes}
    queues: dict[str, tuple[int, int]] = {}
    for eq in p.equations:
        for a in accesses(eq.expr):
            slot = slot_name((a.field.name, a.level))
            if slot in written or a.offset[1:] != (0, 0):
                continue
            lo, hi = queues.get(slot, (0, 0))
            queues[slot] = (min(lo, a.offset[0]), max(hi, a.offset[0]))
    pr = _MarchPrinter(dtype, queues)
    T, Int = pr.T, "long long" if wide_index else "int"
    body = []
    for k, eq in enumerate(p.equations):
        slot = slot_name((eq.target.field.name, eq.target.level))
        body += [f"const {T} e{k} = {pr(eq.expr)};", f"a_{slot}[c] = e{k};"]
        if images and slot in images:
            body += ["if (near) {"] + ["    " + s for s in _image_stores(3, images[slot], f"a_{slot}", f"e{k}")] + ["}"]
        pr.locals[slot] = f"e{k}"
    arrays = tuple(dict.fromkeys([slot_name(s) for s in p.writes] + list(pr.arrays)))
    args = [f"{T}* __restrict__ a_{s}" if s in written else f"const {T}* __restrict__ a_{s}" for s in arrays]
    args += [f"const {T} p_{c.name}" for c in constants] + [f"const {T} t"]
    args += [f"const double lo{a}, const double h{a}, const long long n{a}_" for a in range(3)] + ["const int g"]
    prime, load, shift = [], [], []
    for slot, (lo, hi) in queues.items():
        prime += [f"{T} q_{slot}_{_tag(d)} = a_{slot}[c + ({d}) * s0];" for d in range(lo, hi)]
        prime.append(f"{T} q_{slot}_{_tag(hi)};")
        load.append(f"q_{slot}_{_tag(hi)} = a_{slot}[c + ({hi}) * s0];")
        shift += [f"q_{slot}_{_tag(d)} = q_{slot}_{_tag(d + 1)};" for d in range(lo, hi)]
    bx, by = block
    lines = [
        f'extern "C" __global__ void __launch_bounds__({bx * by}) {name}({", ".join(args)})',
        "{",
        *[f"    const {Int} n{a} = ({Int})n{a}_;" for a in range(3)],
        f"    const {Int} i2 = ({Int})blockIdx.x * {bx} + threadIdx.x;",
        f"    const {Int} i1 = ({Int})blockIdx.y * {by} + threadIdx.y;",
        "    if (i1 >= n1 || i2 >= n2) return;",
        f"    const {Int} z0 = ({Int})blockIdx.z * {planes};",
        f"    const {Int} z1 = min(z0 + {planes}, n0);",
        f"    const {Int} s2 = 1;",
        f"    const {Int} s1 = n2 + 2 * g;",
        f"    const {Int} s0 = s1 * (n1 + 2 * g);",
        "    const bool near = z0 < g || z1 > n0 - g"
        f" || ({Int})blockIdx.y * {by} < g || (({Int})blockIdx.y + 1) * {by} > n1 - g"
        f" || ({Int})blockIdx.x * {bx} < g || (({Int})blockIdx.x + 1) * {bx} > n2 - g;",
        f"    {Int} c = (z0 + g) * s0 + (i1 + g) * s1 + (i2 + g) * s2;",
        *["    " + s for s in prime],
        f"    for ({Int} i0 = z0; i0 < z1; ++i0, c += s0) {{",
        *["        " + s for s in load + body + shift],
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n", arrays


def launch_grid(shape: tuple[int, ...], block: tuple[int, int] = BLOCK, planes: int = PLANES):
    """(blocks, threads) for `march_source`'s kernel over the interior `shape` (z, y, x)."""
    bx, by = block
    return (-(-shape[2] // bx), -(-shape[1] // by), -(-shape[0] // planes)), (bx, by, 1)
