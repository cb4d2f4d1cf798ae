"""Choosing a CUDA graph's length without a GPU (`simulation.graph_units`), and the runs that get none."""

from __future__ import annotations

import pytest

import stencilforge as sf
from stencilforge import problems
from stencilforge.simulation import GRAPH_STEPS, Simulation, graph_units


@pytest.mark.parametrize("unit, window, units", [
    (1, 99, 50),  # single steps, checks every 100: two graphs land on each check
    (1, 9, 10),  # every 10: one graph between checks
    (2, 99, 7),  # two-step kernels end before a look: 7 graphs of 14 steps, then 2 single steps
    (5, 99, 1),  # five-step kernels: 19 graphs of one pass, then 5 single steps (as without graphs)
    (2, 9, 4),  # two-step kernels between looks every 10 steps: one graph of 8 steps
    (1, None, GRAPH_STEPS),  # nothing looks: the longest graph
    (5, 4, None),  # looks every 5 steps: a five-step pass does not fit
])
def test_a_graph_leaves_the_fewest_single_steps_between_looks(unit, window, units):
    assert graph_units(unit, window) == units
    if units is not None:
        assert 2 <= units * unit <= GRAPH_STEPS


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_cpu_runs_replay_no_graph(backend):
    problem, _ = problems.problem("heat2d", (24, 30), "float64")
    assert Simulation(problem, backend).build_graph(99) == f"the {backend} backend has no graphs"
    assert sf.run(problem, backend=backend, steps=10).summary["graph_steps"] is None
