"""Two steps of a problem's pass in one kernel: which problems qualify, the CUDA source compiles (NVRTC,
no GPU), and the time loop's bookkeeping around a two-step pass gives the single steps' fields."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import stencilforge as sf
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.ir.analysis import slot_name
from stencilforge.printers import cuda_pair
from stencilforge.printers.numpy import pass_kernel
from test_equations import _nvrtc_available, _random_problem, gray_scott, heat, terms, walls


class PairedNumpy(NumpyBackend):
    """The numpy oracle with a two-step 'kernel' made of two of its passes, reading level 0 and writing
    level 1 only, the middle state's walls taken as the CUDA kernel takes them (periodic, Neumann: the
    gather; Dirichlet: the output's ghost cells), so the loop around it can be checked without a GPU."""

    fuses_steps = True

    def __init__(self):
        super().__init__()
        self.pairs = 0

    def equation_pair(self, p, lattice, constants, walls, reach, images=None):
        single = pass_kernel(p, lattice)
        written = [name for name, _ in p.writes]

        def run(arrays, params, t, t2):
            middle = {k: v.copy() for k, v in arrays.items()}
            single(middle, params, t)
            second = dict(arrays)
            for name in written:  # the middle state's walls: images, or the output's ghost cells (Dirichlet)
                second[name] = middle[slot_name((name, 1))]
                if walls is not None:
                    self.sim._fill(name, second[name], t2)
            single(second, params, t2)
            self.pairs += 1

        return run


def _paired(problem):
    backend = PairedNumpy()
    backend.sim = sf.Simulation(problem, backend, sweeps=False)
    return backend


@pytest.mark.parametrize("make", ["gray_scott", "neumann", "static_dirichlet", "moving_dirichlet"])
def test_two_step_passes_in_the_loop_give_the_single_steps_fields(make):
    grid = sf.Grid((13, 17), extent=1.0)
    u = sf.Field("u", grid)
    problems = {
        "moving_dirichlet": lambda: heat((13, 17))[0],
        "gray_scott": lambda: gray_scott(shape=(13, 17)),
        "neumann": lambda: sf.Problem([sf.Eq(u.next, u + 0.1 * (u[1, 1] + u[-1, 0] - 2 * u) - 0.01 * u**3 + 0.1 * sf.sin(grid.t))],
                                      initial={u: sf.sin(3 * grid.x) + grid.y}, boundary={u: sf.Neumann()}, dt=0.1),
        "static_dirichlet": lambda: sf.Problem([sf.Eq(u.next, u + 0.2 * sf.laplacian(u) * sf.cos(u))],
                                               initial={u: grid.x * grid.y}, boundary={u: sf.Dirichlet(grid.x + 1.0)}, dt=0.1),
    }
    p = problems[make]()
    backend = _paired(p)
    sim = backend.sim
    assert not isinstance(sim.pair_plan(), str)
    got = sf.run(p, backend=backend, steps=23, check_every=10, generated=True)
    want = sf.run(p, backend=NumpyBackend(), steps=23, check_every=10, generated=True)
    assert backend.pairs > 0 and got.summary["steps_per_pass"] == 2
    for name, value in want.fields.items():
        np.testing.assert_array_equal(got.fields[name], value)


def test_snapshots_land_on_single_steps_between_two_step_passes(tmp_path):
    p = gray_scott(shape=(13, 17))
    backend = _paired(p)
    got = sf.run(p, backend=backend, steps=20, out=str(tmp_path / "a.npz"), snapshot_every=5)
    want = sf.run(p, backend=NumpyBackend(), steps=20, out=str(tmp_path / "b.npz"), snapshot_every=5)
    assert backend.pairs > 0
    a, b = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
    assert sorted(a.files) == sorted(b.files)
    assert list(a["step"]) == [5, 10, 15, 20]
    for key in ("step", "time", "fields/u", "fields/v"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    np.testing.assert_array_equal(got.fields["v"], want.fields["v"])


def test_problems_that_cannot_pair_say_why():
    grid = sf.Grid((9, 9), extent=1.0)
    u, v, w = sf.Field("u", grid), sf.Field("v", grid), sf.Field("w", grid, levels=3)
    cases = {
        "two passes": sf.Problem([sf.Eq(u.next, u + sf.laplacian(v)), sf.Eq(v.next, v + sf.laplacian(u.next))],
                                 boundary={u: sf.Periodic(), v: sf.Periodic()}),
        "sources": sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u))], boundary={u: sf.Periodic()},
                              sources=[sf.Source(u, (0.5, 0.5), sf.sin(grid.t))]),
        "Dirichlet beside periodic": sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u))],
                                                boundary={u: (sf.Dirichlet(0.0), sf.Periodic())}),
        "walls that differ": sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(v)), sf.Eq(v.next, v + 0.1 * sf.laplacian(u))],
                                        boundary={u: sf.Periodic(), v: sf.Neumann()}),
        "three levels": sf.Problem([sf.Eq(w.next, 2 * w - w.prev + 0.1 * sf.laplacian(w))], boundary={w: sf.Dirichlet(0.0)}),
    }
    why = {name: sf.Simulation(p, NumpyBackend(), sweeps=False).pair_plan() for name, p in cases.items()}
    assert why == {
        "two passes": "a step runs 2 passes",
        "sources": "it has point sources",
        "Dirichlet beside periodic": "its walls mix Dirichlet with periodic or Neumann",
        "walls that differ": "its fields' walls differ",
        "three levels": "a written field does not keep two time levels",
    }


@pytest.mark.skipif(not _nvrtc_available(), reason="cuda-bindings (NVRTC) not installed")
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(terms, terms, walls, st.sampled_from(["none", "tanh", "min", "where", "abs"]), st.sampled_from(["float32", "float64"]))
def test_two_step_kernels_compile_for_cuda(u_terms, v_terms, wall, fn, dtype):
    from stencilforge.backends.cuda.compile import compile_cubin

    p = _random_problem(u_terms, v_terms, wall, fn, dtype, (8, 9))
    sim = sf.Simulation(p, NumpyBackend())
    plan = sim.pair_plan()
    assert not isinstance(plan, str), plan
    images = {"u_next": plan[0], "v_next": plan[0]} if plan[0] is not None else None
    source, names = cuda_pair.pair_source(p.analysis.passes[0], dtype, p.constants, plan[0], plan[1], images=images)
    assert names[:2] == ("u_next", "v_next")
    for arch in ("sm_80", "sm_90"):
        assert compile_cubin(source, arch, "a two-step pass", cuda_pair.OPTIONS)


def test_single_steps_when_asked_and_the_summary_counts_paired_steps():
    p = gray_scott(shape=(13, 17))
    paired, single = _paired(p), _paired(p)
    a = sf.run(p, backend=paired, steps=23, check_every=10)
    b = sf.run(p, backend=single, steps=23, check_every=10, fuse_steps=False)
    assert a.summary["fused_steps"] == 2 * paired.pairs > 0 and a.summary["steps_per_pass"] == 2
    assert single.pairs == 0 and b.summary["steps_per_pass"] == 1 and "fused_steps" not in b.summary
    for name in ("u", "v"):
        np.testing.assert_array_equal(a.fields[name], b.fields[name])
