"""The verify suite must pass on every CPU backend: observed orders within 0.15 of theory."""

from itertools import islice

import pytest

from stencilforge.backends import get_backend
from stencilforge.verification import Check, derivative_checks, multigrid_checks, observed_order, run_suite, star_checks


def test_observed_order_fit():
    assert observed_order([0.1, 0.05, 0.025], [1e-2, 2.5e-3, 6.25e-4]) == pytest.approx(2.0)


def test_a_check_outside_the_tolerance_fails():
    assert Check("x", 2, 2.14, (1.0,)).passed
    assert not Check("x", 2, 1.84, (1.0,)).passed


def _failures(checks):
    return [(c.name, c.expected, round(c.observed, 3)) for c in checks if not c.passed]


@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=pytest.mark.slow)])
def test_convergence_orders(backend):
    checks = list(run_suite(get_backend(backend), quick=backend == "numba"))
    assert checks and not _failures(checks), _failures(checks)


def test_numba_convergence_orders_on_a_reduced_set():
    """By default numba runs one cheap check of each kernel kind (the full suite compiles for a minute: -m slow):
    the radius-1 star sweep, the first derivative's interior and closure, multigrid with Dirichlet walls."""
    numba = get_backend("numba")
    checks = [*islice(star_checks(numba, True), 1), *islice(derivative_checks(numba, True), 2), *islice(multigrid_checks(numba, True), 1)]
    assert not _failures(checks), _failures(checks)


def test_the_quick_suite_is_the_full_suite_with_fewer_cases():
    """quick drops refinements and cases but checks nothing the full suite does not, and keeps every kind of check."""
    numpy = get_backend("numpy")
    full = {c.name: c for c in run_suite(numpy)}
    quick = {c.name: c for c in run_suite(numpy, quick=True)}
    assert set(quick) < set(full)
    assert {name.split()[0] for name in quick} == {name.split()[0] for name in full}  # star, derivatives, each problem
    assert all(quick[name].expected == full[name].expected for name in quick)
    assert not _failures(quick.values()), _failures(quick.values())
