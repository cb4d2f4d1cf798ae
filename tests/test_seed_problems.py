"""The seed problems give the bits they gave before.

tests/fixtures/seed_fields.npz holds each case's final field from numpy and
numba (`final_field`, saved with np.savez_compressed) at the commit where the
CPU backends began to sum a stencil's entries of equal weight before
multiplying (`Stencil.weight_groups`), on an Intel Xeon with AVX-512.
tests/fixtures/seed_fields_cdca103.npz holds the same fields as the hand-written
problem modules computed them at commit cdca103, entry by entry: the results
must stay within a few roundings of the field's scale per step of those.
NumPy picks its float64 exp by the CPU's features (a SIMD version where
AVX-512 is, else the C library's), and the two differ by an ulp at some
arguments; the initial values and walls of heat2d in float64 go through exp.
tests/fixtures/seed_math_probe.npz holds np.exp, np.sin and np.cos over
[-6, 6] as that kind of machine computes them: where this machine computes the
same, the fields must be the fixture's bit for bit; elsewhere within 2 ulp of
it. On every machine numba's fields are numpy's, bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stencilforge as sf
from stencilforge import problems

FIXTURE = np.load(Path(__file__).parent / "fixtures" / "seed_fields.npz")
HAND_WRITTEN = np.load(Path(__file__).parent / "fixtures" / "seed_fields_cdca103.npz")
PROBE = np.load(Path(__file__).parent / "fixtures" / "seed_math_probe.npz")
SAME_MATH = all(np.array_equal(getattr(np, f)(PROBE["x"]), PROBE[f]) for f in ("exp", "sin", "cos"))
CASES = {
    "heat2d_f32": ("heat2d", dict(shape=(13, 17), dtype="float32"), 9),
    "heat2d_f64": ("heat2d", dict(shape=(13, 17), dtype="float64", alpha=0.7), 9),
    "heat3d_f32": ("heat3d", dict(shape=(7, 9, 11), dtype="float32"), 5),
    "heat3d_f64": ("heat3d", dict(shape=(7, 9, 11), dtype="float64"), 5),
    "poisson2d_f32": ("poisson2d", dict(shape=(11, 14), dtype="float32"), 25),
    "poisson2d_f64": ("poisson2d", dict(shape=(11, 14), dtype="float64"), 25),
    "wave3d_r2_f32": ("wave3d", dict(shape=(9, 10, 11), dtype="float32", radius=2), 6),
    "wave3d_r8_f64": ("wave3d", dict(shape=(18, 17, 19), dtype="float64", radius=8), 4),
    "wave3d_layered_source_f32": ("wave3d", dict(shape=(12, 13, 14), dtype="float32", radius=4, velocity="layered", source=True), 6),
}


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_seed_problem_results_are_unchanged(case, backend):
    got = final_field(case, backend)
    if SAME_MATH:
        np.testing.assert_array_equal(got, FIXTURE[f"{case}_{backend}"])
    else:
        np.testing.assert_array_max_ulp(got, FIXTURE[f"{case}_{backend}"], maxulp=2)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_seed_problem_results_are_within_rounding_of_the_hand_written_modules(case, backend):
    """Grouping a stencil's equal weights moves each step's values by a few roundings (2.6 eps of the
    field's largest value at most, over these cases); 2 eps a step bounds it."""
    got, old = final_field(case, backend), HAND_WRITTEN[f"{case}_{backend}"]
    scale = np.finfo(got.dtype).eps * np.abs(old).max()
    assert np.abs(got.astype(np.float64) - old).max() <= 2 * CASES[case][2] * scale


def final_field(case: str, backend: str) -> np.ndarray:
    name, kw, steps = CASES[case]
    jacobi = {"method": "jacobi"} if name in problems.POISSON else {}  # the seed's method, iterated `steps` times
    result = sf.solve(name, steps=steps, backend=backend, **kw, **jacobi)
    return np.asarray(result.fields["u"])  # each field's current level, by name


@pytest.mark.parametrize("case", sorted(CASES))
def test_seed_problem_numba_gives_numpys_bits_on_this_machine(case):
    np.testing.assert_array_equal(final_field(case, "numba"), final_field(case, "numpy"))
