import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stencilforge import Stencil, StencilforgeError, apply
from stencilforge.stencil import central_weights, fornberg_weights


def test_radius8_weights_are_exact_rationals():
    w = central_weights(2, 8)
    assert w[3] == Fraction(112, 1485)  # the ISO3DFD sample prints 7.572087e-2, which is not this weight
    assert w[0] == Fraction(-1077749, 352800)
    assert abs(float(w[0]) - (-3.0548446)) < 1e-6  # the sample prints it rounded
    assert sum(w.values()) == 0
    assert all(w[k] == w[-k] for k in range(1, 9))


@pytest.mark.parametrize("order,radius", [(1, 1), (1, 3), (2, 1), (2, 4), (4, 3)])
def test_central_weights_are_exact_on_polynomials(order, radius):
    w = central_weights(order, radius)
    for degree in range(2 * radius + 1):
        value = sum(c * Fraction(o) ** degree for o, c in w.items())
        assert value == (math.factorial(order) if degree == order else 0)


def test_one_sided_fornberg_matches_known_closure():
    assert fornberg_weights(1, 0, [0, 1, 2]) == [Fraction(-3, 2), Fraction(2), Fraction(-1, 2)]


def test_named_constructors():
    five = Stencil.five_point()
    assert five.ndim == 2 and five.radius == 1 and len(five.entries) == 5
    seven = Stencil.seven_point(0.5)
    assert seven.ndim == 3 and seven.as_dict()[(0, 0, 0)] == pytest.approx(-24.0)
    lap = Stencil.laplacian(3, 8)
    assert lap.radius == 8 and len(lap.entries) == 49
    general = Stencil.seven_point_general([1, 2, 3, 4, 5, 6, 7])
    assert general.as_dict()[(1, 0, 0)] == 7 and general.as_dict()[(0, 0, -1)] == 2
    d1 = Stencil.derivative(1, 1, 2, 2)
    assert set(d1.as_dict()) == {(0, -2), (0, -1), (0, 1), (0, 2)}


def test_stencil_errors():
    with pytest.raises(StencilforgeError):
        Stencil.from_dict({(0, 0): 1.0, (1,): 2.0})
    with pytest.raises(StencilforgeError):
        Stencil.from_dict({(0,): float("nan")})
    with pytest.raises(StencilforgeError):
        Stencil.seven_point_general([1, 2, 3])
    with pytest.raises(StencilforgeError):
        Stencil.derivative(2, 3, 2, 1)
    with pytest.raises(StencilforgeError):
        Stencil.laplacian(2, 0)


def naive_apply(stencil: Stencil, u: np.ndarray) -> np.ndarray:
    r = stencil.radius
    out = np.zeros(tuple(n - 2 * r for n in u.shape))
    for idx in np.ndindex(out.shape):
        out[idx] = sum(float(c) * u[tuple(i + r + o for i, o in zip(idx, off))] for off, c in stencil.entries)
    return out


stencils = st.integers(1, 3).flatmap(
    lambda nd: st.dictionaries(
        st.tuples(*[st.integers(-2, 2)] * nd), st.floats(-3, 3, allow_nan=False).filter(lambda c: abs(c) > 1e-3), min_size=1, max_size=6
    )
)


# every numba example compiles a kernel for its stencil: a few by default, as many as numpy's with -m slow
@pytest.mark.parametrize(
    "backend,examples", [("numpy", 25), ("numba", 5), pytest.param("numba", 25, marks=pytest.mark.slow, id="numba-25")]
)
def test_apply_matches_explicit_loops(backend, examples):
    @settings(max_examples=examples, deadline=None)
    @given(weights=stencils, data=st.data())
    def check(weights, data):
        stencil = Stencil.from_dict(weights)
        r = stencil.radius
        shape = tuple(data.draw(st.integers(2 * r + 1, 2 * r + 7)) for _ in range(stencil.ndim))
        u = np.random.default_rng(data.draw(st.integers(0, 2**31))).standard_normal(shape)
        np.testing.assert_allclose(apply(stencil, u, backend=backend), naive_apply(stencil, u), rtol=1e-12, atol=1e-12)

    check()


def test_apply_rejects_bad_arrays():
    with pytest.raises(StencilforgeError, match="2D"):
        apply(Stencil.five_point(), np.zeros((4, 4, 4)))
    with pytest.raises(StencilforgeError, match="smaller than the stencil"):
        apply(Stencil.laplacian(2, 3), np.zeros((5, 9)))
    with pytest.raises(StencilforgeError, match="dtype"):
        apply(Stencil.five_point(), np.zeros((5, 5), dtype=np.complex64))


def test_apply_copies_non_contiguous_input(rng):
    u = rng.standard_normal((20, 30))
    view = u[::2, ::3]
    np.testing.assert_allclose(
        apply(Stencil.five_point(), view, backend="numba"), apply(Stencil.five_point(), view.copy(), backend="numpy")
    )


def test_apply_binds_its_kernel_once_per_stencil_and_shape(monkeypatch):
    """Building a sweep compiles and warms up a kernel: apply does it once, not on every call."""
    import numpy as np

    import stencilforge as sf
    from stencilforge import api
    from stencilforge.backends.numba import NumbaBackend

    api._bound_sweep.cache_clear()
    built = []
    original = NumbaBackend.sweep
    monkeypatch.setattr(NumbaBackend, "sweep", lambda self, sweep, grid: built.append(grid) or original(self, sweep, grid))
    lap = sf.Stencil.laplacian(2, 1, 0.5)
    u = np.random.default_rng(0).random((23, 19))
    first = sf.apply(lap, u, backend="numba")
    np.testing.assert_array_equal(sf.apply(lap, u, backend="numba"), first)
    np.testing.assert_allclose(first, sf.apply(lap, u, backend="numpy"), rtol=1e-12)
    assert len(built) == 1
