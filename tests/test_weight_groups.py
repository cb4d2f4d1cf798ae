"""The CPU backends' order of operations (`Stencil.weight_groups`): entries of equal weight summed, then
multiplied once. NumPy's oracle and every numba kernel follow it, so they must agree bit for bit on stencils
whose weights repeat, in groups larger than the limit, across terms and scaled by a field; and the groups
must cover every entry once, in a fixed order."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from stencilforge.backends.numba import NumbaBackend
from stencilforge.backends.numba.schedules import sweep_source, wide
from stencilforge.backends.numpy_ref import evaluate_sweep
from stencilforge.grid import Grid
from stencilforge.plan import Sweep, Term
from stencilforge.stencil import GROUP_LIMIT, Stencil


def test_groups_are_the_entries_by_weight_in_order_of_first_appearance():
    s = Stencil.from_dict({(-1,): 2.0, (0,): -1.0, (1,): 2.0, (2,): Fraction(-1)})
    assert s.weight_groups() == ((2.0, ((-1,), (1,))), (-1.0, ((0,), (2,))))


def test_weights_equal_as_float64_share_a_group():
    s = Stencil.from_dict({(-1, 0): Fraction(1, 3), (0, 1): 1 / 3, (1, 0): Fraction(1, 3) + Fraction(1, 10**30)})
    groups = s.weight_groups()
    assert [len(offsets) for _, offsets in groups] == [3]


def test_a_group_holds_at_most_the_limit_and_every_entry_once():
    box = Stencil.from_dict({o: 0.5 for o in np.ndindex(5, 5, 5)})
    groups = box.weight_groups()
    sizes = [len(offsets) for _, offsets in groups]
    assert max(sizes) == GROUP_LIMIT and sum(sizes) == 125
    assert [o for _, offsets in groups for o in offsets] == [o for o, _ in box.entries]


def check_numba_is_the_oracle(sweep: Sweep, shape: tuple[int, ...], dtype: str, seed: int) -> None:
    grid = Grid.unit_box(shape, dtype, ghost=sweep.radius)
    rng = np.random.default_rng(seed)
    fields = {n: rng.uniform(-1, 1, grid.padded_shape).astype(grid.dtype) for n in sweep.inputs}
    fields[sweep.out] = np.full(grid.padded_shape, np.nan, grid.dtype)
    ghost = np.ones(grid.padded_shape, bool)
    ghost[grid.interior] = False
    NumbaBackend().sweep(sweep, grid)(fields)
    assert np.array_equal(fields[sweep.out][grid.interior], evaluate_sweep(sweep, grid, fields))
    assert np.all(np.isnan(fields[sweep.out][ghost])), "a ghost cell was written"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_box_of_equal_weights_scaled_by_a_field_is_the_oracle_bit_for_bit(dtype, monkeypatch):
    """27 equal weights: 4 groups, through the row buffer in loops of at most 14 views, times a field, then a
    second term with weights of its own."""
    monkeypatch.setattr(wide, "WIDE_LOOP_VIEWS", 14)
    box = Stencil.from_dict({tuple(i - 1 for i in o): 0.25 for o in np.ndindex(3, 3, 3)})
    sweep = Sweep("out", (Term("u", box, factor="f"), Term("f", Stencil.laplacian(3, 1))))
    assert "part[j] = part[j] + " in sweep_source(sweep, Grid.unit_box((9, 11, 13), dtype, ghost=1))
    check_numba_is_the_oracle(sweep, (9, 11, 13), dtype, seed=1)


WEIGHTS = st.sampled_from([0.25, -1.5, 2.0, 1 / 3, -0.1])  # few values, so weights repeat


def sweeps(nd: int):
    stencil = st.dictionaries(st.tuples(*[st.integers(-2, 2)] * nd), WEIGHTS, min_size=1, max_size=40).map(Stencil.from_dict)
    return st.builds(
        lambda a, b, scaled: Sweep("out", (Term("u", a, factor="f" if scaled else None), Term("f", b))), stencil, stencil, st.booleans()
    )


# every example compiles a kernel: a few by default, more with -m slow
@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("examples", [4, pytest.param(25, marks=pytest.mark.slow, id="25")])
def test_generated_sweeps_with_repeated_weights_are_the_oracle_bit_for_bit(nd, examples):
    @settings(max_examples=examples, deadline=None)
    @given(sweep=sweeps(nd), data=st.data())
    def check(sweep, data):
        shape = tuple(data.draw(st.integers(2 * sweep.radius + 1, 2 * sweep.radius + 8)) for _ in range(nd))
        check_numba_is_the_oracle(sweep, shape, data.draw(st.sampled_from(["float32", "float64"])), data.draw(st.integers(0, 99)))

    check()
