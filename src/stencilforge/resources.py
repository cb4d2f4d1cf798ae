"""Host resources of a run: memory checked before anything is allocated, and Numba threads per process.

A huge shape must fail with one line before NumPy allocates (Linux overcommits,
so an oversized run is otherwise OOM-killed mid-way), and MPI ranks sharing a
node must not each start a thread per core.
"""

from __future__ import annotations

import logging
import math
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import StencilforgeError

log = logging.getLogger(__name__)

PROBE_EXTENT = 24  # points per axis of the small build that tells the fields' count, dtypes and ghost width
SNAPSHOT_BUFFERS = 3
LOAD_SAMPLE_S = 0.05  # how long the cores' load is watched before a run picks its thread count


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def available_bytes() -> int | None:
    """Memory this process may still take: MemAvailable, lowered by a cgroup v2 limit (batch jobs); None if unknown."""
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    limit, used = _read_int(Path("/sys/fs/cgroup/memory.max")), _read_int(Path("/sys/fs/cgroup/memory.current"))
    if limit is not None and used is not None:
        avail = min(avail, limit - used) if avail is not None else limit - used
    return avail


def wall_carriers(backend, u, ghost: int, count: int) -> list | None:
    """`count` arrays in `u`'s layout for the walls of a fused pass's middle states, or None where they do not fit.
    On a host they must leave half the memory available free: they only speed the run, and a host that runs out of
    memory may kill the process rather than fail the allocation."""
    try:
        if backend.device:
            backend.check_fits(count * u.nbytes)
        else:
            free = available_bytes()
            if free is not None and count * u.nbytes > free // 2:
                return None
        return [backend.field(u, ghost) for _ in range(count)]
    except (StencilforgeError, MemoryError):
        return None


def needed_bytes(probe: Callable[[tuple[int, ...]], Any], shape, snapshots: bool, checkpoints: bool) -> int | None:
    """Bytes a run of `shape` allocates at its peak, from `probe`, a small build of the same problem on a grid of
    the shape it is given (its `grid` and every array it allocates, `fields`: a Simulation's arrays); None if it
    cannot tell."""
    try:
        small = probe((PROBE_EXTENT,) * len(shape))
    except (StencilforgeError, TypeError, ValueError):
        return None
    cells = math.prod(shape)
    padded = math.prod(n + 2 * small.grid.ghost for n in shape)
    fields = sum((padded if arr.shape == small.grid.padded_shape else cells) * arr.itemsize for arr in small.fields.values())
    building = 16 * padded  # float64 values while the fields are filled (measured: 4-16 bytes a cell)
    outputs = (SNAPSHOT_BUFFERS * cells * small.grid.dtype.itemsize if snapshots else 0) + (fields if checkpoints else 0)
    return fields + max(building, outputs)


def check_host_memory(what: str, shape, probe: Callable[[tuple[int, ...]], Any], snapshots: bool = False,
                      checkpoints: bool = False, processes: int = 1) -> None:
    """Refuse, in one line, a run of `what` whose arrays cannot fit in the memory available (`processes` on this node)."""
    if shape is None:
        return
    need = needed_bytes(probe, shape, snapshots, checkpoints)
    free = available_bytes()
    if need is None or free is None or need * processes <= free:
        return
    each = f" ({processes} processes on this node, {need / 1e9:.2f} GB each)" if processes > 1 else ""
    raise StencilforgeError(
        f"not enough memory for {what} {'x'.join(map(str, shape))}: needs about {need * processes / 1e9:.2f} GB"
        f"{each}, {free / 1e9:.2f} GB available"
    )


