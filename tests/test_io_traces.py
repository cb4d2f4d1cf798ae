"""Traces in the snapshot file: written when a run ends (done, stopped by a signal, blown up), read back bit for bit,
continued by a resumed run without a step lost or repeated."""

import importlib
import shutil
import signal
from pathlib import Path

import h5py
import pytest

import stencilforge as sf
from stencilforge.convergence import load_problem_file
from stencilforge.io.series import open_series

FORMATS = ("run.h5", "run.nc", "run.npz")
H = 0.25
PROBLEM_FILE = Path(__file__).parent / "fixtures" / "receivers.py"
pair = load_problem_file(PROBLEM_FILE).build


def needs_library(name: str) -> None:
    if name.endswith(".nc"):
        pytest.importorskip("h5netcdf")


def same(a: sf.Traces, b: sf.Traces) -> bool:
    return (a.values.tobytes() == b.values.tobytes() and a.steps.tobytes() == b.steps.tobytes()
            and a.times.tobytes() == b.times.tobytes() and a.at.tobytes() == b.at.tobytes() and a.fields == b.fields)


def traces_in(path) -> sf.Traces:
    with open_series(path) as series:
        assert series.traces is not None, f"{path} holds no traces"
        return series.traces


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("name", FORMATS)
def test_the_file_holds_the_results_traces_bit_for_bit(tmp_path, backend, name):
    needs_library(name)
    result = sf.run(pair(), steps=9, backend=backend, out=str(tmp_path / name), snapshot_every=4)
    assert result.traces is not None and list(result.traces.steps) == [2, 4, 6, 8]
    assert same(traces_in(tmp_path / name), result.traces)


def test_the_hdf5_layout_is_plain_datasets_beside_the_fields(tmp_path):
    result = sf.run(pair(), steps=7, backend="numpy", out=str(tmp_path / "run.h5"), snapshot_every=3)
    with h5py.File(tmp_path / "run.h5", "r") as f:
        g = f["traces"]
        assert g["values"].shape == (3, 4) and g["values"][...].tobytes() == result.traces.values.tobytes()
        assert list(g["step"][...]) == [2, 4, 6] and g["time"][...].tobytes() == result.traces.times.tobytes()
        assert g["at"][...].tobytes() == result.traces.at.tobytes() and g["at"].attrs["axes"] == "y x"
        assert [s.decode() for s in g["field"][...]] == ["u", "v", "u", "v"]
        assert list(f["step"][...]) == [3, 6, 7]  # the snapshots as before


def test_the_netcdf_traces_are_result_to_xarrays_on_their_own_dimensions(tmp_path):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    result = sf.run(pair(), steps=7, backend="numpy", out=str(tmp_path / "run.nc"), snapshot_every=3)
    with xr.open_dataset(tmp_path / "run.nc", engine="h5netcdf") as ds:
        traces = ds["traces"].load()
        assert traces.dims == ("trace_time", "receiver") and ds.sizes["time"] == 3 and ds.sizes["trace_time"] == 3
        assert list(traces["receiver_field"].values) == ["u", "v", "u", "v"]
        assert traces["receiver_x"].values.tobytes() == result.traces.at[:, 1].tobytes()
        assert list(traces["trace_step"].values) == [2, 4, 6]
        xr.testing.assert_identical(traces.drop_attrs(), result.to_xarray()["traces"])


@pytest.mark.parametrize("name", FORMATS)
def test_a_resumed_run_continues_the_traces_and_recomputes_those_after_its_checkpoint(tmp_path, name):
    """Resumed at step 6 into the file of its first 6 steps, the file holds the traces of 12 straight steps; resumed again
    from that checkpoint for 2 steps, the traces after step 8 (which the file held) are gone and none is repeated."""
    needs_library(name)
    straight = sf.run(pair(), steps=12, backend="numpy", out=str(tmp_path / f"straight{name[3:]}"), snapshot_every=4).traces
    out, ckpt = str(tmp_path / name), str(tmp_path / "run.ckpt.h5")
    sf.run(pair(), steps=6, backend="numpy", out=out, snapshot_every=4, checkpoint=ckpt, checkpoint_every=6)
    shutil.copy(ckpt, tmp_path / "c6.h5")
    resumed = sf.run(pair(), steps=6, backend="numpy", out=out, snapshot_every=4, resume=ckpt)
    assert list(resumed.traces.steps) == [8, 10, 12]  # the run's own, from where it resumed
    assert same(traces_in(out), straight)
    sf.run(pair(), steps=2, backend="numpy", out=out, snapshot_every=4, resume=str(tmp_path / "c6.h5"), checkpoint=str(tmp_path / "c6.h5"))
    assert same(traces_in(out), straight.upto(8))


