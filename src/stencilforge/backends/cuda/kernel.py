"""What every generated kernel shares: the `Kernel` record, the `Schedule` record each schedule
registers, the field type and literals, the parameter list, strides and indexing, and the printer of a
sweep's right-hand side at one cell.

A `Kernel` is data (name, source, launch shape); compiling and launching it is
someone else's job (compile.py, backend.py), so CI can compile every variant
without a GPU and `show-kernel` can print it.

Coefficients are baked into the source as literals in the field dtype rather
than passed as parameters: a radius-8 Laplacian has 49 of them, and as
immediates they cost neither registers nor constant-cache loads, and the
compiler folds them into FFMAs. The price is one compile per coefficient set
(grid spacing, time step), which the on-disk cache makes a one-off. Shapes and
ghost widths stay run-time arguments, so one kernel serves every grid size.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...errors import StencilforgeError
from ...plan import Sweep

MAX_THREADS = 1024
STATIC_SMEM_LIMIT = 48 * 1024
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Limits:
    """The shared memory a schedule may plan with. `CudaBackend` reads it from the device that runs the
    kernel; code generated without one (show-kernel, the compile tests) takes NVIDIA's published figures
    for an architecture (`ARCH_LIMITS`), so a ring sized for a Hopper never asks an Ampere for more."""

    smem_per_block: int  # opt-in maximum of dynamic shared memory per block
    smem_per_sm: int
    reserved_per_block: int  # what the runtime keeps of an SM's shared memory for each resident block

    @classmethod
    def of_device(cls, cp) -> Limits:
        """The current device's limits (runtime attributes 97, 81 and 111 of cudaDeviceAttr)."""
        device = cp.cuda.Device().id
        get = cp.cuda.runtime.deviceGetAttribute
        return cls(get(97, device), get(81, device), get(111, device))


ARCH_LIMITS = {
    "sm_80": Limits(163 * 1024, 164 * 1024, 1024),
    "sm_90": Limits(227 * 1024, 228 * 1024, 1024),
}
HOPPER = ARCH_LIMITS["sm_90"]


@dataclass(frozen=True)
class Kernel:
    """One generated __global__ function and how to launch it.

    `cover` is the number of cells one block handles along each axis (C order),
    so the grid is ceil(shape / cover) with the last axis on blockIdx.x. `args`
    are the field names passed as pointers, in order; the interior shape and,
    for sweeps, the ghost width and the row pitch in elements follow as int arguments.
    """

    name: str
    source: str
    strategy: str
    tile: tuple[int, ...]
    block: tuple[int, int, int]
    cover: tuple[int, ...]
    args: tuple[str, ...]
    dynamic_smem: int = 0
    vector: int = 1
    flat: bool = False  # one 1D launch over all cells (`flat` operators), which also take 1/n1
    ghost_vectors: bool = False  # its x neighbours are read as vectors too (streaming_vec): whole vectors of ghosts

    def fits(self, shape: tuple[int, ...], ghost: int = 0) -> bool:
        """Whether this kernel can run on arrays of interior `shape` with `ghost` layers: a vector kernel
        needs rows that are whole vectors (and, reading its x neighbours as vectors, ghost layers too), a
        flat one fewer than FLAT_CELLS cells; otherwise its scalar fallback runs."""
        return (shape[-1] % self.vector == 0 and not (self.ghost_vectors and ghost % self.vector)
                and (not self.flat or math.prod(shape) < FLAT_CELLS))

    def grid(self, shape: tuple[int, ...]) -> tuple[int, int, int]:
        if self.flat:
            return (max(1, math.ceil(math.prod(shape) / self.cover[0])), 1, 1)
        dims = [max(1, math.ceil(n / c)) for n, c in zip(reversed(shape), reversed(self.cover))] + [1, 1]
        return (dims[0], dims[1], dims[2])


def _always(plan, dtype) -> None:
    return None


