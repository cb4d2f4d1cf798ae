"""Decomposed runs under mpiexec: bitwise the single-process fields for every problem, rank count and process grid.

Each test launches `mpiexec -n N` on tests/mpi_driver.py (or the CLI) with a
timeout, so a hang fails the test instead of stalling the suite. Skipped
where mpi4py or mpiexec is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py")
MPIEXEC = shutil.which("mpiexec") or shutil.which(os.path.join(os.path.dirname(sys.executable), "mpiexec"))
pytestmark = [pytest.mark.mpi, pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH")]

sys.path.insert(0, str(Path(__file__).parent))
import stencilforge as sf  # noqa: E402
from mpi_driver import CASES  # noqa: E402
from mpi_equation_driver import CASES as EQUATION_CASES, run as run_case  # noqa: E402
from mpi_solve_driver import CASES as SOLVE_CASES, problem as solve_problem  # noqa: E402
from stencilforge import problems  # noqa: E402
from test_mpi_device import gpu_count  # noqa: E402

DRIVER = Path(__file__).with_name("mpi_driver.py")
SRC = Path(__file__).resolve().parents[1] / "src"
TIMEOUT_S = 120


def mpiexec(n: int, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    cmd = [MPIEXEC, "-n", str(n), sys.executable, *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def reference():
    """Single-process (no MPI: `sf.run` without comm) results of every case, per backend, computed lazily."""
    cache = {}

    def get(backend: str):
        if backend not in cache:
            cache[backend] = {
                label: sf.run(problems.problem(name, **params)[0], backend=backend, **loop) for label, name, params, loop in CASES
            }
        return cache[backend]

    return get


@pytest.mark.parametrize(
    "backend,n,grid",
    [
        ("numpy", 1, "auto"),
        ("numpy", 2, "auto"),
        ("numpy", 3, "auto"),
        ("numpy", 4, "auto"),
        ("numpy", 4, "alt"),
        pytest.param("numba", 1, "auto", marks=pytest.mark.slow),
        pytest.param("numba", 2, "alt", marks=pytest.mark.slow),
        pytest.param("numba", 4, "auto", marks=pytest.mark.slow),
        ("numba", 4, "alt"),
    ],
)
def test_fields_bitwise_equal_to_one_process(backend, n, grid, reference, tmp_path):
    out = tmp_path / "fields.npz"
    proc = mpiexec(n, str(DRIVER), backend, grid, str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = reference(backend)
    with np.load(out) as data:
        meta = json.loads(str(data["__meta__"]))
        compared = 0
        for label, *_ in CASES:
            if label not in meta:
                continue
            assert np.prod(meta[label]["procs"]) == n
            expected = ref[label]
            assert meta[label]["steps"] == expected.summary["steps"], label
            assert meta[label]["errors"] == expected.summary["errors"], label
            for field, arr in expected.fields.items():
                got = data[f"{label}/{field}"]
                assert got.dtype == arr.dtype and got.shape == arr.shape, (label, field)
                assert np.array_equal(got, arr, equal_nan=True), f"{label}/{field} differs on {meta[label]['procs']}"
            if "error" in expected.summary:
                assert meta[label]["error"]["max_abs"] == expected.summary["error"]["max_abs"], label
                assert meta[label]["error"]["rel_l2"] == pytest.approx(expected.summary["error"]["rel_l2"], rel=1e-12)
            if expected.summary.get("residual") is not None:
                assert meta[label]["residual"] == pytest.approx(expected.summary["residual"], rel=1e-12)
            compared += 1
    assert compared >= (len(CASES) if grid == "auto" else 3)


def test_residual_and_errors_identical_across_rank_counts(tmp_path):
    """Exact global sums: the residual and error norms have the same bits for any decomposition."""
    metas = []
    for n, grid in ((1, "auto"), (2, "auto"), (2, "alt"), (4, "auto")):
        out = tmp_path / f"m{n}{grid}.npz"
        proc = mpiexec(n, str(DRIVER), "numpy", grid, str(out))
        assert proc.returncode == 0, proc.stderr[-3000:]
        with np.load(out) as data:
            metas.append(json.loads(str(data["__meta__"])))
    for label in ("poisson2d", "heat2d", "derivatives_x4"):
        values = {json.dumps({k: m[label][k] for k in ("residual", "error", "steps")}) for m in metas if label in m}
        assert len(values) == 1, values


def cli(n: int, *args: str) -> subprocess.CompletedProcess:
    return mpiexec(n, "-m", "stencilforge.cli", "run", *args)


def test_cli_rank_zero_reports_json_with_process_grid():
    proc = cli(2, "heat2d", "--shape", "20", "12", "--steps", "5", "--backend", "numpy", "--procs", "1", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    summary = json.loads(lines[0])
    assert summary["procs"] == [1, 2] and summary["ranks"] == 2 and summary["shape"] == [20, 12]
    assert 0 <= summary["comm_s"] < summary["wall_s"] + 0.05 and summary["compute_s"] >= 0  # the stepping's, not the set-up's


def error_lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(
    "n,args,message",
    [
        (2, ("heat2d", "--shape", "16", "16", "--procs", "3", "1"), "makes 3 processes but 2 ranks"),
        (2, ("heat2d", "--shape", "16", "16", "--procs", "2", "1", "1"), "needs 2 values"),
        (4, ("wave3d", "--shape", "17", "17", "17", "--radius", "8", "--procs", "4", "1", "1"), "--procs 2 2 1"),
        (3, ("wave3d", "--shape", "17", "17", "17", "--radius", "8"), "use fewer ranks"),
        (2, ("derivatives", "--shape", "8", "9", "--accuracy", "4", "--procs", "1", "2"), "fewer than the"),
    ],
)
def test_cli_refusals_are_one_line_from_rank_zero(n, args, message):
    proc = cli(n, *args, "--backend", "numpy", "--steps", "2")
    assert proc.returncode == 2, proc.stderr
    lines = error_lines(proc)
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_failing_rank_stops_every_rank_with_its_message():
    proc = mpiexec(2, str(DRIVER), "numpy", "fail-rank")
    assert proc.returncode != 0
    assert "error: rank 1: RuntimeError: injected failure in a sweep" in proc.stderr


def test_a_blow_up_on_one_rank_is_reported_once_by_every_rank():
    proc = mpiexec(2, str(DRIVER), "numpy", "nan-rank")
    assert proc.returncode == 2, proc.stderr
    lines = error_lines(proc)
    assert len(lines) == 1 and "blew up" in lines[0], proc.stderr


def test_a_blow_up_keeps_each_ranks_block_of_the_last_finite_state():
    proc = mpiexec(2, str(DRIVER), "numpy", "kept-blocks")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all(line.endswith("kept blocks equal one process's: True") for line in lines), proc.stdout


def _datasets(path: Path) -> dict[str, bytes]:
    """Every dataset of an HDF5 file (fields, steps, times), as bytes; attributes such as the command line differ."""
    import h5py

    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[...].tobytes()) if isinstance(obj, h5py.Dataset) else None)
    return out


@pytest.mark.parametrize(
    "problem,args",
    [
        ("heat2d", ("--shape", "20", "17")),
        ("wave3d", ("--shape", "11", "10", "9", "--radius", "2", "--source", "--velocity", "layered")),
    ],
)
def test_outputs_are_global_files_and_a_run_resumes_on_another_rank_count(problem, args, tmp_path):
    pytest.importorskip("h5py")
    common = (*args, "--backend", "numpy")

    def files(tag: str, steps: int, *extra: str) -> tuple[str, ...]:
        return ("--steps", str(steps), "--checkpoint-every", "6", "--checkpoint", str(tmp_path / f"{tag}.ckpt.h5"), *extra)

    snaps = ("--snapshot-every", "4", "--out")
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    single = subprocess.run(
        [sys.executable, "-m", "stencilforge.cli", "run", problem, *common, *files("one", 12, *snaps, str(tmp_path / "one.h5"))],
        env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    assert single.returncode == 0, single.stderr
    whole = cli(3, problem, *common, *files("three", 12, *snaps, str(tmp_path / "three.h5")))
    assert whole.returncode == 0, whole.stderr
    assert _datasets(tmp_path / "three.h5") == _datasets(tmp_path / "one.h5")
    assert _datasets(tmp_path / "three.ckpt.h5") == _datasets(tmp_path / "one.ckpt.h5")

    half = cli(3, problem, *common, *files("half", 6))
    assert half.returncode == 0, half.stderr
    resumed = cli(2, "--resume", str(tmp_path / "half.ckpt.h5"), "--backend", "numpy", *files("resumed", 6), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["step"] == 12
    assert _datasets(tmp_path / "resumed.ckpt.h5") == _datasets(tmp_path / "one.ckpt.h5")


@pytest.mark.parametrize("example", ["gray_scott", "wave2d_sponge"])
def test_a_problem_files_outputs_are_global_files_and_a_run_resumes_on_another_rank_count(example, tmp_path):
    """A user's own equations (periodic Gray-Scott; a wave with a source, a sponge and three time levels): one global
    snapshot and checkpoint file, bitwise those of one process, and a 2-rank run resuming a 3-rank checkpoint."""
    pytest.importorskip("h5py")
    path = str(Path(__file__).resolve().parents[1] / "examples" / f"{example}.py")
    common = (path, "--shape", "20,17", "--backend", "numpy")

    def files(tag: str, steps: int, *extra: str) -> tuple[str, ...]:
        return ("--steps", str(steps), "--checkpoint-every", "6", "--checkpoint", str(tmp_path / f"{tag}.ckpt.h5"), *extra)

    snaps = ("--snapshot-every", "4", "--out")
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    single = subprocess.run([sys.executable, "-m", "stencilforge.cli", "run", *common, *files("one", 12, *snaps, str(tmp_path / "one.h5"))],
                            env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert single.returncode == 0, single.stderr
    whole = cli(3, *common, *files("three", 12, *snaps, str(tmp_path / "three.h5")))
    assert whole.returncode == 0, whole.stderr
    assert _datasets(tmp_path / "three.h5") == _datasets(tmp_path / "one.h5")
    assert _datasets(tmp_path / "three.ckpt.h5") == _datasets(tmp_path / "one.ckpt.h5")

    half = cli(3, *common, *files("half", 6))
    assert half.returncode == 0, half.stderr
    resumed = cli(2, *common, "--resume", str(tmp_path / "half.ckpt.h5"), *files("resumed", 6), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["step"] == 12
    assert _datasets(tmp_path / "resumed.ckpt.h5") == _datasets(tmp_path / "one.ckpt.h5")


@pytest.mark.parametrize("suffix", [".h5", ".nc"])
def test_the_traces_ranks_write_are_those_one_process_writes(suffix, tmp_path):
    """A problem file with receivers, one between the cells of the two blocks: 2 ranks (the y axis cut) write the
    snapshot file of one process, traces included, bit for bit."""
    pytest.importorskip("h5netcdf" if suffix == ".nc" else "h5py")
    common = (str(Path(__file__).parent / "fixtures" / "receivers.py"), "--backend", "numpy", "--steps", "9", "--snapshot-every", "4")
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    single = subprocess.run([sys.executable, "-m", "stencilforge.cli", "run", *common, "--out", str(tmp_path / f"one{suffix}")],
                            env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert single.returncode == 0, single.stderr
    split = cli(2, *common, "--procs", "2", "1", "--out", str(tmp_path / f"two{suffix}"), "--json")
    assert split.returncode == 0, split.stderr
    assert json.loads(split.stdout)["procs"] == [2, 1]
    one = _datasets(tmp_path / f"one{suffix}")
    assert any("trace" in name for name in one) and _datasets(tmp_path / f"two{suffix}") == one


def test_a_write_failure_on_rank_zero_stops_every_rank_at_that_step():
    proc = mpiexec(2, str(DRIVER), "numpy", "fail-write")
    assert proc.returncode == 2, proc.stderr
    lines = sorted(error_lines(proc))
    assert lines == [
        "error: rank 0: writing snapshot at step 4 failed: injected",
        "error: rank 1: rank 0: writing snapshot at step 4 failed: injected",
    ], proc.stderr


def test_files_another_run_writes_are_refused_by_every_rank(tmp_path):
    """Rank 0 alone holds a decomposed run's files; its refusal stops every rank, with one line."""
    pytest.importorskip("h5py")
    from test_io_crash import LONG_RUN, start, wait_for_progress

    first = start(tmp_path, *LONG_RUN)
    try:
        wait_for_progress(tmp_path / "run.h5", first, 0)
        proc = cli(2, "heat2d", "--shape", "48", "40", "--backend", "numpy", "--steps", "8", "--snapshot-every", "2",
                   "--out", str(tmp_path / "run.h5"), "--overwrite")
        assert first.poll() is None
    finally:
        first.kill()
        first.communicate()
    assert proc.returncode == 2, proc.stderr
    assert error_lines(proc) == [f"error: rank 0: snapshot file {tmp_path / 'run.h5'} is being written by another run; "
                                 "wait for it to end or choose another file"], proc.stderr
    assert "Traceback" not in proc.stderr


