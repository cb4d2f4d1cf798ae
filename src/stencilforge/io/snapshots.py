"""Observers that copy fields out of the time loop and write them on a background thread.

The solver thread only copies the fields into a free buffer set (on the cuda
backend: a device-to-device copy on the compute stream, then a device-to-host
copy into pinned memory on a second stream ordered by events) and hands it to a writer thread. With all buffer sets in flight the
solver waits for one: a snapshot is never dropped. A failed write stops the run
at the next observer call, and the ledger says what was last written completely.
"""

from __future__ import annotations

import queue
import shlex
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, cast

import numpy as np

from ..errors import OutputError, StencilforgeError
from ..points import Traces


class Sink(Protocol):
    path: Path
    count: int

    def append(self, step: int, t: float, arrays: dict[str, np.ndarray]) -> None: ...

    def close(self) -> None: ...


class SeriesSink(Sink, Protocol):
    """A snapshot file's sink, which also takes the run's traces: with its snapshots, and the rest once its last
    snapshot is written."""

    last_step: int | None

    def write_traces(self, traces: Traces) -> None:
        """Append the run's traces (one row or more) after those the file holds."""


@dataclass
class Ledger:
    """The last complete snapshot and checkpoint, so a failure can say what is safe on disk."""

    snapshot: tuple[int, Path, int] | None = None
    checkpoint: tuple[int, Path] | None = None
    failures: list[str] = field(default_factory=list)

    def record(self, kind: str, step: int, sink: Sink) -> None:
        if kind == "snapshot":
            self.snapshot = (step, sink.path, sink.count)
        else:
            self.checkpoint = (step, sink.path)

    def describe(self) -> str:
        if self.snapshot is None:
            snap = "no complete snapshot"
        else:
            step, path, count = self.snapshot
            snap = f"last complete snapshot: step {step} ({count} in {path})"
        ckpt = "no checkpoint" if self.checkpoint is None else f"last complete checkpoint: step {self.checkpoint[0]} ({self.checkpoint[1]})"
        return f"{snap}; {ckpt}"

    def finite_state(self, step: int, api: bool) -> str:
        """What is on disk after a blow-up whose last finite step is `step`: the files hold only finite states, and a
        run resumed from a checkpoint before `step` reaches it bit for bit (`api`: said as sf.run's keywords)."""
        if self.checkpoint is None or self.checkpoint[0] >= step:
            return self.describe()
        start, path = self.checkpoint
        how = f"resume={str(path)!r}, steps={step - start}" if api else f"--resume {shlex.quote(str(path))} --steps {step - start}"
        return f"{self.describe()}; {how} reproduces step {step} bit for bit"


def reason(exc: Exception) -> str:
    """The first line of an error: HDF5's come with a multi-line stack."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


@dataclass
class _Slot:
    host: dict[str, np.ndarray]
    device: dict = field(default_factory=dict)


class _HostCopier:
    """NumPy/Numba fields: a plain copy on the solver thread; the write is what runs in the background."""

    def __init__(self, backend, regions: dict):
        self.backend, self.regions = backend, regions

    def slot(self, layout: dict) -> _Slot:
        return _Slot({name: np.empty(shape, dtype) for name, (shape, dtype) in layout.items()})

    def copy(self, fields: dict, slot: _Slot) -> Callable[[], None]:
        for name, region in self.regions.items():
            np.copyto(slot.host[name], self.backend.to_host(fields[name][region]))
        return lambda: None


class _CudaCopier:
    """CuPy fields: stage on the compute stream, copy to pinned host memory on a second stream.

    The device-to-device copy into a contiguous staging buffer is enqueued on the
    compute stream, so later steps cannot overwrite the field before it is read; it
    costs one read and one write of the field in device bandwidth. The slow
    device-to-host transfer then runs on a non-blocking stream, waiting only on the
    'staged' event, while the following steps compute. The writer thread waits on
    the 'copied' event before touching the pinned buffer, and returns the slot (staging
    and pinned buffers) to the pool only afterwards.
    """

    def __init__(self, backend, regions: dict):
        import cupy
        import cupyx

        self.cp, self.cupyx, self.regions = cupy, cupyx, regions
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def slot(self, layout: dict) -> _Slot:
        cp = self.cp
        return _Slot(
            host={name: self.cupyx.empty_pinned(shape, dtype) for name, (shape, dtype) in layout.items()},
            device={name: cp.empty(shape, dtype) for name, (shape, dtype) in layout.items()},
        )

    def copy(self, fields: dict, slot: _Slot) -> Callable[[], None]:
        cp = self.cp
        compute = cp.cuda.get_current_stream()
        for name, region in self.regions.items():
            cp.copyto(slot.device[name], fields[name][region])
        staged = cp.cuda.Event(block=False, disable_timing=True)
        staged.record(compute)
        self.stream.wait_event(staged)
        runtime = cp.cuda.runtime
        for name, staging in slot.device.items():
            pinned = slot.host[name]
            runtime.memcpyAsync(pinned.ctypes.data, staging.data.ptr, pinned.nbytes, runtime.memcpyDeviceToHost, self.stream.ptr)
        copied = cp.cuda.Event(block=False, disable_timing=True)
        copied.record(self.stream)
        return copied.synchronize


class StreamingObserver:
    """Time-loop observer: every `every` global steps (and at the last), copy `regions` of the fields and write them in the background.

