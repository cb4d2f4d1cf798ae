"""tiled: a block stages a box of each stencil field (tile + halo) in shared memory, then every
thread evaluates its own cell from it."""

from __future__ import annotations

import math

import numpy as np

from ....plan import Sweep
from ..kernel import (
    Kernel,
    Limits,
    Schedule,
    at_offset,
    block_shape,
    cell_expression,
    centre_index,
    check_smem,
    field_radii,
    is_star,
    kernel_params,
    spatial,
    strides,
    sweep_args,
)


def tiled_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str, limits: Limits) -> Kernel:
    """Each stencil field's tile+halo box staged in (dynamic) shared memory, then one cell per thread."""
    nd = sweep.ndim
    radii = field_radii(sweep)
    staged = list(radii)
    star = is_star(sweep, staged)
    threads = math.prod(tile)
    itemsize = np.dtype(dtype).itemsize
    boxes = {f: tuple(t + 2 * r for t, r in zip(tile, radii[f])) for f in staged}
    offsets, total = {}, 0
    for f in staged:
        offsets[f] = total
        total += math.prod(boxes[f])
    smem = total * itemsize
    check_smem(smem, "tiled", tile, limits)
    lines = [
        f'extern "C" __global__ void __launch_bounds__({threads}) {name}({kernel_params(sweep)})',
        "{",
        "    extern __shared__ real sf_smem[];",
    ]
    axes = ["x", "y", "z"]
    lines += [f"    const int t{a} = threadIdx.{axes[nd - 1 - a]};" for a in range(nd)]
    lines += [f"    const int b{a} = blockIdx.{axes[nd - 1 - a]} * {tile[a]};" for a in range(nd)]
    lines += [f"    const int i{a} = b{a} + t{a};" for a in range(nd)]
    lines += ["    " + s for s in strides(nd)]
    tid = " + ".join(
        f"t{a}" + "".join(f" * {tile[b]}" for b in range(a + 1, nd)) for a in range(nd)
    )
    lines.append(f"    const int tid = {tid};")
    for f in staged:
        box, r = boxes[f], radii[f]
        lines.append(f"    real* s_{f} = sf_smem + {offsets[f]};")
        lines.append(f"    for (int t = tid; t < {math.prod(box)}; t += {threads}) {{")
        rest = "t"
        for a in range(nd):
            inner = math.prod(box[a + 1 :])
            if a < nd - 1:
                lines.append(f"        const int a{a} = {rest} / {inner};")
                lines.append(f"        const int m{a} = {rest} - a{a} * {inner};")
                rest = f"m{a}"
            else:
                lines.append(f"        const int a{a} = {rest};")
        lines += [f"        const int j{a} = b{a} + a{a} - {r[a]};" for a in range(nd)]
        conds = [f"j{a} < n{a} + {r[a]}" for a in range(nd)]
        if star and nd > 1:
            outside = " + ".join(f"(a{a} < {r[a]} || a{a} >= {r[a] + tile[a]})" for a in range(nd))
            conds.append(f"({outside}) <= 1")
        idx = " + ".join(
            [f"((long long)j{a} + g) * s{a}" for a in range(nd - 1)] + [f"(j{nd - 1} + g)"]
        )
        lines.append(f"        if ({' && '.join(conds)}) s_{f}[t] = f_{f}[{idx}];")
        lines.append("    }")
    lines.append("    __syncthreads();")
    inside = " && ".join(f"i{a} < n{a}" for a in range(nd))
    lines.append(f"    if (!({inside})) return;")
    lines.append("    " + centre_index(nd))

    def access(f, o):
        if f in radii:
            box, r = boxes[f], radii[f]
            parts = []
            for a in range(nd):
                stride = math.prod(box[a + 1 :])
                pos = f"(t{a} + {r[a] + o[a]})"
                parts.append(pos if stride == 1 else f"{pos} * {stride}")
            return f"s_{f}[{' + '.join(parts)}]"
        return f"f_{f}[{at_offset('c', o)}]"

    lines.append(f"    f_{sweep.out}[c] = {cell_expression(sweep, dtype, access)};")
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "tiled", tile, block_shape(tile), tile, sweep_args(sweep), smem)


SCHEDULE = Schedule("tiled", tiled_sweep, tile=lambda sweep, dtype: (16, 32) if sweep.ndim == 2 else (4, 8, 32),
                    threads=lambda sweep, dtype, tile: math.prod(tile), applies=spatial)