def test_numba_threads_are_shared_among_the_ranks_of_a_node():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    cmd = [MPIEXEC, "-n", "2", sys.executable, "-m", "stencilforge.cli", "run", "heat2d", "--shape", "32", "32",
           "--steps", "4", "--backend", "numba", "--json"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[0])
    assert summary["threads"] == max(1, len(os.sched_getaffinity(0)) // 2)


EQUATION_DRIVER = Path(__file__).with_name("mpi_equation_driver.py")


@pytest.fixture(scope="module")
def equation_reference():
    """One-process runs (no MPI) of every equation case, per backend; periodic lowered cases through their passes."""
    cache = {}

    def get(backend: str):
        if backend not in cache:
            cache[backend] = {}
            for label, build, steps in EQUATION_CASES:
                cache[backend][label] = run_case(build(), backend, steps, generated=label == "advection")
        return cache[backend]

    return get


@pytest.mark.parametrize(
    "backend,n",
    [("numpy", 1), ("numpy", 2), ("numpy", 3), ("numpy", 4), ("numba", 2)]
    + [pytest.param("numba", n, marks=pytest.mark.slow) for n in (1, 3, 4)],
)
def test_equation_problems_bitwise_equal_to_one_process(backend, n, equation_reference, tmp_path):
    """Gray-Scott (periodic), two passes with Dirichlet walls of x and t, a Neumann wall, sources and receivers, a
    wave with sinc sources and receivers across the cuts, a lowered problem with a source and a periodic lowered
    problem: every process grid of n ranks gives one process's fields, traces, errors and residual (exact sums on
    both sides)."""
    out = tmp_path / "fields.npz"
    proc = mpiexec(n, str(EQUATION_DRIVER), backend, str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = equation_reference(backend)
    with np.load(out) as data:
        meta = json.loads(str(data["__meta__"]))
        grids = {}
        for key, m in meta.items():
            label = key.split("@")[0]
            expected = ref[label].summary
            assert np.prod(m["procs"]) == n and m["sweeps"] == expected["sweeps"], key
            assert m["steps"] == expected["steps"] and m["errors"] == expected["errors"], key
            assert m["residual"] == expected.get("residual"), key
            for name, arr in ref[label].fields.items():
                assert np.array_equal(data[f"{key}/{name}"], arr), f"{key}: {name} differs"
            traces = ref[label].traces
            assert (traces is None) == (f"{key}/traces" not in data), key
            assert traces is None or np.array_equal(data[f"{key}/traces"], traces.values), f"{key}: traces differ"
            grids.setdefault(label, []).append(tuple(m["procs"]))
    assert sorted(grids) == sorted(label for label, *_ in EQUATION_CASES)
    assert all(len(g) >= (1 if n == 1 else 2) for g in grids.values()), grids


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.gpu
def test_equation_problems_on_gpu_ranks_bitwise_equal_to_one_rank(n, tmp_path):
    """The same problems on cuda ranks (sharing the GPUs there are; halos staged or over NCCL): every process grid
    of n ranks gives the one-rank run's fields, errors and residual. The reference is one rank, not a plain
    process: a lowered problem decomposed evaluates its initial values on the host, a plain GPU run on the device,
    and the device's sin and exp differ from the host's in last bits."""
    if gpu_count() < 1:
        pytest.skip("needs CuPy and a GPU")
    one, many = tmp_path / "one.npz", tmp_path / "many.npz"
    for count, out in ((1, one), (n, many)):
        proc = mpiexec(count, str(EQUATION_DRIVER), "cuda", str(out))
        assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(one) as ref, np.load(many) as data:
        ref_meta, meta = json.loads(str(ref["__meta__"])), json.loads(str(data["__meta__"]))
        assert sorted({k.split("@")[0] for k in meta}) == sorted(label for label, *_ in EQUATION_CASES)
        for key, m in meta.items():
            base = f"{key.split('@')[0]}@{'x'.join(['1'] * len(m['procs']))}"
            assert np.prod(m["procs"]) == n and {k: m[k] for k in ("steps", "errors", "residual", "sweeps")} == {
                k: ref_meta[base][k] for k in ("steps", "errors", "residual", "sweeps")}, key
            names = [k.split("/", 1)[1] for k in ref.files if k.startswith(base + "/")]
            assert names and all(np.array_equal(data[f"{key}/{name}"], ref[f"{base}/{name}"]) for name in names), key


def test_example_under_mpiexec_prints_the_one_process_summary():
    path = str(Path(__file__).resolve().parents[1] / "examples" / "gray_scott.py")
    args = ("run", path, "--backend", "numba", "--steps", "20", "--shape", "24", "24", "--json")
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    single = subprocess.run([sys.executable, "-m", "stencilforge.cli", *args], env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert single.returncode == 0, single.stderr
    proc = mpiexec(2, "-m", "stencilforge.cli", *args)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    one, two = json.loads(single.stdout), json.loads(lines[0])
    assert two["ranks"] == 2 and "procs" not in one
    keys = ("problem", "shape", "dtype", "steps", "t", "params", "passes_per_step", "sweeps", "errors")
    assert {k: two[k] for k in keys} == {k: one[k] for k in keys}


def test_equation_blocks_smaller_than_the_ghost_width_are_refused_in_one_line():
    path = str(Path(__file__).resolve().parents[1] / "examples" / "gray_scott.py")
    proc = mpiexec(3, "-m", "stencilforge.cli", "run", path, "--backend", "numpy", "--steps", "2", "--shape", "2", "2")
    assert proc.returncode == 2, proc.stderr
    lines = error_lines(proc)
    assert len(lines) == 1 and "cannot split shape 2x2 over 3 ranks" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr



SOLVE_DRIVER = Path(__file__).with_name("mpi_solve_driver.py")


def _solved(n: int, backend: str, path: Path) -> tuple[dict, dict]:
    proc = mpiexec(n, str(SOLVE_DRIVER), backend, str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(path) as data:
        return json.loads(str(data["__meta__"])), {k: data[k] for k in data.files if k != "__meta__"}


def _without_grid(solves: dict) -> dict:
    return {name: {k: v for k, v in s.items() if k not in ("procs", "ranks")} for name, s in solves.items()}


@pytest.fixture(scope="module")
def solved_on_one_rank(tmp_path_factory):
    """The solve cases on one rank (numpy), and in one process without MPI."""
    meta, fields = _solved(1, "numpy", tmp_path_factory.mktemp("solve") / "one.npz")
    process = {name: sf.run(solve_problem(name, shape, options), steps=steps, backend="numpy")
               for name, shape, steps, options in SOLVE_CASES}
    return meta, fields, process


@pytest.mark.parametrize("backend,n", [("numpy", 2), ("numpy", 3), ("numpy", 4), pytest.param("numba", 2, marks=pytest.mark.slow)])
def test_steps_with_solves_bitwise_equal_on_every_rank_count(backend, n, solved_on_one_rank, tmp_path):
    """Projection (cavity, channel, Taylor-Green) and implicit diffusion (backward Euler, Crank-Nicolson) split over n
    ranks: each step's multigrid runs on the ranks' blocks with exact sums, so fields, cycle counts and final
    residuals are one rank's bits (numba: to rounding); one rank's fields are one process's to rounding (a process's
    sums are plain sums: a singular solve's mean can differ in its last bit)."""
    meta, fields = _solved(n, backend, tmp_path / "fields.npz")
    one_meta, one, process = solved_on_one_rank
    assert list(meta) == [name for name, *_ in SOLVE_CASES]
    for name, m in meta.items():
        assert np.prod(m["procs"]) == n and max(m["procs"]) > 1 and m["solves"], name
        assert all(s["ranks"] == n and s["procs"] == m["procs"] for s in m["solves"].values()), name
        assert all(s["cycles"] > 0 for s in m["solves"].values()), f"{name}: no solve had work to do"
        if backend == "numpy":
            assert _without_grid(m["solves"]) == _without_grid(one_meta[name]["solves"]), name
        for field, arr in process[name].fields.items():
            key = f"{name}/{field}"
            if backend == "numpy":
                assert np.array_equal(fields[key], one[key]), f"{key} differs from one rank's"
            np.testing.assert_allclose(fields[key], arr, rtol=0, atol=1e-12, err_msg=key)
            np.testing.assert_allclose(one[key], arr, rtol=0, atol=1e-13, err_msg=key)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [2, 4])
def test_steps_with_solves_on_gpu_ranks_bitwise_equal_to_one_rank(n, solved_on_one_rank, tmp_path):
    """The same projection and implicit steps on cuda ranks (sharing the GPUs there are): each step's multigrid runs
    the CUDA kernels (the array code for the screened form) on the ranks' blocks, so fields and solve summaries on n
    ranks are one GPU rank's bits, and numpy's fields to rounding."""
    if gpu_count() < 1:
        pytest.skip("needs CuPy and a GPU")
    one_meta, one = _solved(1, "cuda", tmp_path / "one.npz")
    meta, fields = _solved(n, "cuda", tmp_path / "many.npz")
    _, _, process = solved_on_one_rank
    for name, m in meta.items():
        assert np.prod(m["procs"]) == n and max(m["procs"]) > 1, name
        assert all(s["cycles"] > 0 for s in m["solves"].values()), f"{name}: no solve had work to do"
        assert _without_grid(m["solves"]) == _without_grid(one_meta[name]["solves"]), name
        for field, arr in process[name].fields.items():
            key = f"{name}/{field}"
            assert np.array_equal(fields[key], one[key]), f"{key} differs from one GPU rank's"
            np.testing.assert_allclose(fields[key], arr, rtol=0, atol=1e-11, err_msg=key)


STOP_DRIVER = Path(__file__).with_name("mpi_stop_driver.py")


@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=pytest.mark.slow)])
def test_stop_rules_stop_at_one_process_step_on_every_process_grid(backend, tmp_path):
    """Exact sums: the CFD course's rules take the same values, bit for bit, and stop at the same step on every
    process grid of 1 and 2 ranks as in one process; a Python function as the rule is refused in one line."""
    import stencilforge as sf
    from mpi_stop_driver import SHAPE
    from test_stop_rules import COURSE_RULES, laplace

    want = {name: sf.run(laplace(SHAPE, until=rule), backend=backend, check_every=1).summary
            for name, (rule, _, _) in COURSE_RULES.items()}
    for n in (1, 2):
        out = tmp_path / f"{n}.json"
        proc = mpiexec(n, str(STOP_DRIVER), backend, str(out))
        assert proc.returncode == 0, proc.stderr[-3000:]
        found = json.loads(out.read_text())
        assert "a Python function runs in one process" in found.pop("function")
        assert len(found) == len(COURSE_RULES) * n, found
        for key, s in found.items():
            ref = want[key.split("@")[0]]
            assert s["stop"] == "until" and s["step"] == ref["step"] and s["until"] == ref["until"], key