`every` None: the last step only (the loop calls every observer with the final state).

    `depth` buffer sets bound the memory; when all are in flight the solver waits.
    `kind` is "snapshot" or "checkpoint", for the ledger and messages.
    `traces(step)`: the receivers' rows up to `step` not yet handed over (None if there are none), written to the
    sink after the snapshot of that step, so that a run killed later keeps them.
    """

    def __init__(self, sink: Sink, layout: dict, regions: dict, every: int | None, ledger: Ledger,
                 kind: str = "snapshot", depth: int = 3, after: "StreamingObserver | None" = None,
                 traces: Callable[[int], Traces | None] | None = None):
        if every is not None and every < 1:
            raise StencilforgeError(f"{kind} interval must be at least 1 step, got {every}")
        if depth < 1:
            raise StencilforgeError(f"need at least one {kind} buffer, got {depth}")
        self.sink, self.layout, self.regions = sink, layout, regions
        self.every, self.ledger, self.kind, self.depth = every, ledger, kind, depth
        self.after = after  # a checkpoint waits for the snapshots before it: resuming must not leave a gap
        self.traces = traces
        self._copier: _CudaCopier | _HostCopier | None = None
        self._free: queue.Queue = queue.Queue()
        self._work: queue.Queue = queue.Queue()
        self._error: str | None = None
        self._reported = False
        self._thread = threading.Thread(target=self._drain, name=f"stencilforge-{kind}-writer", daemon=True)
        self._thread.start()

    def __call__(self, step: int, t: float, fields: dict, backend) -> None:
        self._raise_if_failed()
        if self.after is not None:
            self.after.wait()
        if self._copier is None:
            cls = _CudaCopier if backend.name == "cuda" else _HostCopier
            self._copier = cls(backend, self.regions)
            try:
                for _ in range(self.depth):
                    self._free.put(self._copier.slot(self.layout))
            except MemoryError:  # CuPy's OutOfMemoryError included
                size = sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in self.layout.values())
                raise StencilforgeError(
                    f"not enough memory for {self.depth} {self.kind} buffer set(s) of {size / 2**20:.0f} MiB each"
                ) from None
        slot = self._free.get()  # blocks while every buffer set is being written: wait, never drop
        self._raise_if_failed()
        done = self._copier.copy(fields, slot)
        self._work.put((step, t, slot, done, self.traces(step) if self.traces is not None else None))

    def _drain(self) -> None:
        while (item := self._work.get()) is not None:
            step, t, slot, done, traces = item
            before = self.sink.count
            what = self.kind
            try:
                if self._error is None:
                    done()
                    self.sink.append(step, t, slot.host)
                    self.ledger.record(self.kind, step, self.sink)
                    if traces is not None:
                        what = "the traces"
                        cast(SeriesSink, self.sink).write_traces(traces)  # only a snapshot file's observer takes traces
            except Exception as exc:  # any write failure (OSError, h5py errors) must reach the solver thread
                if self.sink.count > before:  # the data are complete; only a sidecar (XDMF) or the traces failed
                    self.ledger.record(self.kind, step, self.sink)
                self._error = f"writing {what} at step {step} to {self.sink.path} failed: {reason(exc)}"
                self.ledger.failures.append(self._error)
            finally:
                self._free.put(slot)
                self._work.task_done()
        self._work.task_done()

    def wait(self) -> None:
        """Block until every snapshot handed over so far is written (or has failed)."""
        self._work.join()

    def _raise_if_failed(self) -> None:
        if self._error is not None and not self._reported:
            self._reported = True
            raise OutputError(self._error)

    def close(self) -> None:
        """Finish every queued write, close the sink, and report a failure not yet reported."""
        self._work.put(None)
        self._thread.join()
        try:
            self.sink.close()
        except Exception as exc:  # the final flush (npz, HDF5 close) can fail like any write
            if self._error is None:
                self._error = f"finishing {self.sink.path} failed: {reason(exc)}"
                self.ledger.failures.append(self._error)
        self._raise_if_failed()
