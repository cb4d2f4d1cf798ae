"""Kernels for an `AxisOperator` (unpadded 2D arrays, one-sided closure rows at both ends):
  naive      one thread per cell, every read from global memory;
  flat       one 1D launch over all cells;
  rows       as for sweeps: a thread writes the same column in a few consecutive rows;
  rows_vec   rows along x with a vector of cells per thread (4 floats or 2 doubles);
  pencil     along x: a row segment plus halo in shared memory; along y: a
             column pencil marching down the axis with a register queue. All
             outputs (e.g. d1 and d2) come out of the same pass over the input.
"""

from __future__ import annotations

import math

import numpy as np

from ....errors import StencilforgeError
from ....plan import AxisOperator, Derivative1D
from ..kernel import STATIC_SMEM_LIMIT, Kernel, Schedule, block_shape, check_names, ctype, literal
from .march import UNROLL
from .streaming_vec import LANES, VECTOR_TYPES


def _check_operator(op: AxisOperator) -> None:
    if op.ndim != 2:
        raise StencilforgeError("the cuda backend implements axis operators for 2D arrays only")
    if op.axis not in (0, 1):
        raise StencilforgeError(f"axis must be 0 or 1, got {op.axis}")
    for d in op.outputs:
        if len(d.left) < d.radius or len(d.right) < d.radius:
            raise StencilforgeError(f"derivative {d.out!r} needs at least {d.radius} closure rows at each end")
    check_names([op.inp] + [d.out for d in op.outputs])


def _weighted(weights, dtype, access) -> str:
    return " + ".join(f"{literal(w, dtype)} * {access(o)}" for o, w in weights)


def _closure_chain(d: Derivative1D, pos: str, n: str, dtype, glob, fast: str, indent: str, out: str) -> list[str]:
    """if/else chain over closure rows (read from global memory), the interior row last."""
    scale = literal(d.scale, dtype)
    lines = []
    kw = "if"
    for k, row in enumerate(d.left):
        lines.append(f"{indent}{kw} ({pos} == {k}) {out} = ({_weighted(row, dtype, glob)}) * {scale};")
        kw = "else if"
    for k, row in enumerate(d.right):
        lines.append(
            f"{indent}{kw} ({pos} == {n} - {k + 1}) {out} = ({_weighted(row, dtype, glob)}) * {scale};"
        )
        kw = "else if"
    lines.append(f"{indent}else {out} = ({fast}) * {scale};")
    return lines


def _op_params(op: AxisOperator) -> str:
    ps = [f"const real* __restrict__ f_{op.inp}"] + [f"real* __restrict__ f_{d.out}" for d in op.outputs]
    return ", ".join(ps + ["const int n0", "const int n1"])


def _op_args(op: AxisOperator) -> tuple[str, ...]:
    return (op.inp,) + tuple(d.out for d in op.outputs)