def test_a_strict_run_stops_at_one_process_step_on_every_rank(tmp_path):
    """The solve's residuals are global exact sums, so both ranks see the miss at one process's step and stop there
    together: exit status 4 from each, one line from rank 0, and the checkpoint holds one process's state there, bit
    for bit (the solve has Dirichlet walls: no mean is removed, whose plain sum in one process could differ)."""
    from stencilforge.errors import SolveMissed
    from stencilforge.io import checkpoint
    from test_missed_solves import PROBLEM, build

    with pytest.raises(SolveMissed) as one:
        sf.run(build(), backend="numpy", strict_solves=True)
    ckpt = tmp_path / "run.ckpt.h5"
    proc = cli(2, str(PROBLEM), "--backend", "numpy", "--procs", "1", "2", "--strict-solves", "--checkpoint-every", "4",
               "--checkpoint", str(ckpt))
    assert proc.returncode == 4, proc.stderr[-3000:]
    (line,) = error_lines(proc)
    assert f"the relative residual {one.value.residual:.3e} after 5 cycles at step {one.value.step} " in line, line
    assert line.endswith(f"checkpoint at step {one.value.step} in {ckpt}") and "Traceback" not in proc.stderr
    saved = checkpoint.read(ckpt)
    g = (saved.fields["p"].shape[0] - saved.info.shape[0]) // 2
    assert saved.step == one.value.step and g > 0
    assert np.array_equal(saved.fields["p"][g:-g, g:-g], one.value.result.fields["p"])