@pytest.mark.parametrize("name", FORMATS)
def test_a_resume_with_other_receivers_is_refused_in_one_line(tmp_path, name):
    needs_library(name)
    out, ckpt = str(tmp_path / name), str(tmp_path / "run.ckpt.h5")
    sf.run(pair(), steps=4, backend="numpy", out=out, snapshot_every=2, checkpoint=ckpt, checkpoint_every=2)
    moved = pair(receivers=lambda fields: [sf.Receiver(fields["u"], (1.3, 1.0))])
    with pytest.raises(sf.StencilforgeError, match=f"^cannot append to .*{name}: its receivers do not match this run's$"):
        sf.run(moved, steps=2, backend="numpy", out=out, snapshot_every=2, resume=ckpt)


@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply")  # recording infinities
@pytest.mark.parametrize("every", [2, 100])
@pytest.mark.parametrize("name", FORMATS)
def test_a_blow_up_leaves_the_traces_up_to_its_last_finite_step(tmp_path, name, every):
    """Finite at the check of step 4, not at step 6: the file holds the traces of steps 1 to 4, also where no snapshot
    was written before the blow-up (every=100)."""
    needs_library(name)
    grid = sf.Grid((6, 7), spacing=H)
    u = sf.Field("u", grid)
    growing = sf.Problem([sf.Eq(u.next, u * 1e100 + 1)], boundary={u: sf.Dirichlet(0.0)}, dt=0.5, name="growing",
                         receivers=[sf.Receiver(u, (0.5, 0.75)), sf.Receiver(u, (0.6, 0.6))])
    with pytest.raises(sf.errors.BlowUp, match="finite at step 4"):
        sf.run(growing, steps=20, backend="numpy", out=str(tmp_path / name), snapshot_every=every, check_every=2)
    kept = sf.run(growing, steps=4, backend="numpy").traces
    with open_series(tmp_path / name) as series:
        assert list(series.steps) == ([2, 4] if every == 2 else [])
        assert same(series.traces, kept) and list(kept.steps) == [1, 2, 3, 4]


def test_a_field_named_like_the_traces_is_refused_for_netcdf(tmp_path):
    pytest.importorskip("h5netcdf")
    grid = sf.Grid((6, 7), spacing=H)
    u = sf.Field("traces", grid)
    p = sf.Problem([sf.Eq(u.next, u + 0.1 * sf.laplacian(u))], boundary={u: sf.Dirichlet(0.0)}, dt=0.5,
                   receivers=[sf.Receiver(u, (0.5, 0.5))])
    with pytest.raises(sf.StencilforgeError, match="cannot write field 'traces' to .*a coordinate or the traces"):
        sf.run(p, steps=2, backend="numpy", out=str(tmp_path / "run.nc"), snapshot_every=1)
    assert not (tmp_path / "run.nc").exists()


