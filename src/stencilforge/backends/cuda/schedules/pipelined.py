"""pipelined: the plane march with every plane copied by cp.async (sm_80+) into a ring of
shared-memory stages several planes ahead of its use."""

from __future__ import annotations

import math

import numpy as np

from ....errors import StencilforgeError
from ....plan import Sweep
from ..kernel import Kernel, Limits, Schedule, cell_expression, check_smem, kernel_params
from .march import (
    UNROLL,
    in_box,
    march_kernel,
    march_layout,
    march_setup,
    marches,
    plane_threads,
    queue_shift,
    resident_threads,
)

IN_FLIGHT = 48 * 1024  # bytes of copies `pipelined` keeps outstanding per SM: ~2x bandwidth x loaded DRAM latency
MAX_AHEAD = 8  # planes a `pipelined` block copies ahead of the one it consumes


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


def _pipeline_depth(stage_bytes: int, smem, blocks: int, planes: int, limits: Limits) -> int:
    """Planes a block copies ahead: its share of IN_FLIGHT, within its share of the SM's shared memory."""
    ahead = min(MAX_AHEAD, planes, max(2, math.ceil(IN_FLIGHT / blocks / stage_bytes)))
    share = min(limits.smem_per_block, limits.smem_per_sm // blocks - limits.reserved_per_block)
    while ahead > 2 and smem(ahead) > share:
        ahead -= 1
    while ahead > 1 and smem(ahead) > limits.smem_per_block:
        ahead -= 1
    return ahead


# One kernel's source emitted top to bottom, a branch per optional part; split, its order would be harder to follow
def pipelined_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str, limits: Limits, ahead: int | None = None) -> Kernel:  # noqa: C901
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
    lay = march_layout(sweep, tile)
    nd, chunk, plane_tile, radii, staged, points, star, threads, boxes = (
        lay.nd, lay.chunk, lay.plane_tile, lay.radii, lay.staged, lay.points, lay.star, lay.threads, lay.boxes
    )
    itemsize = np.dtype(dtype).itemsize
    cells = {f: math.prod(boxes[f]) for f in staged}
    lag = lay.column_radius
    blocks = max(1, resident_threads(nd, lag) // threads)  # an estimate: ptxas picks registers

    def smem(a: int) -> int:
        return ((a + lag + 1) * sum(cells.values()) + (a + 1) * threads * len(points)) * itemsize

    if ahead is None:
        stage = (sum(cells.values()) + threads * len(points)) * itemsize
        ahead = _pipeline_depth(stage, smem, blocks, chunk + 2 * lag, limits)
    if ahead < 1:
        raise StencilforgeError(f"strategy pipelined needs at least 1 plane in flight, got {ahead}")
    check_smem(smem(ahead), "pipelined", tile, limits)
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
        f'extern "C" __global__ void __launch_bounds__({threads}) {name}({kernel_params(sweep)})',
        "{",
        f"    // {ring} plane slots per stencil field, {ahead} planes in flight ahead of the one consumed",
        "    extern __shared__ real sf_smem[];",
    ]
    setup, slots = march_setup(nd, plane_tile, radii, boxes, star)
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
        lines.append(f"    const int c_{f} = {in_box(radii[f][1:], boxes[f], (0,) * nd)};")
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
                return f"sf_smem[nb_{f} + {in_box(radii[f][1:], boxes[f], o)}]"
            return f"sf_smem[{base(f, 'pr', threads, 'tid')}]"

        lines.append(f"{ind}    *out = {cell_expression(sweep, dtype, access)};")
        lines.append(f"{ind}}}")
        lines.append(f"{ind}out += s0;")
        lines.append(f"{ind}s = s == {ring - 1} ? 0 : s + 1;")
        if points:
            lines.append(f"{ind}pr = pr == {pring - 1} ? 0 : pr + 1;")

    # `unroll` steps per trip (one shift of the queues), then the remaining steps one at a time
    lines.append(f"    for (; k + {unroll} <= L; k += {unroll}) {{")
    for u in range(unroll):
        consume(u, "        ")
    lines += queue_shift(radii, unroll)
    lines.append("    }")
    if unroll > 1:
        lines.append("    for (; k < L; ++k) {")
        consume(0, "        ")
        lines += queue_shift(radii, 1)
        lines.append("    }")
    return march_kernel(name, lines, "pipelined", sweep, tile, smem(ahead))


def _tile(sweep: Sweep, dtype) -> tuple[int, ...]:
    """2D: H100 and H200 gain on rows of 512 (docs/performance.md). 3D: no other tile measured clearly faster on
    the H100 (commit 46ef0f7)."""
    if sweep.ndim == 2:
        return (64, 512)
    return (64, 4, 128) if sweep.radius <= 2 else (64, 16, 32)


SCHEDULE = Schedule("pipelined", pipelined_sweep, tile=_tile, threads=plane_threads, applies=marches)
