"""naive: one thread per interior cell, linear indexing, every read through L1/L2."""

from __future__ import annotations

import math

from ....plan import Sweep
from ..kernel import (
    Kernel,
    Schedule,
    at_offset,
    block_shape,
    cell_expression,
    centre_index,
    index_setup,
    kernel_params,
    spatial,
    strides,
    sweep_args,
)


def naive_sweep(sweep: Sweep, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    nd = sweep.ndim
    threads = math.prod(tile)
    out = f"f_{sweep.out}"
    expr = cell_expression(sweep, dtype, lambda f, o: f"f_{f}[{at_offset('c', o)}]")
    inside = " && ".join(f"i{a} < n{a}" for a in range(nd))
    body = [
        f'extern "C" __global__ void __launch_bounds__({threads}) {name}({kernel_params(sweep)})',
        "{",
        *("    " + s for s in index_setup(nd, tile)),
        f"    if (!({inside})) return;",
        *("    " + s for s in strides(nd)),
        "    " + centre_index(nd),
        f"    {out}[c] = {expr};",
        "}",
    ]
    return Kernel(name, "\n".join(body) + "\n", "naive", tile, block_shape(tile), tile, sweep_args(sweep))


SCHEDULE = Schedule("naive", lambda sweep, dtype, tile, name, limits: naive_sweep(sweep, dtype, tile, name),
                    tile=lambda sweep, dtype: (8, 32) if sweep.ndim == 2 else (2, 4, 32),
                    threads=lambda sweep, dtype, tile: math.prod(tile), applies=spatial)
