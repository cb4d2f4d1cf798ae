"""Full-width SIMD in one compiled function: `wide_vectors()` called in a Numba function's body.

On CPUs with AVX-512, LLVM vectorises with 256-bit registers unless a function asks for more (its tuning for
the clock drops of early AVX-512 parts); Numba has no per-function setting, only NUMBA_CPU_FEATURES for every
function of a process, and 512-bit vectors slow some of our kernels while they speed others
(cpu-vector-width-2026-11-27.json). The call adds the attribute clang's -mprefer-vector-width=512 sets to the
LLVM function being lowered (in a prange body: the outlined loop's function) and compiles to nothing else.
Lanes compute what scalar code computes, in the same order, so the bits do not change; on a CPU without
512-bit vectors the attribute asks for nothing it has not got.
"""

from __future__ import annotations

from numba.core import types
from numba.extending import intrinsic

PREFER_512 = '"prefer-vector-width"="512"'


@intrinsic
def wide_vectors(typingctx):
    def codegen(context, builder, signature, args):
        # llvmlite validates only enum attributes on add(); a string attribute goes into the set as printed
        set.add(builder.function.attributes, PREFER_512)
        return context.get_dummy_value()

    return types.none(), codegen
