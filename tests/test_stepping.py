"""sf.Simulation as a loop of one's own: the same bits as sf.run, host reads and writes of fields by name."""

from __future__ import annotations

import numpy as np
import pytest

import stencilforge as sf
from stencilforge import problems


def heat(shape=(20, 24)):
    return problems.problem("heat2d", shape=shape)[0]


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_steps_of_ones_own_give_the_runs_bits(backend):
    sim = sf.Simulation(heat(), backend)
    sim.step(7)
    sim.step(5)
    run = sf.run(heat(), steps=12, backend=backend, fuse_steps=False)
    assert sim.step_count == 12 and sim.t == pytest.approx(12 * heat().dt.value)
    assert sim.field("u").tobytes() == np.asarray(run.fields["u"]).tobytes()


def diffusion(initial):
    """u_t = lap u with walls at rest, so that a start at any step is the start of a fresh run."""
    grid = sf.Grid((20, 24), spacing=(0.05, 0.05))
    u = sf.Field("u", grid)
    return sf.Problem([sf.Eq(u.next, u + 5e-4 * sf.laplacian(u))], boundary={u: sf.Dirichlet(0.0)}, dt=5e-4,
                      initial={u: initial}, name="diffusion")


def test_a_field_written_between_steps_is_where_the_next_steps_start():
    """Writing u's current level gives what a problem starting from those values computes."""
    rng = np.random.default_rng(1)
    sim = sf.Simulation(diffusion(rng.random((20, 24))), "numpy")
    sim.step(4)
    start = rng.random((20, 24))
    sim.set_field("u", start)
    sim.step(6)
    fresh = sf.Simulation(diffusion(start), "numpy")
    fresh.step(6)
    assert sim.field("u").tobytes() == fresh.field("u").tobytes()


def test_field_is_a_copy_and_set_field_takes_numbers():
    sim = sf.Simulation(heat(), "numpy")
    copy = sim.field("u")
    copy[...] = np.nan
    assert np.isfinite(sim.field("u")).all()
    sim.set_field("u", 0.25)
    assert (sim.field("u") == 0.25).all()


@pytest.mark.parametrize("call, message", [
    (lambda sim: sim.field("w"), "heat2d has no field 'w': it has u"),
    (lambda sim: sim.set_field("u", np.zeros((3, 3))), "u holds 20x24 values here, got an array of shape 3x3"),
    (lambda sim: sf.Simulation(heat(), "fortran"), "unknown backend 'fortran'"),
])
def test_bad_names_and_shapes_are_one_line_errors(call, message):
    with pytest.raises(sf.StencilforgeError, match=message) as err:
        call(sf.Simulation(heat(), "numpy"))
    assert "\n" not in str(err.value)