@pytest.mark.parametrize("sig,status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_run_stopped_by_a_signal_leaves_its_traces_up_to_the_step_it_stopped_at(tmp_path, sig, status):
    """`stencilforge run FILE.py`: the traces of every recorded step up to the final snapshot's, the same bits as a run of
    exactly that many steps."""
    from test_io_crash import start, wait_for_progress

    proc = start(tmp_path, "run", PROBLEM_FILE, "--backend", "numpy", "--steps", "100000000", "--snapshot-every", "50",
                 "--out", "run.h5")
    wait_for_progress(tmp_path / "run.h5", proc, 0)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    with open_series(tmp_path / "run.h5") as series:
        step, traces = int(series.steps[-1]), series.traces
    assert f"stopped by {sig.name} at step {step};" in err
    assert traces is not None and traces.steps[-1] == step - step % 2 and same(traces, sf.run(pair(), steps=step, backend="numpy").traces)


@pytest.mark.parametrize("name", ["run.h5", "run.nc"])
def test_traces_whose_second_session_failed_are_not_counted(tmp_path, monkeypatch, name):
    """The disk fills between the two sessions of the trace rows written with the first snapshot: the run stops with
    one line saying what is safe, the file opens with that snapshot and no trace row, and a run resumed from the
    checkpoint writes its own rows after those."""
    needs_library(name)
    module = importlib.import_module("stencilforge.io.netcdf" if name.endswith(".nc") else "stencilforge.io.hdf5")
    sink = module.NcSink if name.endswith(".nc") else module.H5Sink
    real, original = module.reserve, sink.write_traces
    reserved = []

    def full_at_the_second(path, nbytes):
        reserved.append(nbytes)
        if len(reserved) == 2:
            raise OSError(28, "No space left on device")
        real(path, nbytes)

    def cut_off(self, traces):
        monkeypatch.setattr(module, "reserve", full_at_the_second)
        try:
            original(self, traces)
        finally:
            monkeypatch.setattr(module, "reserve", real)

    monkeypatch.setattr(sink, "write_traces", cut_off)
    out, ckpt = str(tmp_path / name), str(tmp_path / "run.ckpt.h5")
    with pytest.raises(sf.StencilforgeError, match=f"^writing the traces at step 4 to .*{name} failed: \\[Errno 28\\] No space "
                                                   r"left on device; run stopped. last complete snapshot: step 4 \(1 in .*; "
                                                   r"last complete checkpoint: step 5"):
        sf.run(pair(), steps=9, backend="numpy", out=out, snapshot_every=4, checkpoint=ckpt, checkpoint_every=5)
    assert len(reserved) == 2
    with open_series(out) as series:
        assert list(series.steps) == [4] and len(series.traces.steps) == 0
    monkeypatch.undo()
    sf.run(pair(), steps=7, backend="numpy", out=out, snapshot_every=4, resume=ckpt)
    straight, written = sf.run(pair(), steps=12, backend="numpy").traces, traces_in(out)
    later = straight.steps > 5
    assert list(written.steps) == [6, 8, 10, 12] and written.values.tobytes() == straight.values[later].tobytes()


@pytest.mark.parametrize("name", FORMATS)
def test_the_traces_go_into_the_file_with_each_snapshot(tmp_path, monkeypatch, name):
    """Each snapshot takes the rows recorded up to its step along, the rest follow at the end: the file holds the
    result's traces, and was written to once per snapshot and once more."""
    needs_library(name)
    module = importlib.import_module({".h5": "stencilforge.io.hdf5", ".nc": "stencilforge.io.netcdf", ".npz": "stencilforge.io.npz"}[
        Path(name).suffix])
    sink = {".h5": "H5Sink", ".nc": "NcSink", ".npz": "NpzSink"}[Path(name).suffix]
    original, seen = getattr(module, sink).write_traces, []

    def counted(self, traces):
        seen.append(list(traces.steps))
        original(self, traces)

    monkeypatch.setattr(getattr(module, sink), "write_traces", counted)
    result = sf.run(pair(), steps=11, backend="numpy", out=str(tmp_path / name), snapshot_every=4)
    assert seen == [[2, 4], [6, 8], [10]]  # the final snapshot (step 11) has no row of its own; the end has none left
    assert same(traces_in(tmp_path / name), result.traces)


def test_a_run_killed_with_kill_9_keeps_the_traces_up_to_a_snapshot(tmp_path):
    """SIGKILL between snapshots: the file holds the traces of every recorded step up to the last snapshot whose rows
    were written (the last or the one before), the same bits as a run of that many steps."""
    from test_io_crash import start, wait_for_progress

    proc = start(tmp_path, "run", PROBLEM_FILE, "--backend", "numpy", "--steps", "100000000", "--snapshot-every", "50",
                 "--out", "run.h5")
    wait_for_progress(tmp_path / "run.h5", proc, 200)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    with open_series(tmp_path / "run.h5") as series:
        steps, traces = list(series.steps), series.traces
    assert traces is not None and len(traces.steps) and traces.steps[-1] in (steps[-1], steps[-2]), (steps[-2:], traces.steps[-3:])
    assert same(traces, sf.run(pair(), steps=int(traces.steps[-1]), backend="numpy").traces)
