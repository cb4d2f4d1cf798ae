"""Multigrid on the GPU (CuPy arrays through the same code) against the numpy path."""

from __future__ import annotations

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend

pytestmark = pytest.mark.gpu
if not CudaBackend.available():
    pytest.skip(f"no GPU: {CudaBackend.unavailable_reason()}", allow_module_level=True)


@pytest.mark.parametrize("shape", [(63, 80), (31, 24, 40)])
@pytest.mark.parametrize("boundary", ["dirichlet", "neumann", "periodic"])
@pytest.mark.parametrize("variable_k", [False, True])
def test_cuda_multigrid_matches_numpy(shape, boundary, variable_k):
    rng = np.random.default_rng(7)
    f = rng.standard_normal(shape)
    if boundary != "dirichlet":
        f -= f.mean()
    k = 1.0 + rng.random(shape) if variable_k else None
    ref = sf.poisson(f, boundary=boundary, k=k, tol=1e-10, dtype="float64", backend="numpy")
    got = sf.poisson(f, boundary=boundary, k=k, tol=1e-10, dtype="float64", backend="cuda")
    u_ref = np.asarray(ref.u)
    u_gpu = got.u.get() if hasattr(got.u, "get") else np.asarray(got.u)
    assert np.isfinite(u_gpu).all()
    assert got.summary["converged"], got.summary
    scale = float(np.abs(u_ref).max())
    assert float(np.abs(u_gpu - u_ref).max()) <= 1e-8 * scale


def test_cuda_mixed_precision_reaches_float64_accuracy():
    rng = np.random.default_rng(3)
    f = rng.standard_normal((127, 127))
    got = sf.poisson(f, tol=1e-11, dtype="float64", mixed=True, backend="cuda")
    assert got.summary["converged"] and got.summary["residual"] < 1e-11


