"""Multigrid split over MPI ranks: bitwise the same solution, residual history and cycle count on 1, 2 and 4 ranks.

Each test launches `mpiexec -n N` on tests/mpi_poisson_driver.py (or the CLI) with a timeout, as test_mpi.py
does. Skipped where mpi4py or mpiexec is missing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py")
sys.path.insert(0, str(Path(__file__).parent))
from mpi_poisson_driver import CASES, solve  # noqa: E402
from stencilforge import StencilforgeError, poisson  # noqa: E402
from test_mpi import MPIEXEC, error_lines, mpiexec  # noqa: E402

pytestmark = [pytest.mark.mpi, pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec on PATH")]
DRIVER = Path(__file__).with_name("mpi_poisson_driver.py")


def launch(backend: str, n: int, tmp_path) -> tuple[dict, dict]:
    out = tmp_path / f"{backend}{n}.npz"
    proc = mpiexec(n, str(DRIVER), backend, str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out) as data:
        meta = json.loads(str(data["__meta__"]))
        return meta, {key: data[key] for key in meta}


@pytest.mark.parametrize("backend", ["numpy", pytest.param("numba", marks=pytest.mark.slow)])
def test_solution_history_and_cycles_bitwise_equal_on_1_2_and_4_ranks(backend, tmp_path):
    one_meta, one_u = launch(backend, 1, tmp_path)
    assert sorted(key.split("@")[0] for key in one_meta) == sorted(label for label, *_ in CASES)
    assert max(m["split_levels"] for m in one_meta.values()) >= 2  # coarse levels split too, not only the finest
    compared = 0
    for n in (2, 4):
        meta, u = launch(backend, n, tmp_path)
        labels = {key.split("@")[0] for key in meta}
        assert labels == {label for label, *_ in CASES}, labels
        for key, m in meta.items():
            label = key.split("@")[0]
            ref = f"{label}@{'x'.join('1' for _ in m['procs'])}"
            assert int(np.prod(m["procs"])) == n
            assert m["cycles"] == one_meta[ref]["cycles"], key
            assert m["residual_history"] == one_meta[ref]["residual_history"], key
            assert u[key].dtype == one_u[ref].dtype and u[key].tobytes() == one_u[ref].tobytes(), f"{key} differs"
            compared += 1
    assert compared >= 2 * len(CASES)
    if backend != "numpy":
        return
    for label, shape, walls, _, options in CASES:  # and the same solution as without MPI
        serial = solve(label, backend=backend)
        split = one_u[f"{label}@{'x'.join('1' for _ in shape)}"]
        assert serial.summary["cycles"] == one_meta[f"{label}@{'x'.join('1' for _ in shape)}"]["cycles"], label
        if "dirichlet" in walls and options.get("method") != "cg":  # no mean or dot product: every bit equal
            assert np.array_equal(serial.u, split), label
        else:
            np.testing.assert_allclose(split, serial.u, rtol=0, atol=1e-12 * np.abs(serial.u).max())


@pytest.mark.gpu
def test_multigrid_on_gpu_ranks_bitwise_equal_on_1_2_and_4_ranks(tmp_path):
    """The CUDA kernels on split levels (ranks sharing the GPUs there are, halos over the transport `auto` picks):
    every case's solution, residual history and cycle count on 2 and 4 ranks are one rank's bits, and numba's
    solution to rounding (the outer norms are CuPy's and NumPy's, which round differently)."""
    from test_mpi_device import gpu_count

    if gpu_count() < 1:
        pytest.skip("needs CuPy and a GPU")
    one_meta, one_u = launch("cuda", 1, tmp_path)
    assert max(m["split_levels"] for m in one_meta.values()) >= 2
    for n in (2, 4):
        meta, u = launch("cuda", n, tmp_path)
        assert {key.split("@")[0] for key in meta} == {label for label, *_ in CASES}
        for key, m in meta.items():
            ref = f"{key.split('@')[0]}@{'x'.join('1' for _ in m['procs'])}"
            assert int(np.prod(m["procs"])) == n
            assert (m["cycles"], m["residual_history"]) == (one_meta[ref]["cycles"], one_meta[ref]["residual_history"]), key
            assert u[key].tobytes() == one_u[ref].tobytes(), f"{key} differs from one GPU rank's"
    for label, shape, _, _, options in CASES:  # float32 cycles (mixed) round differently where the GPU contracts to FMA
        host = solve(label, backend="numba")
        np.testing.assert_allclose(one_u[f"{label}@{'x'.join('1' for _ in shape)}"], host.u, rtol=0,
                                   atol=(1e-6 if options.get("mixed") else 1e-9) * np.abs(host.u).max(), err_msg=label)


def test_cli_under_mpiexec_reports_the_one_rank_result_once():
    args = ("-m", "stencilforge.cli", "run", "poisson2d", "--shape", "50", "44", "--tol", "1e-9", "--backend", "numba", "--json")
    runs = []
    for n in (1, 2):
        proc = mpiexec(n, *args)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.strip().splitlines()
        assert len(lines) == 1, proc.stdout
        runs.append(json.loads(lines[0]))
    one, two = runs
    assert two["ranks"] == 2 and two["converged"] and two["method"] == "multigrid"
    for key in ("cycles", "residual_history", "error", "levels"):
        assert two[key] == one[key], key


def test_cli_refuses_a_grid_too_small_for_the_ranks_in_one_line():
    proc = mpiexec(4, "-m", "stencilforge.cli", "run", "poisson2d", "--shape", "6", "6", "--backend", "numpy")
    assert proc.returncode == 2, proc.stderr
    lines = error_lines(proc)
    assert len(lines) == 1 and "cannot split shape 6x6 over 4 ranks" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_process_grid_needs_a_communicator():
    with pytest.raises(StencilforgeError, match="procs .* needs comm"):
        poisson(np.ones((16, 16)), backend="numpy", procs=(2, 1))
