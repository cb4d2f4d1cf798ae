"""Host memory is checked before allocating; Numba threads are shared among the ranks of a node."""

import json
import os
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from stencilforge import resources
from stencilforge.cli import app
from stencilforge.errors import StencilforgeError


def invoke(*args, env=None):
    return CliRunner().invoke(app, [str(a) for a in args], env=env)


def one_line(res):
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.stderr, res.stderr
    return lines[0]


@pytest.mark.parametrize("args", [
    ["heat2d", "--shape", "200000,200000"],
    ["wave3d", "--shape", "1200,1200,1200", "--radius", "4"],
])
def test_a_huge_shape_is_refused_before_allocating(args, monkeypatch):
    monkeypatch.setattr(resources, "available_bytes", lambda: 8 * 10**9)
    line = one_line(invoke("run", *args, "--backend", "numpy"))
    assert "not enough memory" in line and "GB available" in line and "8.00 GB available" in line


def test_the_estimate_counts_the_arrays_a_run_allocates():
    """wave3d's run keeps three time levels of u and the speeds: four arrays, where its sweep once held three."""
    from stencilforge.cli import _arrays_of

    cells = (1000 + 2 * 4) ** 3  # 1000^3 with ghost width 4
    need = resources.needed_bytes(lambda small: _arrays_of("wave3d", small, "float32", {"radius": 4}), (1000,) * 3, False, False)
    assert need == 4 * 4 * cells + 16 * cells  # the four float32 arrays, and float64 values while they are filled


def test_the_estimate_covers_fields_and_outputs():
    from stencilforge.cli import _arrays_of

    def probe(small):
        return _arrays_of("heat2d", small, "float64", {})

    base = resources.needed_bytes(probe, (1000, 1000), False, False)
    assert 2 * 1000 * 1000 * 8 < base < 6 * 1000 * 1000 * 8
    with_outputs = resources.needed_bytes(probe, (1000, 1000), True, True)
    assert with_outputs > base


def test_ranks_on_a_node_count_against_its_memory(monkeypatch):
    monkeypatch.setattr(resources, "available_bytes", lambda: 10**9)

    from stencilforge.cli import _arrays_of

    def probe(small):
        return _arrays_of("heat2d", small, "float32", {})

    resources.check_host_memory("heat2d", (2000, 2000), probe)  # about 0.1 GB: fits once
    with pytest.raises(StencilforgeError, match="16 processes on this node"):
        resources.check_host_memory("heat2d", (2000, 2000), probe, processes=16)


def test_a_memory_error_anyway_is_one_line(monkeypatch):
    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("stencilforge.runner.Simulation", no_memory)
    assert "out of memory" in one_line(invoke("run", "heat2d", "--shape", "16,16", "--backend", "numpy"))


@pytest.mark.parametrize("mask,peers,expected", [
    ({0, 1, 2, 3}, None, 4),  # alone
    ({0, 1, 2, 3}, [{0, 1, 2, 3}] * 2, 2),  # two unbound ranks split the node
    ({0, 1, 2, 3}, [{0, 1, 2, 3}] * 8, 1),  # never fewer than one
    ({0, 1}, [{0, 1}, {2, 3}], 2),  # ranks bound to their own cores use all of theirs
])
def test_thread_share(monkeypatch, mask, peers, expected):
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    monkeypatch.setattr(resources.os, "sched_getaffinity", lambda pid: mask)
    monkeypatch.setattr(resources, "busy_cores", lambda cpus: 0)  # an idle machine
    assert resources.thread_count(None, [p for p in peers] if peers else None) == expected


def test_a_process_alone_leaves_out_the_cores_other_work_keeps_busy(monkeypatch):
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    monkeypatch.setattr(resources.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    ticks = iter([1000, 1000 + 2 * 5 + 1, 50, 51])  # two cores busy for the sample's 5 ticks; one tick was ours
    monkeypatch.setattr(resources, "_cpu_ticks", lambda cpus: next(ticks))
    monkeypatch.setattr(resources, "_own_ticks", lambda: next(ticks))
    monkeypatch.setattr(resources.time, "monotonic", iter([0.0, 0.05]).__next__)
    monkeypatch.setattr(resources.os, "sysconf", lambda name: 100)
    monkeypatch.setattr(resources.time, "sleep", lambda s: None)
    monkeypatch.setattr(resources, "_others_running", lambda: True)
    assert resources.thread_count(None) == 2
    monkeypatch.setattr(resources, "busy_cores", lambda cpus: 6)
    assert resources.thread_count(None) == 1  # never fewer than one
    monkeypatch.setattr(resources, "_others_running", lambda: False)
    assert resources.thread_count(None) == 4  # nothing else runnable: no sample, every core
    assert resources.thread_count(None, [{0, 1, 2, 3}] * 2) == 2  # ranks share the node by its masks, not its load


def test_a_busy_process_on_this_machine_takes_a_core_from_the_default(monkeypatch):
    monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("one core: nothing to leave out")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert resources.thread_count(None) < cores
    finally:
        busy.kill()
        busy.wait()


def test_threads_option_and_environment_override_the_share(monkeypatch):
    monkeypatch.setenv("NUMBA_NUM_THREADS", "3")
    assert resources.thread_count(None, [{0}] * 4) == 3
    assert resources.thread_count(5, [{0}] * 4) == 5
    with pytest.raises(StencilforgeError, match="at least 1"):
        resources.thread_count(0)


def test_the_summary_reports_the_thread_count():
    res = invoke("run", "heat2d", "--shape", "16,16", "--backend", "numba", "--steps", "2", "--threads", "1", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["threads"] == 1
    assert "--threads applies to the numba backend" in one_line(
        invoke("run", "heat2d", "--shape", "16,16", "--backend", "numpy", "--threads", "1"))
    assert "Numba's pool" in one_line(invoke("run", "heat2d", "--shape", "16,16", "--backend", "numba", "--threads", "100000"))
