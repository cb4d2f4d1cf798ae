"""Initial values and exact solutions tabulated on the host, and the device kernel's source compiled without
a GPU: the rounding chain (float64, then the grid's dtype, then float16 storage) and the coordinates of
ghost cells and of a rank's block."""

from __future__ import annotations

import numpy as np
import pytest

from stencilforge.backends.cuda.compile import compile_cubin
from stencilforge.ir.nodes import Constant, walk
from stencilforge.printers.cuda import tabulate_source
from stencilforge.printers.numpy import evaluate
from stencilforge.simulation import tabulated
from tabulate_cases import expressions, lattices, problem_grid


def _mesh(lattice, ghosts):
    """float64 coordinates per axis from the lattice's definition: lower + global index * spacing."""
    g = lattice.ghost if ghosts else 0
    axes = []
    for a, n in enumerate(lattice.shape):
        start = lattice.first_index(a)
        idx = np.arange(start - g, start + n + g, dtype=np.float64)
        shape = [1] * lattice.ndim
        shape[a] = idx.size
        axes.append((lattice.lower[a] + idx * lattice.spacing[a]).reshape(shape))
    return axes


@pytest.mark.parametrize("dtype,storage", [("float64", "float64"), ("float32", "float32"), ("float32", "float16")])
@pytest.mark.parametrize("ghosts", [False, True])
def test_host_values_are_float64_rounded_once_to_the_grid_then_to_storage(dtype, storage, ghosts):
    for lattice in lattices(dtype):
        mesh = _mesh(lattice, ghosts)
        for label, expr in expressions(problem_grid(lattice)):
            got = tabulated(expr, lattice, storage, {"k": 2.5}, 0.25, ghosts=ghosts)
            want = evaluate(expr, dtype=np.float64, coordinate=lambda a, shift, mesh=mesh: mesh[a], params={"k": 2.5}, t=0.25)
            want = np.broadcast_to(np.asarray(want, dtype=np.float64), got.shape).astype(dtype).astype(storage)
            assert got.dtype == np.dtype(storage) and got.shape == want.shape, label
            np.testing.assert_array_equal(got, want, err_msg=f"{label} on {lattice.shape}")


def test_a_constant_missing_from_params_takes_its_own_value():
    lattice = lattices("float64")[0]
    (label, expr), = [e for e in expressions(problem_grid(lattice)) if e[0] == "a constant alone"]
    assert (tabulated(expr, lattice, "float64", {}, 0.0) == 3.0).all()
    assert (tabulated(expr, lattice, "float64", {"k": 4.0}, 0.0) == 4.0).all()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("out", ["float64", "float32", "float16"])
def test_tabulate_kernels_compile(nvrtc, arch, out):
    for lattice in lattices("float32")[:3]:
        for label, expr in expressions(problem_grid(lattice)):
            source, constants = tabulate_source(expr, lattice.ndim, out)
            assert constants == tuple(dict.fromkeys(n.name for n in walk(expr) if isinstance(n, Constant)))
            assert compile_cubin(source, arch, f"tabulate {label}", ("--fmad=false",))[:4] == b"\x7fELF"
