"""What the marching schedules (streaming, streaming_vec, streaming_l1, pipelined) share.

2.5D: a block covering a tile of the last ndim-1 axes marches along axis 0;
each thread keeps the 2r+1 values of its column in registers (a queue shifted
once per plane) and the current plane, with its in-plane halo, sits in shared
memory (streaming_l1: read through L1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ....errors import StencilforgeError
from ....plan import Sweep
from ..kernel import STATIC_SMEM_LIMIT, Kernel, cell_expression, field_radii, is_star, strides, sweep_args

UNROLL = 4  # planes (streaming) or rows (pencil along y) whose loads a thread issues together


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
class March:
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


def march_layout(sweep: Sweep, tile: tuple[int, ...]) -> March:
    reason = streaming_applicable(sweep)
    if reason:
        raise StencilforgeError(reason)
    chunk, plane_tile = tile[0], tuple(tile[1:])
    radii = field_radii(sweep)
    staged = list(radii)
    return March(
        nd=sweep.ndim,
        chunk=chunk,
        plane_tile=plane_tile,
        radii=radii,
        staged=staged,
        points=[n for n in sweep.inputs if n not in radii],
        star=is_star(sweep, staged),
        threads=math.prod(plane_tile),
        boxes={f: tuple(t + 2 * r for t, r in zip(plane_tile, radii[f][1:])) for f in staged},
        column_radius=max((r[0] for r in radii.values()), default=0),
    )


def halo_cells(plane_tile, r, star: bool) -> list[tuple[str, int, int, int, int]]:
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


def march_setup(nd: int, plane_tile, radii, boxes, star: bool) -> tuple[list[str], dict[str, int]]:
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
            *("    " + s for s in strides(3)),
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
            *("    " + s for s in strides(2)),
            "    const long long col = i1 + g;",
        ]
    slot_count = {}
    for f in radii:
        r = radii[f][1:]
        box = boxes[f]
        rects = halo_cells(plane_tile, r, star)
        total = sum(al * bl for _, _, al, _, bl in rects)
        slot_count[f] = math.ceil(total / threads)
        in_range = f"i1 < n1 + {r[0]} && i2 < n2 + {r[1]}" if nd == 3 else f"i1 < n1 + {r[0]}"
        lines.append(f"    const bool edge_{f} = !active && {in_range};")
        for m in range(slot_count[f]):
            if nd == 3:
                place = place_3d(f, m, r, total, box[1], 1)
            else:
                place = [
                    f"        const int j1 = b1 + b - {r[0]};",
                    f"        load_{f}_{m} = h < {total} && j1 < n1 + {r[0]};",
                    f"        sidx_{f}_{m} = b;",
                    f"        goff_{f}_{m} = j1 + g;",
                ]
            lines += halo_slot(f, m, threads, rects, place)
    return lines, slot_count


def halo_slot(f: str, m: int, threads: int, rects, place: list[str]) -> list[str]:
    """Halo slot m of field f: the cell (a, b) of the halo rectangles that thread tid copies, then
    `place`, which turns it into the slot's shared index, global offset and in-range flag."""
    lines = [f"    int sidx_{f}_{m} = 0; long long goff_{f}_{m} = 0; bool load_{f}_{m} = false;", "    {",
             f"        int h = tid + {m * threads}, a = 0, b = 0;"]
    kw, start = "if", 0
    for _, a0, al, bs, bl in rects:
        lines.append(f"        {kw} (h < {start + al * bl}) {{ const int k = h - {start}; a = {a0} + k / {bl}; b = {bs} + k % {bl}; }}")
        kw, start = "else if", start + al * bl
    return lines + place + ["    }"]


def place_3d(f: str, m: int, r, total: int, row: int, vector: int) -> list[str]:
    """`halo_slot`'s placement in a 3D plane whose x is counted in vectors of `vector` cells."""
    b, s1, x = ("b", "s1", "(j2 + g)") if vector == 1 else (f"{vector} * b", "s1v", f"(j2 + g) / {vector}")
    return [
        f"        const int j1 = b1 + a - {r[0]}, j2 = b2 + {b} - {r[1]};",
        f"        load_{f}_{m} = h < {total} && j1 < n1 + {r[0]} && j2 < n2 + {r[1]};",
        f"        sidx_{f}_{m} = a * {row} + b;",
        f"        goff_{f}_{m} = ((long long)j1 + g) * {s1} + {x};",
    ]


def in_box(r, box, o) -> str:
    """Index, in a plane box of in-plane halo r, of the cell at offset o (axis-0 part ignored) from the thread's own."""
    if len(box) == 2:
        return f"(ty + {r[0] + o[1]}) * {box[1]} + tx + {r[1] + o[2]}"
    return f"tx + {r[0] + o[1]}"


def resident_threads(ndim: int, column_radius: int) -> int:
    """Threads per SM that streaming's __launch_bounds__ asks for, i.e. its register cap.

    Measured on the H100 (docs/performance.md): 1536 for heat3d (40 registers),
    1280 for heat2d; a radius-8 column needs its 64 registers (1536 spills).
    """
    if column_radius > 4:
        return 1024
    return 1536 if ndim == 3 else 1280


def queue_shift(radii: dict, by: int) -> list[str]:
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
        lines.append(f"        {guard}f_{sweep.out}[p + col + {k} * s0] = {cell_expression(sweep, dtype, access)};")
    return lines + queue_shift(radii, unroll) + ["    }"]


def march_kernel(name: str, lines: list[str], strategy: str, sweep: Sweep, tile, smem: int = 0) -> Kernel:
    """A marching kernel: the block is the plane tile (x fastest) and covers `chunk` planes."""
    plane_tile = tuple(tile[1:])
    block = (plane_tile[-1], plane_tile[0] if sweep.ndim == 3 else 1, 1)
    source = "\n".join(lines + ["}"]) + "\n"
    return Kernel(name, source, strategy, tile, block, tuple(tile), sweep_args(sweep), smem)


def fit_unroll(unroll: int, plane_bytes: int, strategy: str, tile) -> int:
    """Planes per group that fit twice (double-buffered) in static shared memory: halved until they do."""
    while unroll > 1 and 2 * unroll * plane_bytes > STATIC_SMEM_LIMIT:
        unroll //= 2
    if 2 * unroll * plane_bytes > STATIC_SMEM_LIMIT:
        raise StencilforgeError(
            f"strategy {strategy} with tile {tuple(tile)} needs {2 * plane_bytes} bytes of shared memory per block "
            f"(limit {STATIC_SMEM_LIMIT}); choose a smaller tile"
        )
    return unroll


def _prefetch(lay: March, slots: dict, unroll: int, zs: str, ps: str, indent: str, ptr: str = "f", s0: str = "s0") -> list[str]:
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


def march_head(lay: March, slots: dict, unroll: int, typ: str, zero: str, ptr: str, s0: str, axis: str, centre: dict) -> list[str]:
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


def marches(sweep: Sweep, dtype) -> str | None:
    """A marching schedule's `applies`: `streaming_applicable`."""
    return streaming_applicable(sweep)


def plane_threads(sweep: Sweep, dtype, tile) -> int:
    """Threads of a marching block: one per cell of its plane tile (tile[1:])."""
    return math.prod(tile[1:])
