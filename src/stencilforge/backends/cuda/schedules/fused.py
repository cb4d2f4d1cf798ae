"""Several time steps of a sweep in one pass (temporal blocking), bitwise the single steps.

2D: a thread holds a column of rows, later steps take x neighbours from the
lanes beside it by warp shuffles; 3D: two steps, the block marching along z
with queues of planes of u and of the middle state in registers.
"""

from __future__ import annotations

from ....errors import StencilforgeError
from ....plan import Sweep
from ..kernel import MAX_THREADS, Fused, Kernel, cell_expression, is_star, kernel_params, strides, sweep_args

PAIR_TILE = {
    2: (8, 256),  # rows per thread x threads
    3: (32, 2, 128),  # planes per block x rows per thread x threads, warps stacked along y
}
PAIR_AHEAD = 1  # planes of u the 3D pair loads ahead of use (measured against 0 and 2 on the H100 at commit 483c3e5)
FUSED_REACH_2D = 8  # (steps - 1) * radius: a warp keeps 32 - 2 (steps - 1) r useful lanes, at least half of them
PAIR_RADIUS_3D = 2  # (2r + 1)(R + 4r) values of u per thread


def fused_applicable(sweep: Sweep, steps: int = 2) -> str | None:
    """Why `steps` sweeps cannot be fused into one `fused_sweep` pass (None when they can)."""
    if sweep.ndim not in (2, 3):
        return "fused steps are generated for 2D and 3D sweeps only"
    if not sweep.iterates_one_field:
        return "fused steps need exactly one field read at neighbouring cells, written out of place"
    if not is_star(sweep, sweep.stencil_inputs):
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
        f'extern "C" __global__ void __launch_bounds__({bounds}) {name}({kernel_params(sweep, carriers)})',
        "{",
        "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;",
        f"    const int i1 = blockIdx.x * {cover} + warp * {useful} + lane - {reach};",
        f"    const int y0 = blockIdx.y * {rows};",
        *("    " + s for s in strides(2)),
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
    return Kernel(name, "\n".join(lines) + "\n", label, tile, (threads, 1, 1), (rows, cover), sweep_args(sweep) + carriers)


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
            value = cell_expression(sweep, dtype, operand)
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
        store = f"f_{sweep.out}[c + {j} * s0] = {cell_expression(sweep, dtype, last)};"
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
        f'extern "C" __global__ void __launch_bounds__({threads}) {name}({kernel_params(sweep)})',
        "{",
        "    const int lane = threadIdx.x;",
        f"    const int i2 = blockIdx.x * {useful} + lane - {r};",
        f"    const int y0 = (blockIdx.y * {warps} + threadIdx.y) * {rows};",
        "    if (y0 >= n1) return;  // the whole warp: its shuffles stay complete",
        f"    const int z0 = blockIdx.z * {planes};",
        f"    const int zend = min(z0 + {planes}, n0);",
        *("    " + x for x in strides(3)),
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
    return Kernel(name, "\n".join(lines) + "\n", "march, two steps", tile, (32, warps, 1), cover, sweep_args(sweep))


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
        value = cell_expression(sweep, dtype, first)
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
        lines.append(f"        if ({write}) {out}[o + {j} * s1] = {cell_expression(sweep, dtype, second)};")
    lines.append("    }")
    lines += [f"    u{k}_{_tag(j)} = u{k + 1}_{_tag(j)};" for k in range(newest) for j in u_rows]
    lines += [f"    w{k}_{_tag(j)} = w{k + 1}_{_tag(j)};" for k in range(2 * r) for j in w_rows]
    lines.append("}")
    return lines


SCHEDULE = Fused("fused", fused_sweep, fused_applicable)