def naive_operator(op: AxisOperator, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    _check_operator(op)
    lines = [
        f'extern "C" __global__ void __launch_bounds__({math.prod(tile)}) {name}({_op_params(op)})',
        "{",
        f"    const int i1 = blockIdx.x * {tile[1]} + threadIdx.x;",
        f"    const int i0 = blockIdx.y * {tile[0]} + threadIdx.y;",
        "    if (i0 >= n0 || i1 >= n1) return;",
        "    const long long c = (long long)i0 * n1 + i1;",
    ]
    lines += _cell_outputs(op, dtype) + ["}"]
    return Kernel(name, "\n".join(lines) + "\n", "naive", tile, block_shape(tile), tile, _op_args(op))


def _cell_outputs(op: AxisOperator, dtype) -> list[str]:
    """Each output at cell (i0, i1), linear index c, stored as soon as computed (one thread per cell)."""
    u = f"f_{op.inp}"
    pos, n = ("i1", "n1") if op.axis == 1 else ("i0", "n0")
    step = "" if op.axis == 1 else " * n1"

    def glob(o):
        return f"{u}[c + ({o}){step}]"

    return _stored_outputs(op, dtype, pos, n, glob, glob, "    ")


def _stored_outputs(op: AxisOperator, dtype, pos: str, n: str, glob, operand, indent: str) -> list[str]:
    """Each output at linear index c: the interior weights over `operand(o)` (a register, shared memory
    or `glob`), the closure rows over `glob` near the ends of the axis (`pos` of `n`), then the store."""
    lines = []
    for m, d in enumerate(op.outputs):
        lines.append(f"{indent}real o{m};")
        lines += _closure_chain(d, pos, n, dtype, glob, _weighted(d.interior, dtype, operand), indent, f"o{m}")
        lines.append(f"{indent}f_{d.out}[c] = o{m};")
    return lines


def flat_operator(op: AxisOperator, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """One thread per cell over the array flattened, in blocks of tile[0] threads, the naive peer's
    launch with run-time shapes: the row index is c * (1 / n1) in double, truncated and corrected by
    one, in place of an integer division by n1 (measured against the division, rows and the peer in
    benchmarks/results/h100-derivatives-flat.txt). Kernel.fits keeps it below FLAT_CELLS."""
    _check_operator(op)
    lines = [
        f'extern "C" __global__ void __launch_bounds__({tile[0]}) {name}({_op_params(op)}, const double inv_n1)',
        "{",
        f"    const unsigned cu = blockIdx.x * {tile[0]}u + threadIdx.x;",
        "    if (cu >= (unsigned)n0 * (unsigned)n1) return;",
        "    unsigned q = (unsigned)((double)cu * inv_n1);",
        "    if (q * (unsigned)n1 > cu) q -= 1; else if ((q + 1) * (unsigned)n1 <= cu) q += 1;",
        "    const int i0 = q, i1 = cu - q * (unsigned)n1;",
        "    const long long c = cu;",
    ]
    lines += _cell_outputs(op, dtype) + ["}"]
    return Kernel(name, "\n".join(lines) + "\n", "flat", tile, (tile[0], 1, 1), tile, _op_args(op), flat=True)


def rows_operator(op: AxisOperator, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """tile = (R, X): a block of X threads along x, each writing its column in R consecutive rows,
    all values computed before the first store so the loads of every row are in flight together."""
    _check_operator(op)
    u = f"f_{op.inp}"
    rows, tx = tile
    step = "" if op.axis == 1 else " * n1"
    lines = [
        f'extern "C" __global__ void __launch_bounds__({tx}) {name}({_op_params(op)})',
        "{",
        f"    const int i1 = blockIdx.x * {tx} + threadIdx.x;",
        "    if (i1 >= n1) return;",
        f"    const int row = blockIdx.y * {rows};",
    ]
    for k in range(rows):
        pos = "i1" if op.axis == 1 else f"y{k}"
        lines += [
            f"    const int y{k} = row + {k};",
            f"    const long long c{k} = (long long)y{k} * n1 + i1;",
            f"    real {', '.join(f'o{m}_{k}' for m in range(len(op.outputs)))};",
            f"    if (y{k} < n0) {{",
        ]
        for m, d in enumerate(op.outputs):

            def glob(o, k=k):
                return f"{u}[c{k} + ({o}){step}]"

            n = "n1" if op.axis == 1 else "n0"
            lines += _closure_chain(d, pos, n, dtype, glob, _weighted(d.interior, dtype, glob), "        ", f"o{m}_{k}")
        lines.append("    }")
    for k in range(rows):
        stores = " ".join(f"f_{d.out}[c{k}] = o{m}_{k};" for m, d in enumerate(op.outputs))
        lines.append(f"    if (y{k} < n0) {{ {stores} }}")
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "rows", tile, (tx, 1, 1), tile, _op_args(op))


def rows_vector_operator(op: AxisOperator, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """`rows` along x with 4 floats or 2 doubles per thread: interior cells read their neighbours as a few
    aligned vectors and store one vector per output; cells in reach of a closure take the scalar chain.
    The launcher runs it only where the row length is a multiple of the width and the pointers aligned.
    Half the memory instructions of `rows`: faster for one derivative along x on the H100; the fused pair,
    two stores per read, did not gain (benchmarks/results/h100-derivatives-rows-vec.json)."""
    _check_operator(op)
    if op.axis != 1:
        raise StencilforgeError("strategy rows_vec applies to derivatives along x (axis 1)")
    vt, vector = next((t, w) for (c, w), t in VECTOR_TYPES.items() if c == ctype(dtype))  # the widest
    rows, tx = tile
    u = f"f_{op.inp}"
    left = max(len(d.left) for d in op.outputs)
    right = max(len(d.right) for d in op.outputs)
    lines = [
        f'extern "C" __global__ void __launch_bounds__({tx}) {name}({_op_params(op)})',
        "{",
        f"    const int i1 = (blockIdx.x * {tx} + threadIdx.x) * {vector};",
        "    if (i1 >= n1) return;",
        f"    const int row = blockIdx.y * {rows};",
        f"    const bool inner = i1 >= {left} && i1 + {vector - 1} < n1 - {right};",
        f"    const {vt}* __restrict__ v_{op.inp} = reinterpret_cast<const {vt}*>({u});",
    ]
    lines += [f"    {vt}* __restrict__ v_{d.out} = reinterpret_cast<{vt}*>(f_{d.out});" for d in op.outputs]
    for k in range(rows):
        outs = [f"o{m}_{k}_{j}" for m in range(len(op.outputs)) for j in range(vector)]
        lines += [
            f"    const int y{k} = row + {k};",
            f"    const long long c{k} = (long long)y{k} * n1 + i1;",
            f"    real {', '.join(outs)};",
            f"    if (y{k} < n0) {{",
            "        if (inner) {",
        ]
        chunks: dict[int, str] = {}
        values = []
        for m, d in enumerate(op.outputs):
            for j in range(vector):

                def lane(o, j=j, k=k, chunks=chunks):
                    e = j + o
                    chunks.setdefault(e // vector, f"t{k}_{'m' if e < 0 else 'p'}{abs(e // vector)}")
                    return f"{chunks[e // vector]}.{LANES[e % vector]}"

                values.append(f"            o{m}_{k}_{j} = ({_weighted(d.interior, dtype, lane)}) * {literal(d.scale, dtype)};")
        for a, var in sorted(chunks.items()):
            lines.append(f"            const {vt} {var} = v_{op.inp}[c{k} / {vector} + {a}];")
        lines += values
        lines.append("        } else {")
        for m, d in enumerate(op.outputs):
            for j in range(vector):

                def glob(o, j=j, k=k):
                    return f"{u}[c{k} + {j} + ({o})]"

                fast = _weighted(d.interior, dtype, glob)
                lines += _closure_chain(d, f"i1 + {j}", "n1", dtype, glob, fast, "            ", f"o{m}_{k}_{j}")
        lines += ["        }", "    }"]
    for k in range(rows):
        stores = " ".join(
            f"v_{d.out}[c{k} / {vector}] = make_{vt}({', '.join(f'o{m}_{k}_{j}' for j in range(vector))});"
            for m, d in enumerate(op.outputs)
        )
        lines.append(f"    if (y{k} < n0) {{ {stores} }}")
    lines.append("}")
    return Kernel(name, "\n".join(lines) + "\n", "rows_vec", tile, (tx, 1, 1), (rows, tx * vector), _op_args(op), vector=vector)


def pencil_operator(op: AxisOperator, dtype, tile: tuple[int, ...], name: str) -> Kernel:
    """Fused one-pass operator; tile = (rows, tx) along x, (chunk, tx) along y.

    Each thread handles several cells whose loads are issued together (rows of
    the x pencil, UNROLL rows of the y march), so enough bytes are in flight to
    reach the bandwidth with float64 and one read per cell.
    """
    _check_operator(op)
    u = f"f_{op.inp}"
    r = max(d.radius for d in op.outputs)
    rows_or_chunk, tx = tile
    lines = [f'extern "C" __global__ void __launch_bounds__({tx}) {name}({_op_params(op)})', "{"]
    if op.axis == 1:
        rows = rows_or_chunk
        if tx < 2 * r:
            raise StencilforgeError(f"strategy pencil needs at least {2 * r} threads along x, got tile {tuple(tile)}")
        width = tx + 2 * r
        smem = rows * width * np.dtype(dtype).itemsize
        if smem > STATIC_SMEM_LIMIT:
            raise StencilforgeError(f"strategy pencil with tile {tuple(tile)} needs {smem} bytes of shared memory; choose a smaller tile")
        lines += [
            f"    __shared__ real s_u[{rows}][{width}];",
            "    const int tx = threadIdx.x;",
            f"    const int b1 = blockIdx.x * {tx}, b0 = blockIdx.y * {rows};",
            "    const int i1 = b1 + tx;",
            f"    const int h1 = tx < {r} ? b1 - {r} + tx : b1 + {tx} + tx - {r};",
            f"    const int hs = tx < {r} ? tx : {tx} + tx;",
            f"    const bool halo = tx < {2 * r} && h1 >= 0 && h1 < n1;",
        ]
        for a in range(rows):
            lines.append(f"    if (b0 + {a} < n0) {{")
            lines.append(f"        const long long row = (long long)(b0 + {a}) * n1;")
            lines.append(f"        if (i1 < n1) s_u[{a}][tx + {r}] = {u}[row + i1];")
            lines.append(f"        if (halo) s_u[{a}][hs] = {u}[row + h1];")
            lines.append("    }")
        lines += ["    __syncthreads();", "    if (i1 >= n1) return;"]

        def glob(o):
            return f"{u}[c + ({o})]"

        for a in range(rows):
            lines.append(f"    if (b0 + {a} < n0) {{")
            lines.append(f"        const long long c = (long long)(b0 + {a}) * n1 + i1;")
            lines += _stored_outputs(op, dtype, "i1", "n1", glob, lambda o, a=a: f"s_u[{a}][tx + {r + o}]", "        ")
            lines.append("    }")
        lines.append("}")
        cover, block = (rows, tx), (tx, 1, 1)
    else:
        chunk = rows_or_chunk
        unroll = min(UNROLL, chunk)
        lines += [
            f"    const int i1 = blockIdx.x * {tx} + threadIdx.x;",
            "    if (i1 >= n1) return;",
            f"    const int y0 = blockIdx.y * {chunk};",
            f"    const int y1 = min(y0 + {chunk}, n0);",
            f"    real {', '.join(f'q{j} = 0' for j in range(2 * r + unroll))};",
        ]
        for j in range(2 * r):
            lines.append(f"    {{ const int y = y0 + {j - r}; q{j} = (y >= 0 && y < n0) ? {u}[(long long)y * n1 + i1] : (real)0; }}")
        lines.append(f"    for (int y = y0; y < y1; y += {unroll}) {{")
        for k in range(unroll):
            lines.append(f"        q{2 * r + k} = (y + {r + k} < n0) ? {u}[(long long)(y + {r + k}) * n1 + i1] : (real)0;")

        def glob(o):
            return f"{u}[c + ({o}) * (long long)n1]"

        for k in range(unroll):
            lines.append("        {" if k == 0 else f"        if (y + {k} < y1) {{")
            lines.append(f"            const int yk = y + {k};")
            lines.append("            const long long c = (long long)yk * n1 + i1;")
            lines += _stored_outputs(op, dtype, "yk", "n0", glob, lambda o, k=k: f"q{r + o + k}", "            ")
            lines.append("        }")
        for j in range(2 * r):
            lines.append(f"        q{j} = q{j + unroll};")
        lines += ["    }", "}"]
        cover, block = (chunk, tx), (tx, 1, 1)
    return Kernel(name, "\n".join(lines) + "\n", "pencil", tile, block, cover, _op_args(op))


def _along_x(op: AxisOperator, dtype) -> str | None:
    return None if op.axis == op.ndim - 1 else "strategy rows_vec applies to derivatives along x (axis 1)"


def _operator(name: str, build, tile, threads, **kw) -> Schedule:
    return Schedule(name, lambda op, dtype, t, kernel, limits: build(op, dtype, t, kernel), tile=lambda op, dtype: tile(op),
                    threads=lambda op, dtype, t: threads(t), **kw)


SCHEDULES = (
    _operator("naive", naive_operator, lambda op: (8, 32), math.prod),
    # fused d1+d2 along x: 128 threads, the fastest on the H100 (h100-derivatives-flat.txt)
    _operator("flat", flat_operator, lambda op: (128,), math.prod, tile_dims=1),
    # fused d1+d2 along x: 1x128 led 4x256 on the H100 (measured when rows was added; no file kept)
    _operator("rows", rows_operator, lambda op: (1, 128), lambda t: t[1]),
    # d1 along x: 1x256 the fastest on the H100 (h100-derivatives-rows-vec.json)
    _operator("rows_vec", rows_vector_operator, lambda op: (1, 256), lambda t: t[1], applies=_along_x, scalar="rows"),
    _operator("pencil", pencil_operator, lambda op: (4, 256) if op.axis == 1 else (64, 128), lambda t: t[1]),
)
