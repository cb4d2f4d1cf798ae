"""The multigrid CUDA kernels compile with NVRTC for sm_80 and sm_90 without a GPU (CI)."""

from __future__ import annotations

import pytest

from stencilforge.backends.cuda.compile import compile_cubin, nvrtc_version
from stencilforge.solvers.cuda_kernels import OPTIONS, module_source

pytestmark = pytest.mark.skipif(nvrtc_version() is None, reason="needs cuda-bindings and the NVRTC wheel")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("wide", [False, True])
def test_multigrid_kernels_compile(arch, dtype, wide):
    cubin = compile_cubin(module_source(dtype, wide), arch, "the multigrid kernels", OPTIONS)
    assert len(cubin) > 1000
    for name in ("colour2", "colour3", "jacobi2", "jacobi3", "sum_squares2", "sum_squares3",
                 "restrict2", "restrict3", "residual2", "residual3", "dense_solve", "prolong_add2", "prolong_add3"):
        assert name.encode() in cubin
