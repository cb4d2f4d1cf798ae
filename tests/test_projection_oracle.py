"""The cavity's projection step (examples/cavity.py) against the same scheme written in NumPy with SciPy's sparse
solvers for the pressure (benchmarks/projection_peers.py): an oracle that shares nothing with the IR, its printers
or the multigrid. Measured: the fields agree to 5e-11 at 129^2 and 513^2 (20 steps from rest); 1e-9 allows the
solves' tolerance (each side stops anywhere below it) and the scheme's condition."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import stencilforge as sf

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "projection_peers.py"


def peers():
    spec = importlib.util.spec_from_file_location("projection_peers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("solver", ["lu", "cg"])
def test_the_cavitys_steps_are_numpy_and_scipys(backend, solver):
    module = peers()
    n, steps = 31, 30
    ours = sf.run(module.cavity.build((n, n)), steps=steps, backend=backend)
    peer = module.NumpyProjection(n, solver)
    for _ in range(steps):
        peer.step()
    assert np.abs(np.asarray(ours.fields["u"])).max() > 0.1  # the lid has set the flow moving
    for name, theirs in (("u", peer.u), ("v", peer.v)):
        np.testing.assert_allclose(np.asarray(ours.fields[name]), theirs[1:-1, 1:-1], rtol=0, atol=1e-9, err_msg=name)