@pytest.mark.parametrize("shape,walls,variable_k", [
    ((37, 50), ("dirichlet", "periodic"), True),
    ((64, 33), ("neumann", "dirichlet"), False),
    ((13, 22, 17), ("dirichlet", "neumann", "periodic"), True),
    ((16, 16, 31), ("dirichlet", "dirichlet", "dirichlet"), False),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_each_cuda_kernel_matches_the_array_code(shape, walls, variable_k, dtype):
    """Every kernel of one level pair against solvers.operator on random data, outputs NaN-poisoned first."""
    import cupy as cp

    from stencilforge.solvers.cuda_kernels import CudaKernels
    from stencilforge.solvers.multigrid import ArrayKernels, Multigrid, Traffic

    rng = np.random.default_rng(11)
    k = np.exp(rng.standard_normal(shape)) if variable_k else None
    spacing = tuple(1.0 / n for n in shape)
    ref = Multigrid(shape, walls, spacing, k, dtype, ArrayKernels(np, Traffic()))
    gpu = Multigrid(shape, walls, spacing, k, dtype, CudaKernels(Traffic(), CudaBackend().arch))
    fine, coarse = ref.levels[0], ref.levels[1]
    gfine, gcoarse = gpu.levels[0], gpu.levels[1]
    u = rng.standard_normal(fine.u.shape).astype(dtype)
    f = rng.standard_normal(fine.f.shape).astype(dtype)
    e = rng.standard_normal(coarse.u.shape).astype(dtype)
    tol = 1e-12 if dtype == "float64" else 2e-5

    def load():
        fine.u[...], fine.f[...], coarse.u[...] = u, f, e
        gfine.u[...], gfine.f[...], gcoarse.u[...] = cp.asarray(u), cp.asarray(f), cp.asarray(e)
        coarse.f[...] = np.nan
        gcoarse.f[...] = cp.nan

    def close(a, b):
        b = cp.asnumpy(b)
        assert np.isfinite(b).all()
        scale = max(1.0, float(np.abs(a).max()))
        assert float(np.abs(a - b).max()) <= tol * scale

    load()
    for colour in (0, 1):
        ref.kernels.smooth_colour(fine, colour, 1.2)
        gpu.kernels.smooth_colour(gfine, colour, 1.2)
    close(fine.u[fine.interior], gfine.u[gfine.interior])
    load()
    ref.kernels.restrict_residual(fine, coarse)
    gpu.kernels.restrict_residual(gfine, gcoarse)
    close(coarse.f, gcoarse.f)
    load()
    ref.kernels.prolong_add(fine, coarse)
    gpu.kernels.prolong_add(gfine, gcoarse)
    close(fine.u[fine.interior], gfine.u[gfine.interior])
    load()
    r_ref = np.full(shape, np.nan, dtype=dtype)
    r_gpu = cp.full(shape, cp.nan, dtype=dtype)
    ref.kernels.residual(fine, fine.u, fine.f, r_ref)
    gpu.kernels.residual(gfine, gfine.u, gfine.f, r_gpu)
    close(r_ref, r_gpu)
    n_ref = ref.kernels.residual_norm2(fine, fine.u, fine.f)
    n_gpu = gpu.kernels.residual_norm2(gfine, gfine.u, gfine.f)
    assert abs(n_ref - n_gpu) <= 1e-10 * n_ref
    assert n_gpu == gpu.kernels.residual_norm2(gfine, gfine.u, gfine.f)  # a fixed order of summation
    load()
    fine.spare = np.full_like(fine.u, np.nan)
    gfine.spare = cp.full_like(gfine.u, cp.nan)
    fine.spare[...] = fine.u  # the ghosts of the output come from the iterate, as Jacobi's second buffer has them
    gfine.spare[...] = gfine.u
    ref.kernels.jacobi(fine, 0.8)
    gpu.kernels.jacobi(gfine, 0.8)
    close(fine.u[fine.interior], gfine.u[gfine.interior])
    # ghost cells of a non-periodic axis are never written
    for a, wall in enumerate(walls):
        if wall != "periodic":
            lo = tuple(slice(0, 1) if b == a else slice(None) for b in range(len(shape)))
            np.testing.assert_array_equal(cp.asnumpy(gfine.u[lo]), u[lo])


@pytest.mark.parametrize("smoother,pre,post", [("rbgs", 2, 2), ("jacobi", 1, 2), ("jacobi", 2, 2)])
def test_cycles_replayed_as_a_graph_give_the_bits_of_direct_launches(monkeypatch, smoother, pre, post):
    from stencilforge.solvers.cuda_kernels import CudaKernels

    rng = np.random.default_rng(5)
    f = rng.standard_normal((65, 47))
    f -= f.mean()
    options = dict(boundary=("periodic", "neumann"), tol=1e-10, dtype="float64", backend="cuda", smoother=smoother,
                   pre=pre, post=post, fmg=False)
    graph = sf.poisson(f, **options)
    monkeypatch.setattr(CudaKernels, "recorded", lambda self, fn: fn)
    direct = sf.poisson(f, **options)
    assert graph.summary["converged"] and graph.summary["cycles"] > 2
    assert graph.summary["residual_history"] == direct.summary["residual_history"]
    np.testing.assert_array_equal(graph.u.get(), direct.u.get())
    assert graph.summary["bytes_per_cycle"] == direct.summary["bytes_per_cycle"]


def test_64_bit_offsets_give_the_bits_of_32_bit_ones(monkeypatch):
    from stencilforge.solvers import cuda_kernels

    rng = np.random.default_rng(2)
    f = rng.standard_normal((23, 30, 19))
    k = np.exp(rng.standard_normal(f.shape))
    narrow = sf.poisson(f, k=k, tol=1e-9, backend="cuda", dtype="float64")
    monkeypatch.setattr(cuda_kernels, "WIDE", 0)
    wide = sf.poisson(f, k=k, tol=1e-9, backend="cuda", dtype="float64")
    assert narrow.summary["converged"]
    np.testing.assert_array_equal(narrow.u.get(), wide.u.get())
