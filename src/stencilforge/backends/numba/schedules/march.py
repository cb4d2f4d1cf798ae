"""Several time steps of a 2D or 3D sweep in one pass over memory, marching planes (in 2D: rows) along axis 0
through a ring of them per middle state."""

from __future__ import annotations

from ....grid import Grid
from ....plan import Sweep
from ...base import fused_walls
from ..kernel import HEADER, WIDE, Schedule, iterates_within, prologue, row_views, shifted, sweep_expression, tag

FUSED_STEPS_3D = 4  # steps per pass of `fused_source` (cpu-fused-steps-2026-11-24.json)
FUSED_STEPS_2D = 6  # in 2D (cpu-march-2d-2026-11-25.json)
MARCH_TILE_CELLS = 32768  # cells of a plane per tile of the 3D march: its rings stay in L2 (cpu-march-tiles-2026-11-27.json)


def _step_views(sweep: Sweep, indent: str, at, u_at) -> list[str]:
    """Row view lines of one step of a fused kernel: u's view at offset o is u_at(o), any other field's at(field, o)."""
    (u,) = sweep.stencil_inputs
    return [f"{indent}{name} = {u_at(offset) if field == u else at(field, offset)}" for (field, offset), name in row_views(sweep).items()]


def _ring_slot(index: str, k: int, ring: int) -> str:
    """The slot in a ring of `ring` planes of plane `index` + k."""
    return f"({shifted(index, k)}) % {ring}" if k else f"{index} % {ring}"


