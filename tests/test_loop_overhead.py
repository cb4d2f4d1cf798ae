"""What the time loop adds to its kernels: the bench's time-loop and cold-start rows, the host fill of scaled
Dirichlet walls, the gather of periodic and mirrored walls."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest
from typer.testing import CliRunner

from stencilforge import problems
from stencilforge.backends.base import Launch
from stencilforge.backends.numba import NumbaBackend
from stencilforge.backends.numpy_ref import NumpyBackend
from stencilforge.bench import loop
from stencilforge.bench.coldstart import cold_start
from stencilforge.bench.loop import LoopWorkload, loop_matrix, loop_row, loop_rows
from stencilforge.boundary import Dirichlet, _ghost_cells, all_faces, bind
from stencilforge.cli import app
from stencilforge.grid import Grid
from stencilforge.ir.nodes import AXIS_NAMES
from stencilforge.printers.numpy import wall_values

LOOP_KEYS = {"problem", "label", "shape", "dtype", "backend", "status", "steps", "fused_steps", "loop_ms", "kernel_ms",
             "overhead", "overhead_min", "loop_samples_ms", "kernel_samples_ms", "repeats", "load_average"}


@pytest.fixture(scope="module")
def rows():
    tiny = [LoopWorkload("heat2d", (20, 24)), LoopWorkload("heat3d", (9, 10, 11)), LoopWorkload("poisson2d", (20, 24)),
            LoopWorkload("wave3d", (18, 19, 20)), LoopWorkload("gray_scott", (16, 16))]
    return loop_rows(tiny, "numpy", 2, 0.001)


def test_every_loop_problem_has_a_row_with_its_keys(rows):
    assert [r["problem"] for r in rows] == list(loop.NAMES)
    for r in rows:
        assert r["status"] == "ok", r
        assert set(r) == LOOP_KEYS
        assert r["steps"] % loop.CHECK_EVERY == 0  # a whole number of check intervals
        assert len(r["loop_samples_ms"]) == len(r["kernel_samples_ms"]) == r["repeats"] == 2
    json.dumps(rows)


def test_overhead_is_the_loop_median_over_the_kernel_median(rows):
    for r in rows:
        assert r["loop_ms"] == pytest.approx(statistics.median(r["loop_samples_ms"]))
        assert r["kernel_ms"] == pytest.approx(statistics.median(r["kernel_samples_ms"]))
        assert r["overhead"] == pytest.approx(r["loop_ms"] / r["kernel_ms"] - 1)
        assert r["overhead_min"] == pytest.approx(min(r["loop_samples_ms"]) / min(r["kernel_samples_ms"]) - 1)


def test_loop_row_takes_medians_of_its_own_samples():
    row = loop_row(LoopWorkload("heat2d", (8, 8)), "numba", 100, 98, [3e-3, 1e-3, 2e-3], [1e-3, 4e-3, 1.6e-3])
    assert (row["loop_ms"], row["kernel_ms"]) == pytest.approx((2.0, 1.6))
    assert row["overhead"] == pytest.approx(0.25)
    assert row["overhead_min"] == pytest.approx(0.0)


def test_the_kernel_baseline_takes_the_loops_mix_of_pairs_and_single_steps_on_fresh_fields(monkeypatch):
    import stencilforge.simulation

    calls, built = [], []

    class Counted(stencilforge.simulation.Simulation):
        """The subject's simulation with its kernels replaced by counters: 2 for a fused pass, 1 for a single step."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.passes = [(p, lambda arrays, params, t: calls.append(1)) for p, _ in self.passes]
            built.append(self)

        def build_fused(self):
            self.fused = Launch(lambda arrays, times: calls.append(2), steps=2)
            return None

    monkeypatch.setattr(stencilforge.simulation, "Simulation", Counted)
    subject = loop._Subject(LoopWorkload("heat2d", (20, 24)), "numba")
    subject.kernels(100, 98)
    subject.kernels(100, 98)
    assert sorted(calls) == [1] * 4 + [2] * 98
    assert len(built) == 2 and not np.shares_memory(built[0].arrays()["u"], built[1].arrays()["u"])


def test_loop_matrix_follows_names_and_sizes():
    assert [w.name for w in loop_matrix(False, True)] == list(loop.NAMES)
    chosen = loop_matrix(False, False, ["heat3d", "jacobi2d", "gray_scott"], {"3d": (8, 9, 10)})
    assert [(w.name, w.shape) for w in chosen] == [("heat3d", (8, 9, 10)), ("gray_scott", (2048, 2048))]