def node_peers(comm) -> list[set[int]]:
    """The CPU sets of the ranks of `comm` on this node (this rank's included)."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.allgather(set(os.sched_getaffinity(0)))
    finally:
        node.Free()


def thread_count(requested: int | None, peers: list[set[int]] | None = None) -> int:
    """--threads, else $NUMBA_NUM_THREADS, else this process's share of the cores it may run on.

    The share divides the cores of its affinity mask among the ranks on the node
    whose masks overlap it: unbound ranks split the node, ranks bound to their
    own cores use all of theirs. A process alone, where other tasks are runnable,
    leaves out the cores other work keeps busy (`busy_cores`): a parallel step waits for its slowest thread, so one
    thread on a core that another job holds slows every step many times over
    (benchmarks/results/cpu-threads-under-load-2026-12-02.json).
    """
    if requested is not None:
        if requested < 1:
            raise StencilforgeError(f"--threads must be at least 1, got {requested}")
        return requested
    env = os.environ.get("NUMBA_NUM_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise StencilforgeError(f"NUMBA_NUM_THREADS must be a whole number, got {env!r}") from None
    mine = set(os.sched_getaffinity(0))
    if peers:
        sharing = sum(1 for cpus in peers if cpus & mine)
        return max(1, len(mine) // max(1, sharing))
    busy = busy_cores(mine) if _others_running() else 0  # with nothing else runnable now, nothing is watched
    threads = max(1, len(mine) - busy)
    if busy:
        log.info("%d of the %d cores this process may use are busy with other work: %d threads", busy, len(mine), threads)
    return threads


def busy_cores(cpus: set[int], interval: float = LOAD_SAMPLE_S) -> int:
    """How many of `cpus` other processes kept busy over `interval` seconds, rounded: the busy time of those cores
    in /proc/stat less this process's own (its threads may still be winding down from a run before); 0 where
    the kernel does not tell."""
    before, own_before = _cpu_ticks(cpus), _own_ticks()
    start = time.monotonic()
    time.sleep(interval)
    after, own_after = _cpu_ticks(cpus), _own_ticks()
    ticks = (time.monotonic() - start) * os.sysconf("SC_CLK_TCK")
    if before is None or after is None or own_before is None or own_after is None or ticks <= 0:
        return 0
    others = (after - before) - (own_after - own_before)
    return min(len(cpus), max(0, round(others / ticks)))


def _others_running() -> bool:
    """Whether a task besides this one is runnable on the machine now (/proc/loadavg; True where it does not tell)."""
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return True
    return running > 1


def _cpu_ticks(cpus: set[int]) -> int | None:
    """Clock ticks the cores `cpus` have spent busy (not idle, not waiting on I/O), from /proc/stat."""
    total = 0
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            name, *fields = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
                values = [int(f) for f in fields[:8]]
                total += sum(values) - values[3] - values[4]  # idle and iowait are the 4th and 5th
    except (OSError, ValueError, IndexError):
        return None
    return total


def _own_ticks() -> int | None:
    """Clock ticks this process's threads have run (user and system), from /proc/self/stat."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime and stime, the 14th and 15th fields
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def numba_threads(engine, threads: int | None, comm=None) -> Iterator[int | None]:
    """The numba backend's thread count for a run (None for other backends, where `threads` is refused in one line),
    Numba's own restored after it; under MPI (`comm`) a rank's share of its node's cores by default."""
    if engine.name != "numba":
        if threads is not None:
            raise StencilforgeError(f"threads apply to the numba backend, not {engine.name}")
        yield None
        return
    import numba

    before = numba.get_num_threads()
    try:
        yield use_numba_threads(thread_count(threads, node_peers(comm) if comm is not None else None))
    finally:
        numba.set_num_threads(before)


def use_numba_threads(count: int) -> int:
    """Set Numba's thread count for this process; one line if it exceeds the pool Numba was started with."""
    import numba

    pool = numba.config.NUMBA_NUM_THREADS
    if count > pool:
        raise StencilforgeError(
            f"--threads {count} is more than Numba's pool of {pool} "
            "(set NUMBA_NUM_THREADS before starting to raise it)"
        )
    numba.set_num_threads(count)
    return count
