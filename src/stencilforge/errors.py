"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class StencilforgeError(Exception):
    """A user-facing error: bad input, an unavailable backend, a run that blew up."""


class OutputError(StencilforgeError):
    """Writing a snapshot or checkpoint failed; the run must stop (on every rank of a decomposed run)."""
