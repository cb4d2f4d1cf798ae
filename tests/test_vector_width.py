"""`wide_vectors()`: a Numba function that calls it asks LLVM for 512-bit vectors and computes the same bits;
on a CPU with AVX-512 its machine code uses them (elsewhere the attribute is inert, and the bits are checked alone)."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from llvmlite import binding as llvm

from stencilforge import problems
from stencilforge.backends.numba import backend as numba_backend
from stencilforge.backends.vector_width import PREFER_512, wide_vectors


def has_avx512() -> bool:
    return "+avx512f" in llvm.get_host_cpu_features().flatten().split(",")


@numba.njit(parallel=True)
def _wide_rows(out, u, c):
    for i in numba.prange(1, u.shape[0] - 1):
        wide_vectors()
        for j in range(1, u.shape[1] - 1):
            out[i, j] = c[0] * u[i, j] + c[1] * u[i, j - 1] + c[2] * u[i, j + 1] + c[3] * u[i - 1, j] + c[4] * u[i + 1, j]


def test_a_function_calling_wide_vectors_prefers_512_bit_vectors_with_the_same_bits():
    rng = np.random.default_rng(5)
    u = rng.uniform(-1, 1, (37, 203)).astype(np.float32)
    c = rng.uniform(-1, 1, 5).astype(np.float32)
    out = np.full_like(u, np.nan)
    _wide_rows(out, u, c)
    ref = c[0] * u[1:-1, 1:-1] + c[1] * u[1:-1, :-2] + c[2] * u[1:-1, 2:] + c[3] * u[:-2, 1:-1] + c[4] * u[2:, 1:-1]
    assert np.array_equal(out[1:-1, 1:-1], ref)
    assert np.all(np.isnan(out[0])) and np.all(np.isnan(out[:, -1])), "a cell outside the loop was written"
    (signature,) = _wide_rows.signatures
    assert PREFER_512 in _wide_rows.inspect_llvm(signature)
    if has_avx512():
        assert "zmm" in _wide_rows.inspect_asm(signature)


def _fresh_loader(loaded: dict):
    """`load_kernel` without Numba's on-disk cache, keeping each module's functions: code loaded from the cache
    cannot be inspected."""

    def load(source: str):
        namespace: dict = {}
        exec(compile(source.replace("cache=True", "cache=False"), "<generated>", "exec"), namespace)
        loaded.update({k: v for k, v in namespace.items() if isinstance(v, numba.core.registry.CPUDispatcher)})
        return namespace["kernel"]

    return load


@pytest.mark.parametrize("name, shape, kw, fused", [
    ("heat2d", (9, 13), {}, None),
    ("heat2d", (9, 13), {}, "march"),
    ("heat2d", (9, 13), {}, "loop"),
    ("heat3d", (7, 9, 11), {}, None),
    ("heat3d", (7, 9, 11), {}, "march"),
    ("wave3d", (7, 9, 11), {"radius": 3}, None),  # 21 row views: the wide kernel
])
def test_every_function_of_a_sweep_kernel_that_loops_over_cells_asks_for_512_bit_vectors(monkeypatch, name, shape, kw, fused):
    from stencilforge.backends.numba.schedules import MARCHES

    loaded: dict = {}
    monkeypatch.setattr(numba_backend, "load_kernel", _fresh_loader(loaded))
    monkeypatch.setattr(numba_backend, "MARCHES", tuple(s for s in MARCHES if s.name == fused))
    step = problems.linear_step(name, shape=shape, dtype="float32", **kw)
    backend = numba_backend.NumbaBackend()
    launch = backend.sweep_fused(step.sweep, step.lattice) if fused else backend.sweep(step.sweep, step.lattice)
    assert launch is not None
    if launch.compiling is not None:  # the fused kernel compiles in the background
        launch.compiling.result()
    cells = {None: {"kernel"}, "march": {"kernel", "middle", "march"}, "loop": {"one"}}[fused]  # those looping over cells
    looping = {n: f for n, f in loaded.items() if n in cells}
    assert set(looping) == cells
    for n, f in looping.items():
        (signature,) = f.signatures
        assert PREFER_512 in f.inspect_llvm(signature), f"{n} does not ask for 512-bit vectors"
        if has_avx512():
            assert "zmm" in f.inspect_asm(signature), f"{n} has no 512-bit vector code"
