"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class StencilforgeError(Exception):
    """A user-facing error: bad input, an unavailable backend, a run that blew up."""


class OutputError(StencilforgeError):
    """Writing a snapshot or checkpoint failed; the run must stop (on every rank of a decomposed run)."""


class BlowUp(StencilforgeError):
    """A run whose fields became NaN or Inf. `step`: where a check saw it; `last_finite`: the step of the last
    check that found them finite (every snapshot and checkpoint written is from there or before); `fields`: each
    field's interior at `step` on this process, host arrays, to see where it went wrong; `finite_fields`: the
    fields the checks test, interior at `last_finite` on this process, host arrays, to see the state just before
    (None where the loop kept none: `LoopOptions.keep_finite` off, a copy that did not fit, or an initial state
    that was not finite)."""

    def __init__(self, message: str, step: int, last_finite: int, fields: dict, finite_fields: dict | None = None):
        super().__init__(message)
        self.step, self.last_finite, self.fields, self.finite_fields = step, last_finite, fields, finite_fields


class SolveMissed(StencilforgeError):
    """A solve inside a step (sf.Solve) missed its tolerance in a run with strict solves: the run stopped after that
    step, its final snapshot and checkpoint written, as a signal stops it. `what`: the solve, as its messages name it
    ("cavity: solve for p"); `step`: the step it solved for; `residual`: its final relative residual; `result`: the
    run's `Result` at that step (under MPI, its fields on rank 0)."""

    def __init__(self, message: str, what: str, step: int, residual: float, result):
        super().__init__(message)
        self.what, self.step, self.residual, self.result = what, step, residual, result