def test_cold_start_runs_fresh_processes_on_empty_then_primed_caches():
    row = cold_start(LoopWorkload("heat2d", (12, 16)), "numpy")
    for run in (row["cold"], row["warm"]):
        assert run["status"] == "ok", run
        parts = ("import_s", "setup_s", "compile_s", "first_step_s")
        assert run["to_first_step_s"] == pytest.approx(sum(run[k] for k in parts))
        assert all(run[k] >= 0 for k in parts) and run["process_s"] >= run["to_first_step_s"]
        assert run["first_steps"] in (1, 2)


def test_cli_prints_the_loop_table_and_writes_its_rows(tmp_path):
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(app, ["bench", "--backend", "numpy", "--problems", "heat2d,gray_scott", "--size", "2d=16x20",
                                      "--peers", "none", "--repeats", "1", "--no-cold-start", "--json", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert [r["label"] for r in data["time_loop"]] == ["heat2d 16x20 float32", "gray_scott 16x20 float32"]
    assert [w["label"] for w in data["workloads"]] == ["heat2d 16x20 float32"] and data["cold_start"] == []
    assert "time loop" in result.output and "gray_scott 16x20 float32" in result.output


def gathered(grid, wall, faces, arr, t):
    """The ghost cells set through one flat index of every face's cells, as the device path sets them
    (`_ghost_cells`, spatial part evaluated once at t = 0, times f(t) in float64, rounded once)."""
    index, coords = _ghost_cells(grid, faces, grid.padded_shape[-1])
    spatial = np.broadcast_to(np.asarray(wall.value(**dict(zip(AXIS_NAMES[grid.ndim], coords)), t=0.0), dtype=np.float64), index.shape)
    arr.reshape(-1)[index] = spatial * wall.time_factor(t)


@pytest.mark.parametrize("name,shape,dtype", [("heat2d", (13, 17), "float32"), ("heat3d", (7, 9, 11), "float64"),
                                              ("wave3d", (17, 18, 19), "float32")])
def test_scaled_walls_fill_host_boxes_with_the_gathers_bits(name, shape, dtype):
    """NumPy's multiply into each box, and Numba's parallel writer (every core, the boxes' rows in one range)."""
    step = problems.linear_step(name, shape=shape, dtype=dtype, **({"radius": 3} if name == "wave3d" else {}))
    (cond,) = set(step.problem.boundary["u"])  # one Dirichlet wall of x and t on every face
    wall = wall_values(cond.value, step.values)  # as a run binds it
    assert wall.time_factor is not None  # value(x) * f(t): scaled, not re-evaluated
    grid = step.lattice
    for faces in (all_faces(grid.ndim), ((0, 1), (grid.ndim - 1, 0))):  # every face, and a decomposed block's few
        for backend in (NumpyBackend(), NumbaBackend()):
            boxes, gather = (np.full(grid.padded_shape, np.nan, grid.dtype) for _ in range(2))
            for t in (0.0, 0.37, 1.5):
                bind(wall, grid, backend, faces)(boxes, t)
                gathered(grid, wall, faces, gather, t)
                assert np.array_equal(boxes, gather, equal_nan=True)


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_numba_scaled_walls_round_as_numpy(ndim):
    """Products in float64 rounded once to float32 or float64, on boxes of every rank and strided views."""
    rng = np.random.default_rng(ndim)
    scale = NumbaBackend().wall_scaler()
    for dtype in (np.float32, np.float64):
        values = rng.standard_normal((5, 7, 3)[:ndim]) * 10.0 ** rng.integers(-30, 30, (5, 7, 3)[:ndim])
        out, want = (np.full((20, 20, 20)[:ndim], np.nan, dtype) for _ in range(2))
        box = tuple(slice(1, 1 + n) for n in values.shape[:-1]) + (slice(2, 2 + 2 * values.shape[-1], 2),)
        scale(out[box], values, np.pi / 7)
        np.multiply(values, np.pi / 7, out=want[box])
        assert np.array_equal(out, want, equal_nan=True)
    with pytest.raises(ValueError, match="shape"):  # the kernel does not check its indices: the writer does
        scale(np.zeros((3, 4)), np.zeros((3, 5)), 1.0)


def test_scaled_walls_evaluate_their_spatial_part_once():
    calls = []

    def value(x, y, t):
        calls.append(t)
        return np.sin(x) * np.cos(y)

    grid = Grid((6, 7), (0.1, 0.2), "float32", 2, (0.0, 0.0))
    fill = Dirichlet(value, time_factor=lambda t: np.exp(-t)).bind(grid, np, all_faces(2))
    arr = np.zeros(grid.padded_shape, np.float32)
    for t in (0.1, 0.2, 0.3):
        fill(arr, t)
    assert calls == [0.0]
    y, x = grid.mesh()  # by name: x is the last axis
    expected = (np.sin(x) * np.cos(y) * np.exp(-0.3)).astype(np.float32)
    walls = np.ones(grid.padded_shape, bool)
    walls[grid.interior] = False
    assert np.array_equal(arr[walls], expected[walls]) and not arr[grid.interior].any()


@pytest.mark.parametrize("shape,walls", [((7, 9), ("periodic", "neumann")), ((5, 6, 7), ("neumann", "periodic", "periodic"))])
def test_the_wall_gather_maps_every_ghost_cell_once_to_its_interior_image(shape, walls):
    import stencilforge as sf
    from stencilforge.backends.numpy_ref import NumpyBackend
    from stencilforge.simulation import Simulation

    grid = sf.Grid(shape, extent=1.0)
    u = sf.Field("u", grid)
    conds = [sf.Periodic() if w == "periodic" else sf.Neumann() for w in walls]
    problem = sf.Problem([sf.Eq(u.next, u + 0.01 * sf.laplacian(u, order=4))], initial={u: 1.0}, boundary={u: conds}, dt=0.1)
    sim = Simulation(problem, NumpyBackend())
    dst, src = sim._ghost_images(conds)
    lat = sim.lattice
    ghost = np.ones(lat.padded_shape, bool)
    ghost[lat.interior] = False
    assert np.array_equal(dst, np.flatnonzero(ghost))  # each ghost cell once, in address order
    g = lat.ghost
    for axis, wall in enumerate(walls):
        i, j = np.unravel_index(dst, lat.padded_shape)[axis] - g, np.unravel_index(src, lat.padded_shape)[axis] - g
        n = lat.shape[axis]
        expected = np.mod(i, n) if wall == "periodic" else np.where(i < 0, -1 - i, np.where(i >= n, 2 * n - 1 - i, i))
        assert np.array_equal(j, expected) and ((0 <= j) & (j < n)).all()  # images lie inside


@pytest.mark.parametrize("shape,walls,dtype", [((7, 9), ("periodic", "neumann"), "float32"),
                                               ((5, 6, 7), ("neumann", "periodic", "periodic"), "float64")])
@pytest.mark.parametrize("serial", [True, False])
def test_numbas_gather_writes_numpys_cells_before_and_after_its_compile(shape, walls, dtype, serial, monkeypatch):
    """NumPy copies while Numba's gather compiles (serial for few cells, parallel for more), the kernel after: the same
    cells, every ghost cell poisoned."""
    import stencilforge as sf
    from stencilforge.backends.numba import backend as numba_backend
    from stencilforge.simulation import Simulation

    monkeypatch.setattr(numba_backend, "SERIAL_GATHER", 10**9 if serial else 0)

    grid = sf.Grid(shape, extent=1.0, dtype=dtype)
    u = sf.Field("u", grid)
    conds = [sf.Periodic() if w == "periodic" else sf.Neumann() for w in walls]
    problem = sf.Problem([sf.Eq(u.next, u + 0.01 * sf.laplacian(u, order=4))], initial={u: 1.0}, boundary={u: conds}, dt=0.1)
    sim = Simulation(problem, NumpyBackend())
    dst, src = sim._ghost_images(conds)
    base = np.random.default_rng(3).random(sim.lattice.padded_shape).astype(dtype)
    base.reshape(-1)[dst] = np.nan
    want = base.copy()
    NumpyBackend.copy_cells([want], dst, src)
    assert not np.isnan(want).any()
    backend = NumbaBackend()
    first = base.copy()
    backend.copy_cells([first], dst, src)
    assert np.array_equal(first, want)
    compiled = backend._gathers[(np.dtype(dtype), serial)]
    if compiled is not True:  # True once a call found it compiled
        compiled.result()
    later = [base.copy(), base.copy()]
    backend.copy_cells(later, dst, src)
    assert all(np.array_equal(a, want) for a in later)
