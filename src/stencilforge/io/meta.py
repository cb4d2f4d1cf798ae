"""What every output file records about the run that wrote it."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field

import numpy as np

from ..fingerprint import fingerprint
from ..version import __version__

SNAPSHOT_FORMAT = "stencilforge-snapshots"  # the format attribute of a snapshot series, whichever file kind holds it
TRACE_ROWS = 1024  # recorded steps per chunk of a trace file's rows, at most


def jsonable(value):
    """Parameters as plain JSON types (NumPy scalars and tuples included)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass(frozen=True)
class RunInfo:
    """Problem, grid and provenance of a run, written as attributes of every output file."""

    problem: str
    shape: tuple[int, ...]
    dtype: str
    spacing: tuple[float, ...]
    lower: tuple[float, ...]
    params: dict = field(default_factory=dict)
    backend: str = "numpy"
    command_line: str = ""
    version: str = __version__
    run_id: str = ""  # shared by a run's files and every run resumed from them: which series a resume may append to
    equations: str = ""  # an sf.Problem's canonical text (`fingerprint.canonical`); empty for a named problem
    fingerprint: str = ""  # its SHA-256, which a resume compares; empty in files written before it was recorded
    problem_file: str = ""  # the text of the problem file the run was started from, if any

    @classmethod
    def of(cls, setup, backend_name: str, command_line: str | None = None, run_id: str = "", equations: str = "",
           problem_file: str = "") -> "RunInfo":
        grid = setup.grid
        return cls(
            problem=setup.name,
            shape=tuple(int(n) for n in grid.shape),
            dtype=grid.dtype.name,
            spacing=tuple(float(h) for h in grid.spacing),
            lower=tuple(float(x) for x in grid.lower),
            params=jsonable(dict(setup.params)),
            backend=backend_name,
            command_line=command_line if command_line is not None else shlex.join(["stencilforge", *sys.argv[1:]]),
            run_id=run_id,
            equations=equations,
            fingerprint=fingerprint(equations),
            problem_file=problem_file,
        )

    def attrs(self) -> dict:
        return {
            "problem": self.problem,
            "shape": np.asarray(self.shape, dtype=np.int64),
            "dtype": self.dtype,
            "spacing": np.asarray(self.spacing, dtype=np.float64),
            "lower": np.asarray(self.lower, dtype=np.float64),
            "params": json.dumps(self.params, sort_keys=True),
            "backend": self.backend,
            "stencilforge_version": self.version,
            "command_line": self.command_line,
            "run_id": self.run_id,
            "equations": self.equations,
            "equations_sha256": self.fingerprint,
            "problem_file": self.problem_file,
        }

    @classmethod
    def from_attrs(cls, attrs) -> "RunInfo":
        def text(v):
            return v.decode() if isinstance(v, bytes) else str(v)

        return cls(
            problem=text(attrs["problem"]),
            shape=tuple(int(n) for n in np.asarray(attrs["shape"]).ravel()),
            dtype=text(attrs["dtype"]),
            spacing=tuple(float(h) for h in np.asarray(attrs["spacing"]).ravel()),
            lower=tuple(float(x) for x in np.asarray(attrs["lower"]).ravel()),
            params=json.loads(text(attrs["params"])),
            backend=text(attrs["backend"]),
            command_line=text(attrs["command_line"]),
            version=text(attrs["stencilforge_version"]),
            run_id=text(attrs.get("run_id", "")),
            equations=text(attrs.get("equations", "")),
            fingerprint=text(attrs.get("equations_sha256", "")),
            problem_file=text(attrs.get("problem_file", "")),
        )


@dataclass(frozen=True, eq=False)
class Receivers:
    """The points whose traces a snapshot file holds (a problem's `sf.Receiver`s, in its order): each one's field
    and coordinates (receivers x axes, x last). A resume appends traces only to a file of the same receivers."""

    fields: tuple[str, ...]
    at: np.ndarray

    @classmethod
    def of(cls, receivers) -> "Receivers | None":
        """A problem's receivers, or None where it has none (its files then hold no traces)."""
        if not receivers:
            return None
        return cls(tuple(r.field.name for r in receivers), np.array([r.at for r in receivers], dtype=np.float64))

    def chunks(self) -> tuple[int, int]:
        """Chunks of the (steps x receivers) values: whole rows, up to TRACE_ROWS of them in about a MiB."""
        width = len(self.fields)
        return max(1, min(TRACE_ROWS, (1 << 20) // (8 * width))), width


def receivers_match(ours: Receivers | None, found: tuple | None) -> bool:
    """Whether the receivers a file holds, (fields, at) or None where it holds no traces, are a run's (`ours`),
    coordinates bit for bit."""
    if ours is None or found is None:
        return ours is None and found is None
    fields, at = tuple(found[0]), np.asarray(found[1])
    return fields == ours.fields and at.shape == ours.at.shape and at.tobytes() == ours.at.tobytes()
