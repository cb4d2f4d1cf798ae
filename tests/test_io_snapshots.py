"""The background snapshot writer: waits rather than drops, keeps copies, reports failures."""

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from stencilforge.backends import get_backend
from stencilforge.io.snapshots import Ledger, OutputError, StreamingObserver


class GatedSink:
    """Records every append; each append waits until the gate opens."""

    def __init__(self, gate: threading.Event, fail_at: int | None = None):
        self.path = Path("gated.h5")
        self.gate, self.fail_at = gate, fail_at
        self.received: list[tuple[int, float]] = []
        self.count = 0
        self.closed = False

    def append(self, step, t, arrays):
        self.gate.wait()
        if self.fail_at is not None and step == self.fail_at:
            raise OSError(28, "No space left on device")
        self.received.append((step, float(arrays["u"][0, 0])))
        self.count += 1

    def close(self):
        self.closed = True


def _observer(sink, depth=2, every=1, ledger=None):
    layout = {"u": ((4, 5), np.dtype(np.float64))}
    regions = {"u": (slice(1, 5), slice(1, 6))}
    return StreamingObserver(sink, layout, regions, every, ledger or Ledger(), "snapshot", depth)


def test_full_queue_blocks_the_solver_and_drops_nothing():
    gate = threading.Event()
    sink = GatedSink(gate)
    obs = _observer(sink, depth=2)
    backend = get_backend("numpy")
    fields = {"u": np.zeros((6, 7))}
    done = []

    def solver():
        for step in range(1, 6):
            fields["u"][...] = step  # the solver overwrites the field right after each snapshot
            obs(step, 0.1 * step, fields, backend)
            done.append(step)

    thread = threading.Thread(target=solver)
    thread.start()
    time.sleep(0.3)
    # one buffer set is held by the blocked write, one waits in the queue: the third call must wait
    assert done == [1, 2]
    assert thread.is_alive()
    gate.set()
    thread.join(timeout=10)
    obs.close()
    assert done == [1, 2, 3, 4, 5]
    assert sink.received == [(s, float(s)) for s in range(1, 6)]
    assert sink.closed


def test_write_failure_stops_the_next_call_and_names_the_last_good_snapshot():
    gate = threading.Event()
    gate.set()
    ledger = Ledger()
    sink = GatedSink(gate, fail_at=3)
    obs = _observer(sink, depth=1, ledger=ledger)
    backend = get_backend("numpy")
    fields = {"u": np.zeros((6, 7))}
    with pytest.raises(OutputError, match="No space left on device"):
        for step in range(1, 20):
            obs(step, float(step), fields, backend)
    obs.close()  # already reported: closing does not raise again
    assert [s for s, _ in sink.received] == [1, 2]
    assert ledger.snapshot[0] == 2
    assert "last complete snapshot: step 2" in ledger.describe()


def test_failure_in_the_final_drain_is_raised_by_close():
    gate = threading.Event()
    gate.set()
    sink = GatedSink(gate, fail_at=2)
    obs = _observer(sink, depth=3)
    backend = get_backend("numpy")
    fields = {"u": np.zeros((6, 7))}
    obs(1, 1.0, fields, backend)
    obs(2, 2.0, fields, backend)
    with pytest.raises(OutputError, match="step 2"):
        obs.close()
