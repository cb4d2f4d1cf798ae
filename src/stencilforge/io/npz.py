"""Snapshot series as one .npz, for small runs: kept in memory and written once, atomically, at the end (not at all without snapshots)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .hdf5 import FORMAT
from .meta import RunInfo
from .paths import atomic_path

META_KEY = "__meta__"


class NpzSink:
    """Same interface as H5Sink; the file appears (complete) when the sink is closed."""

    def __init__(self, path: Path, info: RunInfo, fields: dict, every: int, t0: float = 0.0, dt: float = 0.0):
        self.path = Path(path)
        self.info = info
        self.every, self.t0, self.dt = int(every), float(t0), float(dt)
        self.names = tuple(fields)
        self.frames: dict[str, list[np.ndarray]] = {name: [] for name in self.names}
        self.steps: list[int] = []
        self.times: list[float] = []
        self.count = 0

    def append(self, step: int, t: float, arrays: dict[str, np.ndarray]) -> None:
        for name in self.names:
            self.frames[name].append(np.array(arrays[name], copy=True))
        self.steps.append(int(step))
        self.times.append(float(t))
        self.count += 1

    def close(self) -> None:
        """Write the file, if there is anything to write."""
        if not self.count:
            return
        meta = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.info.attrs().items()}
        meta.update(format=FORMAT, snapshot_every=self.every, t0=self.t0, dt=self.dt, fields=list(self.names))
        arrays = {f"fields/{name}": np.stack(frames) for name, frames in self.frames.items() if frames}
        with atomic_path(self.path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(
                    fh, step=np.asarray(self.steps, dtype=np.int64), time=np.asarray(self.times, dtype=np.float64),
                    **{META_KEY: np.asarray(json.dumps(meta))}, **arrays,
                )
