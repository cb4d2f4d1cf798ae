"""Device halo paths: transport choice and pinned staging (on NumPy under mpiexec), and the cuda backend
decomposed over GPUs, bitwise equal to one GPU (marked gpu, skipped without one).
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

from stencilforge.distributed.device import choose_transport
from stencilforge.errors import StencilforgeError

MPIEXEC = shutil.which("mpiexec") or shutil.which(os.path.join(os.path.dirname(sys.executable), "mpiexec"))
DRIVER = Path(__file__).with_name("mpi_driver.py")
SRC = Path(__file__).resolve().parents[1] / "src"
TIMEOUT_S = 300


def gpu_count() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy, no driver or no device
        return 0


def mpiexec(n: int, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    cmd = [MPIEXEC, "-n", str(n), sys.executable, *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def load(path):
    with np.load(path) as data:
        return json.loads(str(data["__meta__"])), {k: data[k] for k in data.files if k != "__meta__"}


@pytest.mark.parametrize("halo", ["bogus", "nccl", "mpi"])
def test_host_backends_refuse_device_transports(halo):
    with pytest.raises(StencilforgeError, match="unknown halo transport|device arrays"):
        choose_transport(object(), np, halo)


@pytest.mark.mpi
@pytest.mark.parametrize("n,grid", [(2, "slabs"), (4, "slabs"), (4, "alt")])
def test_staged_transport_on_numpy_is_bitwise_one_process(n, grid, tmp_path):
    """Pinned-staging logic (host mirrors), checked on the CPU."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec on PATH")
    pytest.importorskip("mpi4py")
    one, many = tmp_path / "one.npz", tmp_path / "many.npz"
    proc = mpiexec(1, str(DRIVER), "numpy", "auto", str(one))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = mpiexec(n, str(DRIVER), "numpy", grid, str(many), "staged")
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, ref = load(one)
    meta, got = load(many)
    assert got, "no case ran"
    for key, arr in got.items():
        assert np.array_equal(arr, ref[key], equal_nan=True), f"{key} differs on {meta[key.split('/')[0]]['procs']}"
    assert all(m["halo"] == "staged" for m in meta.values())


# ------------------------------------------------------------------ GPU


@pytest.mark.gpu
@pytest.mark.mpi
@pytest.mark.parametrize(
    "strategy,n,grid,halo",
    [
        ("naive", 2, "auto", "auto"),
        ("naive", 2, "slabs", "auto"),
        ("naive", 4, "auto", "auto"),
        ("naive", 4, "alt", "staged"),
        ("naive", 4, "slabs", "auto"),
    ],
)
def test_cuda_fields_bitwise_equal_to_one_gpu(strategy, n, grid, halo, tmp_path):
    if gpu_count() < 1:
        pytest.skip("no CUDA device")
    if MPIEXEC is None:
        pytest.skip("no mpiexec on PATH")
    one, many = tmp_path / "one.npz", tmp_path / "many.npz"
    proc = mpiexec(1, str(DRIVER), f"cuda:{strategy}", "auto", str(one), "auto")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = mpiexec(n, str(DRIVER), f"cuda:{strategy}", grid, str(many), halo)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, ref = load(one)
    meta, got = load(many)
    assert got
    for key, arr in got.items():
        assert np.array_equal(arr, ref[key], equal_nan=True), f"{key} differs on {meta[key.split('/')[0]]['procs']}"
