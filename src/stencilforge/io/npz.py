"""Snapshot series as one .npz, for small runs: kept in memory and rewritten atomically after every snapshot.

Rewriting the whole file each time costs O(snapshots^2) bytes, which is why
.npz is for small runs; in exchange the file on disk always holds exactly the
snapshots counted as complete, whatever stops the run.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StencilforgeError
from ..points import Traces
from .meta import SNAPSHOT_FORMAT as FORMAT, Receivers, RunInfo, receivers_match
from .paths import atomic_path

META_KEY = "__meta__"


def read_meta(path: Path) -> dict | None:
    """The metadata dict of an .npz snapshot file, or None when it is not one."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return json.loads(str(data[META_KEY]))
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None


class NpzSink:
    """Same interface as H5Sink; the file appears with the first snapshot and is complete after each. The traces
    of the run's `receivers` are arrays `traces/values`, `traces/step`, `traces/time`, `traces/at` and `traces/field`."""

    def __init__(self, path: Path, info: RunInfo, fields: dict, every: int | None, t0: float = 0.0, dt: float = 0.0,
                 resume_step: int | None = None, receivers: Receivers | None = None):
        self.path = Path(path)
        self.info = info
        self.every, self.t0, self.dt = int(every or 0), float(t0), float(dt)
        self.layout = {name: (tuple(shape), np.dtype(dtype)) for name, (shape, dtype) in fields.items()}
        self.names = tuple(fields)
        self.frames: dict[str, list[np.ndarray]] = {name: [] for name in self.names}
        self.steps: list[int] = []
        self.times: list[float] = []
        self.count = 0
        self.last_step: int | None = None
        self.receivers = receivers
        self.traces = Traces(np.empty((0, len(receivers.fields))), np.empty(0, np.int64), np.empty(0), receivers.at,
                             receivers.fields) if receivers is not None else None
        if resume_step is not None:
            self._adopt(resume_step)

    def _adopt(self, resume_step: int) -> None:
        """Continue the series in the file (same run, same fields and receivers), dropping snapshots and traces after `resume_step`."""
        meta = read_meta(self.path)
        if meta is None or not self.info.run_id or meta.get("run_id") != self.info.run_id:
            raise StencilforgeError(f"cannot append to {self.path}: it was written by another run")
        if tuple(meta.get("fields", ())) != self.names:
            raise StencilforgeError(f"cannot append to {self.path}: its fields {meta.get('fields')} do not match this run's")
        with np.load(self.path, allow_pickle=False) as data:
            found = read_traces(data)
            if not receivers_match(self.receivers, (found.fields, found.at) if found is not None else None):
                raise StencilforgeError(f"cannot append to {self.path}: its receivers do not match this run's")
            keep = int(np.count_nonzero(data["step"] <= resume_step))
            self.steps = [int(s) for s in data["step"][:keep]]
            self.times = [float(t) for t in data["time"][:keep]]
            for name in self.names:
                self.frames[name] = list(data[f"fields/{name}"][:keep]) if keep else []
        if found is not None:
            self.traces = found.upto(resume_step)
        self.count = keep
        self.last_step = self.steps[-1] if keep else None

    def append(self, step: int, t: float, arrays: dict[str, np.ndarray]) -> None:
        for name in self.names:
            self.frames[name].append(np.array(arrays[name], copy=True))
        self.steps.append(int(step))
        self.times.append(float(t))
        try:
            self._write()
        except BaseException:
            for name in self.names:
                self.frames[name].pop()
            self.steps.pop()
            self.times.pop()
            raise
        self.count += 1
        self.last_step = int(step)

    def write_traces(self, traces: Traces) -> None:
        """Append rows of the run's traces after those the file holds (after a snapshot, or at the end): the file rewritten."""
        assert self.traces is not None, "only a run with receivers writes traces"
        before, self.traces = self.traces, self.traces.then(traces)
        try:
            self._write()
        except BaseException:
            self.traces = before
            raise

    def _write(self) -> None:
        meta = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.info.attrs().items()}
        meta.update(format=FORMAT, snapshot_every=self.every, t0=self.t0, dt=self.dt, fields=list(self.names))
        arrays = {f"fields/{name}": np.stack(frames) if frames else np.empty((0, *self.layout[name][0]), self.layout[name][1])
                  for name, frames in self.frames.items()}
        if self.traces is not None:
            tr = self.traces
            arrays.update({"traces/values": tr.values, "traces/step": tr.steps, "traces/time": tr.times, "traces/at": tr.at,
                           "traces/field": np.array(tr.fields, dtype=str)})
        with atomic_path(self.path) as tmp:
            with open(tmp, "wb") as fh:
                payload: dict[str, Any] = {
                    "step": np.asarray(self.steps, dtype=np.int64),
                    "time": np.asarray(self.times, dtype=np.float64),
                    META_KEY: np.asarray(json.dumps(meta)),
                    **arrays,
                }
                np.savez(fh, **payload)

    def close(self) -> None:
        """The file is complete after every snapshot: nothing to finish."""


def read_traces(data) -> Traces | None:
    """The traces an open .npz snapshot file holds, None where it holds none."""
    if "traces/values" not in data:
        return None
    return Traces(data["traces/values"], data["traces/step"], data["traces/time"], data["traces/at"],
                  tuple(str(name) for name in data["traces/field"]))
