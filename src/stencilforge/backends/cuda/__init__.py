"""The cuda backend: CUDA C generated from the plan, compiled with NVRTC, run on CuPy arrays.

`kernel_source` and `choose` need neither a GPU nor CuPy (show-kernel, CI).
"""

from __future__ import annotations

from ...errors import StencilforgeError
from . import codegen
from .backend import CudaBackend, check_fits, resolve
from .kernel import module_source
from .tune import choose


def kernel_source(setup, strategy: str = "auto", tile=None) -> str:
    """The CUDA C a run of `setup` would compile: the step kernel, plus the residual reduction if any."""
    if strategy != "auto" and strategy not in codegen.STRATEGIES:
        raise StencilforgeError(f"unknown CUDA strategy {strategy!r}: choose one of auto, {', '.join(codegen.STRATEGIES)}")
    plan = setup.sweep or setup.operator
    dtype = setup.grid.dtype
    kernels = [resolve(plan, strategy, tile, setup.grid.shape, dtype)]
    if setup.residual is not None:
        kernels.append(codegen.residual_kernel(setup.residual, dtype))
    k = kernels[0]
    title = f"{setup.name}, strategy {k.strategy}, tile {k.tile}, block {k.block}"
    return module_source(kernels, dtype, title)


__all__ = ["CudaBackend", "check_fits", "choose", "kernel_source"]
