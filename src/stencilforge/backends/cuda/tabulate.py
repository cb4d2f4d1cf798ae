"""Initial values and exact solutions evaluated on the device by one generated kernel per expression.

Evaluated as array operations, sin(x) sin(y) sin(z) on a 512³ grid makes
float64 temporaries of 1 GB each and one CuPy launch per operation; this kernel
writes each cell's value once, in the dtype it is kept in, with the oracle's
float64 operations (no contracted multiply-adds), so the values are the ones
the array operations gave.
"""

from __future__ import annotations

import functools

import numpy as np

from ...grid import Grid
from ...ir.nodes import Constant, Expr, walk
from ...printers.cuda import tabulate_source

THREADS = 256


@functools.lru_cache(maxsize=64)
def _kernel(source: str):
    import cupy as cp

    return cp.RawKernel(source, "sf_tabulate", options=("--fmad=false",))


def tabulate(expr: Expr, lattice: Grid, dtype, params, t: float, ghosts: bool):
    """The expression at every cell of the lattice's interior (or, with `ghosts`, of the whole padded
    lattice) as a CuPy array of `dtype`; a constant's value comes from `params`, else the expression's."""
    import cupy as cp

    source, constants = tabulate_source(expr, lattice.ndim, dtype)
    g = lattice.ghost if ghosts else 0
    out = cp.empty(lattice.padded_shape if ghosts else lattice.shape, dtype=dtype)
    if out.size == 0:
        return out
    params = params or {}
    values = {n.name: params.get(n.name, n.value) for n in walk(expr) if isinstance(n, Constant)}
    args = [out, np.int64(out.size)]
    args += [np.int64(n) for n in out.shape[1:]]
    args += [np.int64(lattice.first_index(a) - g) for a in range(lattice.ndim)]
    args += [np.float64(v) for v in lattice.lower] + [np.float64(h) for h in lattice.spacing]
    args += [np.float64(t)] + [np.float64(values[name]) for name in constants]
    blocks = min(-(-out.size // THREADS), 65535)
    _kernel(source)((blocks,), (THREADS,), tuple(args))
    return out

