"""Fused passes or single steps: whichever this machine takes a run's steps faster, timed on the run's first steps.

Several steps per pass save memory traffic, but whether they pay depends on the CPU's caches: numba's
four-step 3D pass ran heat3d 1.4x faster than single steps on an EPYC and 13% slower on a Xeon
(cpu-fused-steps-2026-11-24.json; on the Xeon, kernels alone, cpu-pass-choice-2026-11-27.json). Both give the same bits, so
choosing by the clock changes no result. Only for backends whose calls return when the work is done
(not `device` backends, whose launches are asynchronous and tuned by their own `auto`).
"""

from __future__ import annotations

import logging
import statistics

log = logging.getLogger(__name__)

TRIALS = 4  # timed steps of each kind after a first one, whose caches are cold


class PassChoice:
    """Single steps until TRIALS + 1 are timed, then fused passes until as many are, then the faster kind
    by the median time a step (ties to fused passes)."""

    def __init__(self, name: str, trials: int = TRIALS) -> None:
        self.name, self.trials = name, trials
        self.single: list[float] = []
        self.fused: list[float] = []
        self.fuses: bool | None = None  # None while timing

    def per_pass(self, steps: int) -> int:
        """Steps the next pass should take, given the fused pass's `steps`."""
        if self.fuses is None:
            return 1 if len(self.single) <= self.trials else steps
        return steps if self.fuses else 1

    def record(self, steps: int, seconds: float) -> None:
        """A pass of `steps` steps took `seconds` (only passes whose kernels were ready count)."""
        if self.fuses is not None:
            return
        (self.fused if steps > 1 else self.single).append(seconds / steps)
        if len(self.single) > self.trials and len(self.fused) > self.trials:
            fused, single = statistics.median(self.fused[1:]), statistics.median(self.single[1:])
            self.fuses = fused <= single
            log.info("%s: %s (%.3g ms a step fused, %.3g single)", self.name,
                     "several steps per pass" if self.fuses else "single steps: faster on this machine", fused * 1e3, single * 1e3)

    def summary(self) -> dict:
        """The timings behind the choice, for the run's summary (empty while timing)."""
        if self.fuses is None:
            return {}
        return {"pass_choice": {"fused_ms": statistics.median(self.fused[1:]) * 1e3,
                                "single_ms": statistics.median(self.single[1:]) * 1e3, "fused": self.fuses}}
