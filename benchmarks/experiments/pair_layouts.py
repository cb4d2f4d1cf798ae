"""Round 11 (docs/performance.md): the poisson2d fused pair lost 20 points in the bench once fields got
rows on cache lines (CudaBackend.field), while jacobi2d's and heat2d's pairs gained. Which property of the
layout does it: the pitch, the line alignment, or where the three buffers lie relative to each other?

Each layout holds the same random cells; every output is compared bit for bit with the contiguous one
before timing (cuda_bench.timed: median of 7 x 10 launches, CUDA events), 16384^2 float32.

    PYTHONPATH=src python3 benchmarks/experiments/pair_layouts.py
"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge.backends.cuda import CudaBackend
from stencilforge.grid import Grid
from stencilforge.problems import poisson2d
from stencilforge.stencil import Stencil

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")
grid = Grid((16384, 16384), (1 / 16385, 1 / 16385), np.dtype(np.float32), 1, (0.0, 0.0))
lap = Stencil.laplacian(2, 1, grid.spacing)
rows_n, n = grid.padded_shape


def layout(host, pitch, first, spacer):
    """Views of `host`'s arrays with rows `pitch` apart, the first cell `first` floats into its buffer,
    and `spacer` bytes allocated (and kept) before each buffer."""
    keep, out = [], {}
    for name, a in host.items():
        if spacer:
            keep.append(cp.empty(spacer, dtype=cp.uint8))
        buf = cp.empty(rows_n * pitch + first, dtype=cp.float32)
        view = buf[first:].reshape(rows_n, pitch)[:, :n]
        view[...] = a
        out[name] = view
    return out, keep


be = CudaBackend()
for label, sweep in (("jacobi2d", poisson2d.jacobi_sweep(lap, False)), ("poisson2d", poisson2d.jacobi_sweep(lap, True))):
    rng = cp.random.default_rng(3)
    host = {k: rng.uniform(-1, 1, grid.padded_shape, dtype=cp.float32) for k in sweep.inputs + (sweep.out,)}
    bpc = sweep.bytes_per_cell(4)
    pair = be.sweep_pair(sweep, grid)
    rows = CudaBackend(strategy="rows").sweep(sweep, grid)
    ref = None
    for name, pitch, first, spacer in (
        ("contiguous", n, 0, 0),
        ("field (lines, pitch 16416)", 16416, 31, 0),
        ("lines, pitch 16448", 16448, 31, 0),
        ("lines, pitch 16480", 16480, 31, 0),
        ("pitch 16416, first cell 0", 16416, 0, 0),
        ("contiguous, 1 MiB spacers", n, 0, 1 << 20),
        ("field, 1 MiB spacers", 16416, 31, 1 << 20),
        ("field, 64 KiB spacers", 16416, 31, 1 << 16),
        ("contiguous again", n, 0, 0),
    ):
        f, keep = layout(host, pitch, first, spacer)
        pair(f)
        out = cp.asnumpy(f[sweep.out])
        ref = out if ref is None else ref
        same = np.array_equal(out, ref)
        for label2, fn, steps in (("pair", pair, 2), ("rows", rows, 1)):
            sec = timed(lambda: fn(f)) / steps
            pct = 100 * grid.cells * bpc / sec / 1e9 / ceiling
            gaps = [(f[b].data.ptr - f[a].data.ptr) % (1 << 21) for a, b in zip(list(f), list(f)[1:])]
            print(f"{label:9s} {name:28s} {label2}  {sec * 1e3:7.4f} ms/step {pct:6.1f}%  buffer gaps mod 2 MiB {gaps}"
                  f"  {'same bits' if same else 'DIFFERENT'}", flush=True)
        del f, keep
        cp.get_default_memory_pool().free_all_blocks()
