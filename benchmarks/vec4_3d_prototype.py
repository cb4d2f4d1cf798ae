"""Prototype: heat3d's 7-point sweep with each thread on 4 consecutive x cells (16-byte loads of its row and of
the rows above/below and in front/behind), a column of R rows and Z planes per thread, the x neighbours of the
vector as two scalar loads. Expected (written before the run): more bytes in flight per thread lift the H200
from rows' 68% toward 78% of copy; the H100 (rows 81%) gains 1-2 points. Bitwise against `rows`, NaN-poisoned.

    python3 benchmarks/vec4_3d_prototype.py --out FILE
"""

from __future__ import annotations

import argparse
import json

import cupy as cp
import numpy as np

from cuda_bench import copy_bandwidth, timed
from stencilforge import problems
from stencilforge.backends.cuda import CudaBackend
from stencilforge.backends.cuda.kernel import Kernel, cell_expression, kernel_params, strides, sweep_args

COMPONENTS = "xyzw"


def vec4_sweep(sweep, dtype, tile, name):
    z_rows, y_rows, tx = tile
    lines = [f'extern "C" __global__ void __launch_bounds__({tx}) {name}({kernel_params(sweep, False)})', "{",
             f"    const int i2 = 4 * (blockIdx.x * {tx} + threadIdx.x);", "    if (i2 >= n2) return;",
             *("    " + s for s in strides(3)),
             f"    const int y0 = blockIdx.y * {y_rows}, z0 = blockIdx.z * {z_rows};",
             "    const long long c = ((long long)z0 + g) * s0 + ((long long)y0 + g) * s1 + (i2 + g);"]
    rows = {}
    for t in sweep.terms:
        for o, _ in t.stencil.entries:
            assert o[2] == 0 or o[:2] == (0, 0), "a star stencil"
            rows.setdefault((t.field, o[0], o[1]), None)
    for k, (dz, dy) in enumerate(np.ndindex(z_rows, y_rows)):
        lines += [f"    const bool in{k} = z0 + {dz} < n0 && y0 + {dy} < n1;",
                  f"    const long long c{k} = c + {dz} * s0 + {dy} * s1;"]
    for k in range(z_rows * y_rows):
        lines += [f"    float4 r{k};", f"    if (in{k}) {{"]
        for (f, oz, oy) in rows:
            lines.append(f"        const float4 v{k}_{f}_{oz + 1}_{oy + 1} = *(const float4*)(f_{f} + c{k} + ({oz}) * s0 + ({oy}) * s1);")
        for f in dict.fromkeys(f for f, _, _ in rows):
            lines += [f"        const real m{k}_{f} = f_{f}[c{k} - 1];", f"        const real p{k}_{f} = f_{f}[c{k} + 4];"]

        def access(f, o, j, k=k):
            if o[:2] != (0, 0):
                return f"v{k}_{f}_{o[0] + 1}_{o[1] + 1}.{COMPONENTS[j]}"
            x = j + o[2]
            return f"m{k}_{f}" if x < 0 else f"p{k}_{f}" if x > 3 else f"v{k}_{f}_1_1.{COMPONENTS[x]}"

        comps = [cell_expression(sweep, dtype, lambda f, o, j=j: access(f, o, j)) for j in range(4)]
        lines += [f"        r{k} = make_float4({', '.join(comps)});", "    }"]
    lines += [f"    if (in{k}) *(float4*)(f_{sweep.out} + c{k}) = r{k};" for k in range(z_rows * y_rows)]
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "vec4", tile, (tx, 1, 1), (z_rows, y_rows, 4 * tx), sweep_args(sweep, False), vector=4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--shape", type=int, default=512)
    args = ap.parse_args()
    ceiling = copy_bandwidth()["memcpy_gbps"]
    n = args.shape
    setup = problems.build("heat3d", shape=(n, n, n), dtype="float32")
    sweep, grid = setup.sweep, setup.grid
    be = CudaBackend()
    fields = {k: be.field(cp.random.uniform(-1, 1, grid.padded_shape, dtype=cp.float32), grid.ghost) for k in (sweep.out, *sweep.inputs)}
    ref_launch = CudaBackend(strategy="rows").sweep(sweep, grid)
    fields[sweep.out][...] = np.nan
    ref_launch(fields)
    ref = cp.asnumpy(fields[sweep.out])
    variants = {"rows (auto)": ref_launch, "pipelined": CudaBackend(strategy="pipelined").sweep(sweep, grid)}
    for tile in [(1, 2, 128), (1, 4, 64), (1, 4, 128), (1, 8, 64), (2, 2, 64), (2, 4, 64), (1, 8, 32), (4, 2, 64)]:
        kernel = vec4_sweep(sweep, grid.dtype, tile, f"sf_vec4_{'x'.join(map(str, tile))}")
        variants[f"vec4 {'x'.join(map(str, tile))}"] = be._sweep_runner(kernel, grid)
    bpc = sweep.bytes_per_cell(4)
    rows = []
    for label, launch in variants.items():
        fields[sweep.out][...] = np.nan
        launch(fields)
        same = bool(np.array_equal(cp.asnumpy(fields[sweep.out]), ref, equal_nan=True))
        sec = timed(lambda launch=launch: launch(fields))
        pct = 100 * grid.cells * bpc / sec / 1e9 / ceiling
        rows.append({"variant": label, "ms": sec * 1e3, "pct_copy": pct, "bitwise_rows": same})
        print(f"{label:16s} {sec * 1e3:7.3f} ms {pct:5.1f}% of copy  bitwise={same}", flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "memcpy_gbps": ceiling,
                       "shape": [n] * 3, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
