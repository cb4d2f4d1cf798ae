"""One module per CUDA schedule, each registering what it applies to (`kernel.Schedule`): the tuples
below are the registry that `codegen`, `auto` (`tune.choose`), `stencilforge tune`, the CLI's --strategy
and show-kernel read. Adding a schedule is its module and its entry here. The fused steps
(`schedules.fused`) are chosen by the backend's fused sweep, not from these tuples."""

from . import naive, operators, pipelined, rows, streaming, streaming_vec, tiled

SWEEPS = (naive.SCHEDULE, rows.ROWS, rows.ROWS_VEC, tiled.SCHEDULE, streaming.STREAMING, streaming_vec.SCHEDULE,
          streaming.STREAMING_L1, pipelined.SCHEDULE)
OPERATORS = operators.SCHEDULES
