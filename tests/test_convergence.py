"""The verify suite must pass on every CPU backend: observed orders within 0.15 of theory."""

import pytest

from stencilforge.backends import get_backend
from stencilforge.verification import Check, observed_order, run_suite


def test_observed_order_fit():
    assert observed_order([0.1, 0.05, 0.025], [1e-2, 2.5e-3, 6.25e-4]) == pytest.approx(2.0)


def test_a_check_outside_the_tolerance_fails():
    assert Check("x", 2, 2.14, (1.0,)).passed
    assert not Check("x", 2, 1.84, (1.0,)).passed


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_convergence_orders(backend):
    checks = list(run_suite(get_backend(backend), quick=backend == "numba"))
    assert len(checks) == (22 if backend == "numba" else 23)  # the last four: multigrid on manufactured solutions
    failed = [(c.name, c.expected, round(c.observed, 3)) for c in checks if not c.passed]
    assert not failed, failed
