"""One module per CUDA schedule, each registering what it applies to (`kernel.Schedule`, `kernel.Fused`): the
tuples below are the registry that `codegen`, `auto` (`tune.choose`), `stencilforge tune`, the CLI's --strategy
and show-kernel read; FUSED holds the schedules of several steps a pass, of which the backend's fused sweep and
show-kernel take the first that applies. Adding a schedule is its module and its entry here."""

from . import fused, naive, operators, pipelined, rows, streaming, streaming_vec, tiled

SWEEPS = (naive.SCHEDULE, rows.ROWS, rows.ROWS_VEC, tiled.SCHEDULE, streaming.STREAMING, streaming_vec.SCHEDULE,
          streaming.STREAMING_L1, pipelined.SCHEDULE)
OPERATORS = operators.SCHEDULES
FUSED = (fused.SCHEDULE,)
