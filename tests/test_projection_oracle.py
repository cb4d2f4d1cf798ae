"""The cavity's projection step (examples/cavity.py) against the same scheme written in NumPy with SciPy's sparse
solvers for the pressure (the bench's projection peer, stencilforge.bench.projection): an oracle that shares
nothing with the IR, its printers or the multigrid. Measured: the fields agree to 5e-11 at 129^2 and 513^2 (20 steps
from rest); 1e-9 allows the solves' tolerance (each side stops anywhere below it) and the scheme's condition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stencilforge as sf
from stencilforge.bench.projection import ArrayProjection, cavity
from stencilforge.convergence import load_problem_file

example = load_problem_file(Path(__file__).resolve().parents[1] / "examples" / "cavity.py")


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("solver", ["lu", "cg"])
def test_the_cavitys_steps_are_numpy_and_scipys(backend, solver):
    n, steps = 31, 30
    ours = sf.run(example.build((n, n)), steps=steps, backend=backend)
    peer = ArrayProjection(n, solver)
    for _ in range(steps):
        peer.step()
    assert np.abs(np.asarray(ours.fields["u"])).max() > 0.1  # the lid has set the flow moving
    for name, theirs in (("u", peer.u), ("v", peer.v)):
        np.testing.assert_allclose(np.asarray(ours.fields[name]), theirs[1:-1, 1:-1], rtol=0, atol=1e-9, err_msg=name)


def test_the_benchs_cavity_is_the_examples():
    n, steps = 31, 20
    ours, example_run = (sf.run(p, steps=steps, backend="numpy") for p in (cavity(n), example.build((n, n))))
    for name in ("u", "v", "p"):
        assert np.array_equal(ours.fields[name], example_run.fields[name]), name