@dataclass(frozen=True)
class Schedule:
    """One way to turn a plan into a `Kernel`, as `schedules/` registers it.

    The registry tuple it is in (`schedules.SWEEPS`, `schedules.OPERATORS`) says which plans it takes.
    `applies(plan, dtype)`: None where it applies, else why not (a sentence for messages); `auto`, `tune`
    and the CLI offer a schedule only where it applies. `tile(plan, dtype)`: its default tile;
    `tile_dims`: the tile's length (None: the plan's dimension); `threads(plan, dtype, tile)`: the
    threads of a block of that tile. `build(plan, dtype, tile, name, limits)`: the kernel, its shared
    memory within the device's `limits`. `scalar`: the schedule that runs where this one's vectors of
    cells do not fit a call's rows.
    """

    name: str
    build: Callable
    tile: Callable
    threads: Callable
    applies: Callable = _always
    tile_dims: int | None = None
    scalar: str | None = None


@dataclass(frozen=True)
class Fused:
    """A schedule of several steps of a sweep in one pass, as `schedules/` registers it (`schedules.FUSED`).

    `applies(sweep, steps)`: None where it applies, else why not; `build(sweep, dtype, tile, name, steps,
    min_blocks)`: the kernel (`min_blocks`: the blocks per SM its launch bounds ask for, or None). How many steps,
    in which tile, `auto` chooses from measurements (`tune.fused_choice`)."""

    name: str
    build: Callable
    applies: Callable


def spatial(plan, dtype) -> str | None:
    """None for a 2D or 3D sweep (what every sweep schedule generates), else why not."""
    return None if plan.ndim in (2, 3) else f"the CUDA sweep schedules take 2D and 3D sweeps, not {plan.ndim}D"


def ctype(dtype) -> str:
    dt = np.dtype(dtype)
    if dt == np.float32:
        return "float"
    if dt == np.float64:
        return "double"
    raise StencilforgeError(f"the cuda backend supports float32 and float64, not {dt}")


def literal(value, dtype) -> str:
    """A C literal that parses to exactly the value the numpy oracle uses, dtype(float(value))."""
    if np.dtype(dtype) == np.float32:
        return f"{float(np.float32(float(value))):.9e}f"
    return f"{float(value):.17e}"


def module_source(kernels: list[Kernel], dtype, title: str) -> str:
    """A compilable translation unit: a typedef for the field type, then the kernels."""
    head = f"// stencilforge generated CUDA C: {title}\n// field type: {np.dtype(dtype).name}\ntypedef {ctype(dtype)} real;\n"
    return head + "".join("\n" + k.source for k in kernels)


def check_names(names) -> None:
    for n in names:
        if not _IDENT.match(n):
            raise StencilforgeError(f"field name {n!r} is not a valid identifier for generated CUDA code")


def field_radii(sweep: Sweep) -> dict[str, tuple[int, ...]]:
    """Per-axis reach of each field read at neighbouring cells (pointwise fields are absent)."""
    radii: dict[str, list[int]] = {}
    for t in sweep.terms:
        offs = [o for o, _ in t.stencil.entries]
        if all(not any(o) for o in offs):
            continue
        r = radii.setdefault(t.field, [0] * sweep.ndim)
        for o in offs:
            for a in range(sweep.ndim):
                r[a] = max(r[a], abs(o[a]))
    return {k: tuple(v) for k, v in radii.items()}


def is_star(sweep: Sweep, fields) -> bool:
    """True when no offset of a staged field moves along two axes at once (corner halos unused)."""
    return all(sum(1 for i in o if i) <= 1 for t in sweep.terms if t.field in fields for o, _ in t.stencil.entries)