def fused_source(sweep: Sweep, steps: int) -> str:
    """Source of a kernel writing `steps` steps of a 2D or 3D sweep in one pass over memory (out = S(...S(u))).

    Each parallel task takes a range of output planes along axis 0 (in 2D: rows) and marches through it,
    evaluating at each position plane q of the state after one step, plane q - r of the state after two, and so
    on, each middle state into a ring of 2r + 1 planes of its own, then output plane q - (steps - 1) r.
    In 3D a task takes a tile of rows along axis 1 too, about MARCH_TILE_CELLS cells of a plane (the tiles split
    among the threads first, then the planes), and evaluates of each middle state only the rows the steps after
    it read: the tile grown by (steps - s) r rows on each side for the state after s steps. So a task's rings
    stay in L2 whatever the plane's size, for 2 (steps - s) r rows evaluated twice (cpu-march-tiles-2026-11-27.json).

    The middle states' ghost cells are the walls of the steps in between, filled by the caller: the first's
    in out, later ones' in the arrays `fused_walls` names. The kernel reads only those of out, so its tasks'
    writes to out's interior never race with a read. Where those arrays are the input itself (walls that stay put,
    `with_walls`; out's ghost cells then hold the same walls) every middle state's ghost cells are the input's, and
    the kernel reads them from the plane it has just read, not from out or the input's plane again
    (cpu-march-still-2026-11-27.json). Every step uses the single-step kernel's row views and
    expression, so the result has the same bits as `steps` single steps of `row`'s kernel.

    A middle plane is evaluated by `middle` (one serial function for every level, so the compile does not
    grow with the steps): one loop over its interior rows as a flat range (the ghost columns it passes are
    scratch; in 2D the row's interior), then its ghost rows and columns from the plane of the array that holds that state's walls
    (the first middle state's: out; later ones': `fused_walls`; where those are the input, `still`, from the plane
    of the state before, which is in cache and holds the input's). A middle plane outside the interior is that
    array's plane (`still`: the input's). Middle planes within (steps - 1) r of the ends of a task's range are evaluated by two tasks.
    """
    (u,) = sweep.stencil_inputs
    nd = sweep.ndim
    r = sweep.radius
    ring = 2 * r + 1
    reach = (steps - 1) * r
    carriers = tuple(fused_walls(s, sweep.out) for s in range(2, steps))
    lines, cnames, views = prologue(sweep, carriers)
    args = lines[0][len("@JIT\ndef kernel("):-len("):")]
    value = sweep_expression(sweep, cnames, views)
    flat_planes = sorted({(field, o[0]) for field, o in views})
    plane_args = [f"x_{field}_{tag(k)}" for field, k in flat_planes]
    u_planes = sorted({o[0] for (field, o) in views if field == u})

    def cols(o: int) -> str:
        lo = shifted("g", o)
        return f"{lo}:{lo} + m"

    def rows(o, i: str) -> list[str]:
        """A 3D plane's row index at offset o from row i; a 2D march's planes are rows, which have none."""
        return [shifted(i, o[1])] if nd == 3 else []

    def at(field: str, o) -> str:
        return f"f_{field}[{', '.join([shifted('z', o[0]), *rows(o, 'i'), cols(o[-1])])}]"

    def flat(field: str, o) -> str:
        shifts = ((o[1], " * wd"), (o[2], "")) if nd == 3 else ((o[1], ""),)
        start = "base" + "".join(f" {'+' if v > 0 else '-'} {abs(v)}{unit}" for v, unit in shifts if v)
        return f"x_{field}_{tag(o[0])}[{start}:{start} + n]"

    if nd == 3:
        copy = ["for i in range(w.shape[0]):", "    for j in range(w.shape[1]):", "        w[i, j] = a[i, j]"]
        extent = ["    wd = w.shape[1]", "    n1 = w.shape[0] - 2 * g", "    m = wd - 2 * g",
                  "    ya = max(ylo, g)", "    yb = min(yhi, g + n1)", "    base = ya * wd + g",
                  "    n = (yb - ya - 1) * wd + m", *[f"    {a} = {a}.reshape(-1)" for a in plane_args]]
        store = "w.reshape(-1)"
        copy_ghosts = [  # the rows ylo..yhi the later steps read: ghost rows whole, interior rows' ghost columns
            "for i in range(max(ylo, 0), min(yhi, w.shape[0])):",
            "    if i < g or i >= g + n1:",
            "        for j in range(wd):",
            "            w[i, j] = ghosts[i, j]",
            "    else:",
            "        for j in range(g):",
            "            w[i, j] = ghosts[i, j]",
            "            w[i, g + m + j] = ghosts[i, g + m + j]",
        ]
    else:
        copy = ["for j in range(w.shape[0]):", "    w[j] = a[j]"]
        extent = ["    m = w.shape[0] - 2 * g", "    base = g", "    n = m"]
        store = "w"
        copy_ghosts = ["for j in range(g):", "    w[j] = ghosts[j]", "    w[g + m + j] = ghosts[g + m + j]"]
    middle = [
        "@SERIAL\ndef copy_plane(w, a):",
        *[f"    {line}" for line in copy],
        "",
        "",
        f"@SERIAL\ndef middle(w, {', '.join(plane_args)}, ghosts, coef, g{', ylo, yhi' if nd == 3 else ''}):",
        f"    {WIDE}",
        *lines[1:1 + len(cnames)],
        *extent,
        *_step_views(sweep, "    ", flat, lambda o: flat(u, o)),
        f"    o = {store}[base:base + n]",
        "    for j in range(n):",
        f"        o[j] = {value}",
        *[f"    {line}" for line in copy_ghosts],
    ]

    def level(s: int) -> list[str]:
        """Plane p of the state after s steps, into mid[s - 1]: from u's planes (s = 1) or mid[s - 2]."""
        lo, hi = f"max(z0 - {reach - (s - 1) * r}, g - {r})", f"min(z1 + {reach - (s - 1) * r}, g + n0 + {r})"
        source = {(field, k): f"f_{field}[{shifted('p', k)}]" for field, k in flat_planes}
        if s > 1:
            source.update({(u, k): f"mid[{s - 2}, {_ring_slot('p', k, ring)}]" for k in u_planes})
        holder = "out" if s == 1 else fused_walls(s, sweep.out)
        centre = f"f_{u}[p]" if s == 1 else f"mid[{s - 2}, p % {ring}]"  # the state before's plane p: u's ghosts where `still`
        return [
            f"        p = {shifted('q', -(s - 1) * r)}",
            f"        if p >= {lo} and p < {hi}:",
            f"            w = mid[{s - 1}, p % {ring}]",
            "            if p < g or p >= g + n0:",
            f"                copy_plane(w, f_{u}[p] if still else {holder}[p])",
            "            else:",
            f"                middle(w, {', '.join(source[key] for key in flat_planes)}, {centre} if still else {holder}[p], coef, g"
            f"{f', y0 - {(steps - s) * r}, y1 + {(steps - s) * r}' if nd == 3 else ''})",
        ]

    last = "            " + ("    " if nd == 3 else "")  # the output plane's rows (3D), or the output row (2D)
    march = [
        f"@SERIAL\ndef march({args}, z0, z1, still{', y0, y1, ny' if nd == 3 else ''}):",
        f"    {WIDE}",
        *lines[1:],
        "    n0 = out.shape[0] - 2 * g",
        *(["    n1 = out.shape[1] - 2 * g"] if nd == 3 else []),
        f"    m = out.shape[{nd - 1}] - 2 * g",
        f"    mid = np.empty(({steps - 1}, {ring}, {', '.join(f'out.shape[{a}]' for a in range(1, nd))}), dtype=out.dtype)",
        f"    for q in range(z0 - {reach}, z1 + {reach}):",
        *[line for s in range(1, steps) for line in level(s)],
        f"        z = q - {reach}",
        "        if z >= z0:",
        *[f"            w_{tag(k)} = mid[{steps - 2}, {_ring_slot('z', k, ring)}]" for k in u_planes],
        *(["            for i in range(y0, y1):"] if nd == 3 else []),
        *_step_views(sweep, last, at, lambda o: f"w_{tag(o[0])}[{', '.join([*rows(o, 'i'), cols(o[-1])])}]"),
        f"{last}o = out[{', '.join(['z', *(['i'] if nd == 3 else []), 'g:g + m'])}]",
        f"{last}for j in range(m):",
        f"{last}    o[j] = {value}",
    ]
    kernel = [f"@JIT\ndef kernel({args}, nt):", "    n0 = out.shape[0] - 2 * g"]
    if nd == 3:  # ny tiles of rows, each split into nz ranges of planes
        kernel += ["    n1 = out.shape[1] - 2 * g", f"    ny = max(1, n1 // max(1, {MARCH_TILE_CELLS} // out.shape[2]))",
                   "    nz = (nt + ny - 1) // ny"]
    else:
        kernel += ["    ny = 1", "    nz = nt"]
    kernel += ["    span = (n0 + nz - 1) // nz", "    tasks = (n0 + span - 1) // span"]
    tile = ["        yt = t - zt * ny"] if nd == 3 else []
    tile_args = ", g + yt * n1 // ny, g + (yt + 1) * n1 // ny, ny" if nd == 3 else ""
    same = [f"{c}.ctypes.data == f_{u}.ctypes.data" for c in carriers]
    kernel += [
        f"    still = {' and '.join(same) if carriers else 'False'}",
        "    for t in numba.prange(tasks * ny):",
        f"        {WIDE}",
        "        zt = t // ny",  # not divmod: in a prange body it types the index's quotient as a float
        *tile,
        "        z0 = g + zt * span",
        f"        march({args}, z0, min(g + n0, z0 + span), still{tile_args})",
    ]
    parts = ["\n".join(middle), "\n".join(march), "\n".join(kernel)]
    return HEADER + "\n\n\n".join(parts) + "\n"


def applies(sweep: Sweep, grid: Grid) -> str | None:
    """2D and 3D sweeps of one field (`Sweep.iterates_one_field`) whose row views fit one loop and whose reach the
    ghost layer holds."""
    if grid.ndim not in (2, 3):
        return f"numba's march takes 2D and 3D sweeps, not {grid.ndim}D"
    return iterates_within(sweep, grid, "march")


SCHEDULE = Schedule("march", lambda sweep, grid, steps: fused_source(sweep, steps), applies,
                    lambda grid: FUSED_STEPS_2D if grid.ndim == 2 else FUSED_STEPS_3D)