def cell_expression(sweep: Sweep, dtype, access) -> str:
    """The right-hand side at one cell, entry by entry: sum over terms of (sum c*f[o]) * factor.

    The arithmetic is spelled out with round-to-nearest intrinsics that the
    compiler may not contract or reorder: one fma chain over the entries of
    the unscaled terms, a chain times its factor for a scaled term, added. So
    every kernel that evaluates a sweep (each strategy, and the fused pair,
    whose operands come from registers and shuffles instead of loads) gets
    the same bits, not only the same value within rounding.
    """
    fma, mul, add = ("__fmaf_rn", "__fmul_rn", "__fadd_rn") if np.dtype(dtype) == np.float32 else ("__fma_rn", "__dmul_rn", "__dadd_rn")
    zero = (0,) * sweep.ndim

    def chain(acc, t):
        for o, c in t.stencil.entries:
            x = access(t.field, o)
            acc = f"{mul}({literal(c, dtype)}, {x})" if acc is None else f"{fma}({literal(c, dtype)}, {x},\n            {acc})"
        return acc

    total = None
    for t in sweep.terms:
        if t.factor is None:  # unscaled terms extend one fma chain, as a contracting compiler would
            total = chain(total, t)
        else:
            part = f"{mul}({chain(None, t)}, {access(t.factor, zero)})"
            total = part if total is None else f"{add}({total},\n        {part})"
    assert total is not None, "a sweep has at least one term"
    return total


def sweep_args(sweep: Sweep) -> tuple[str, ...]:
    """The kernel's array arguments: the output, then the inputs (the output once, where the sweep reads it too)."""
    return (sweep.out,) + tuple(n for n in sweep.inputs if n != sweep.out)


def kernel_params(sweep: Sweep, carriers: tuple[str, ...] = ()) -> str:
    ps = [f"{'' if n == sweep.out else 'const '}real* __restrict__ f_{n}" for n in sweep_args(sweep) + carriers]
    ps += [f"const int n{a}" for a in range(sweep.ndim)] + ["const int g", "const int pitch"]
    return ", ".join(ps)


def strides(ndim: int) -> list[str]:
    """Padded strides as 64-bit values: s{a} is the element distance between neighbours along axis a.

    Rows lie `pitch` elements apart (at least the padded row, so a field may be a view with its rows on cache
    lines); the planes of a 3D field follow each other without gaps."""
    lines = []
    if ndim == 3:
        lines.append("const long long s1 = (long long)pitch;")
        lines.append("const long long s0 = s1 * ((long long)n1 + 2 * g);")
    else:
        lines.append("const long long s0 = (long long)pitch;")
    return lines


def _linear(offset: tuple[int, ...]) -> str:
    """Offset in elements from the current cell, written with the stride names."""
    nd = len(offset)
    parts = []
    for a, o in enumerate(offset):
        if o == 0:
            continue
        parts.append(f"{o}" if a == nd - 1 else f"{o} * s{a}")
    return " + ".join(parts)


def at_offset(base: str, offset: tuple[int, ...]) -> str:
    lin = _linear(offset)
    return f"{base} + {lin}" if lin else base


def index_setup(ndim: int, block: tuple[int, ...]) -> list[str]:
    axes = ["x", "y", "z"]
    lines = []
    for a in range(ndim):
        ax = axes[ndim - 1 - a]
        lines.append(f"const int i{a} = blockIdx.{ax} * {block[a]} + threadIdx.{ax};")
    return lines


def centre_index(ndim: int) -> str:
    if ndim == 3:
        return "const long long c = ((long long)i0 + g) * s0 + ((long long)i1 + g) * s1 + (i2 + g);"
    return "const long long c = ((long long)i0 + g) * s0 + (i1 + g);"


def block_shape(tile: tuple[int, ...]) -> tuple[int, int, int]:
    rev = list(reversed(tile)) + [1, 1]
    return (rev[0], rev[1], rev[2])


def check_smem(nbytes: int, strategy: str, tile, limits: Limits) -> None:
    if nbytes > limits.smem_per_block:
        raise StencilforgeError(
            f"strategy {strategy} with tile {tuple(tile)} needs {nbytes} bytes of shared memory per block "
            f"(limit {limits.smem_per_block}); choose a smaller tile"
        )


FLAT_CELLS = 2**31  # `flat` indexes cells in 32 bits and corrects a quotient by one step; beyond, rows runs
