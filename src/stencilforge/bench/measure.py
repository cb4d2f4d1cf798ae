"""Timing and hardware ceilings measured in the same process as the workloads.

Every implementation is wrapped in a `Runner` (run n steps, wait for them,
return the newest result on the host) and timed by the same loop: a warm-up
step (compilation, first touch), a calibration step that sizes the batch so
one repeat lasts `target_s`, one warm-up batch, then `repeats` timed batches.
A repeat's time divided by its step count is one sample; rows report the
median, min and max of the samples. GPU work is timed with CUDA events on the
stream it runs on, CPU work with perf_counter.
"""

from __future__ import annotations

import datetime
import functools
import importlib.metadata
import importlib.util
import os
import platform
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

import numba
import numpy as np

from ..version import __version__

Clock = Callable[[Callable[[int], None], Callable[[], None], int], float]


class Runner(Protocol):
    @property
    def clock(self) -> Clock: ...

    def run(self, steps: int) -> None: ...

    def sync(self) -> None: ...

    def latest(self) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class MeasureOptions:
    repeats: int = 5
    target_s: float = 0.1
    max_steps: int = 2000


@dataclass(frozen=True)
class Timing:
    samples: tuple[float, ...]  # seconds per step, one per repeat
    steps_per_repeat: int

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)


def wall_clock(run, sync, n: int) -> float:
    sync()
    t0 = time.perf_counter()
    run(n)
    sync()
    return time.perf_counter() - t0


def cupy_event_clock(run, sync, n: int) -> float:
    """CUDA events on CuPy's current stream, where CuPy and our cuda backend launch."""
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    run(n)
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3


def torch_event_clock(run, sync, n: int) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run(n)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def time_runner(runner: Runner, opts: MeasureOptions) -> Timing:
    return time_runners([runner], opts)[0]


def time_runners(runners: list[Runner], opts: MeasureOptions) -> list[Timing]:
    """Each runner's time per step, its repeats taken in rounds that visit every runner once: on a machine
    whose speed drifts (a shared CPU), the drift falls on all of them alike and their ratios hold."""
    steps = []
    for runner in runners:
        runner.run(1)
        runner.sync()
        one = runner.clock(runner.run, runner.sync, 1)
        steps.append(int(max(1, min(opts.max_steps, opts.target_s / max(one, 1e-7)))))
        runner.clock(runner.run, runner.sync, steps[-1])
    samples: list[list[float]] = [[] for _ in runners]
    for _ in range(opts.repeats):
        for runner, n, taken in zip(runners, steps, samples):
            taken.append(runner.clock(runner.run, runner.sync, n) / n)
    return [Timing(tuple(taken), n) for taken, n in zip(samples, steps)]


# ---------------------------------------------------------------- ceilings


@dataclass
class CallRunner:
    """Adapts a plain `fn()` doing one unit of work (a copy, an FMA loop) to the Runner protocol."""

    fn: Callable[[], object]
    sync: Callable[[], None]
    clock: Clock

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.fn()

    def latest(self) -> dict:
        return {}


COPY_KERNEL = r"""
extern "C" __global__ void sf_bench_copy(const float4* __restrict__ src, float4* __restrict__ dst, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
"""

FMA_KERNEL = r"""
extern "C" __global__ void sf_bench_fma(REAL* out, int iters, REAL a, REAL b)
{
    REAL x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3, x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7;
    #pragma unroll 16
    for (int i = 0; i < iters; ++i) {
        x0 = x0 * a + b; x1 = x1 * a + b; x2 = x2 * a + b; x3 = x3 * a + b;
        x4 = x4 * a + b; x5 = x5 * a + b; x6 = x6 * a + b; x7 = x7 * a + b;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
}
"""


def _gpu_copy_rates(nbytes: int, opts: MeasureOptions) -> tuple[dict, int]:
    import cupy

    n = nbytes // 16 * 4
    src = cupy.random.random(n, dtype=cupy.float32) + 0.5
    dst = cupy.empty_like(src)
    sync = cupy.cuda.Device().synchronize
    memcpy = CallRunner(lambda: dst.data.copy_from_device_async(src.data, src.nbytes), sync, cupy_event_clock)
    kernel = cupy.RawKernel(COPY_KERNEL, "sf_bench_copy")
    grid = (cupy.cuda.Device().attributes["MultiProcessorCount"] * 8,)
    launch = CallRunner(lambda: kernel(grid, (256,), (src, dst, np.int64(n // 4))), sync, cupy_event_clock)
    rates = {}
    for name, runner in (("cudaMemcpy", memcpy), ("copy_kernel", launch)):
        rates[name] = 2 * src.nbytes / time_runner(runner, opts).median / 1e9
    if not bool(cupy.all(dst == src)):
        raise RuntimeError("the copy benchmark produced a wrong copy")
    return rates, 2 * src.nbytes


def gpu_copy_bandwidth(nbytes: int, opts: MeasureOptions) -> dict:
    """Device-to-device copy, bytes read + written: cudaMemcpy and a float4 copy kernel; the faster is the ceiling."""
    import cupy

    rates, traffic = _gpu_copy_rates(nbytes, opts)
    cupy.get_default_memory_pool().free_all_blocks()
    best = max(rates, key=lambda method: rates[method])
    return {"gbps": rates[best], "method": best, "bytes": traffic, "all_gbps": rates}


def gpu_peak_gflops(dtype: str, opts: MeasureOptions) -> float:
    """Achieved FLOP/s of an FMA-bound kernel: a measured compute ceiling for the roofline."""
    import cupy

    real = "float" if dtype == "float32" else "double"
    kernel = cupy.RawKernel(FMA_KERNEL.replace("REAL", real), "sf_bench_fma")
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    blocks, threads, iters = sms * 16, 256, 4096
    out = cupy.empty(blocks * threads, dtype=dtype)
    a, b = np.dtype(dtype).type(0.999), np.dtype(dtype).type(1e-3)
    launch = functools.partial(kernel, (blocks,), (threads,), (out, np.int32(iters), a, b))
    runner = CallRunner(launch, cupy.cuda.Device().synchronize, cupy_event_clock)
    t = time_runner(runner, opts)
    return 2 * 8 * iters * blocks * threads / t.median / 1e9


@numba.njit(parallel=True, cache=True, nogil=True)
def _parallel_copy(src, dst):
    for i in numba.prange(src.shape[0]):
        dst[i] = src[i]


def cpu_copy_bandwidth(nbytes: int, opts: MeasureOptions) -> dict:
    """A parallel (numba prange) copy over every core, bytes read + written."""
    src = np.random.default_rng(1).random(nbytes // 4, dtype=np.float32) + 0.5
    dst = np.empty_like(src)
    runner = CallRunner(lambda: _parallel_copy(src, dst), lambda: None, wall_clock)
    t = time_runner(runner, opts)
    if not np.array_equal(src, dst):
        raise RuntimeError("the copy benchmark produced a wrong copy")
    return {"gbps": 2 * src.nbytes / t.median / 1e9, "method": "numba prange copy", "bytes": 2 * src.nbytes}


def cpu_peak_gflops(dtype: str, opts: MeasureOptions) -> float:
    """Achieved FLOP/s of a BLAS matrix product on every core: the CPU's attainable compute ceiling."""
    n = 1024
    rng = np.random.default_rng(2)
    a, b = (rng.random((n, n)).astype(dtype) for _ in range(2))
    c = np.empty((n, n), dtype=dtype)
    runner = CallRunner(lambda: np.matmul(a, b, out=c), lambda: None, wall_clock)
    t = time_runner(runner, opts)
    return 2 * n**3 / t.median / 1e9


# ---------------------------------------------------------------- environment


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        module = importlib.util.find_spec(name)
        return "installed" if module else None


def versions() -> dict:
    out: dict[str, str | None] = {"stencilforge": __version__, "python": platform.python_version()}
    for dist, key in (
        ("numpy", "numpy"),
        ("numba", "numba"),
        ("matplotlib", "matplotlib"),
        ("torch", "torch"),
        ("jax", "jax"),
        ("jaxlib", "jaxlib"),
        ("devito", "devito"),
        ("pystencils", "pystencils"),
    ):
        out[key] = _version(dist)
    out["cupy"] = next((v for v in (_version(d) for d in ("cupy", "cupy-cuda13x", "cupy-cuda12x")) if v), None)
    return out


def git_commit() -> dict:
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(dirty)}


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _last_level_cache() -> int | None:
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip()
        mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
        sizes.append(int(text.rstrip("KMG")) * mult)
    return max(sizes) if sizes else None


def cpu_device() -> dict:
    return {
        "kind": "cpu",
        "name": _cpu_name(),
        "cores": os.cpu_count(),
        "threads": numba.get_num_threads(),
        "cache_bytes": _last_level_cache(),
        "cache_level": "last-level",
        "driver": None,
    }


def _nvidia_driver() -> str | None:
    """The kernel driver's release (e.g. 550.54.15), from /proc where the NVIDIA driver is loaded."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    for word in text.split():
        if word.count(".") >= 1 and word.replace(".", "").isdigit():
            return word
    return None


def gpu_device() -> dict:
    import cupy

    from ..backends.cuda.backend import device_name

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = device_name(props)

    def cuda_version(v: int) -> str:
        return f"{v // 1000}.{v % 1000 // 10}"

    return {
        "kind": "gpu",
        "name": name,
        "index": dev.id,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "sms": props["multiProcessorCount"],
        "memory_bytes": props["totalGlobalMem"],
        "cache_bytes": props["l2CacheSize"],
        "cache_level": "L2",
        "driver": _nvidia_driver() or cuda_version(cupy.cuda.runtime.driverGetVersion()),
        "driver_cuda": cuda_version(cupy.cuda.runtime.driverGetVersion()),
        "cuda_runtime": cuda_version(cupy.cuda.runtime.runtimeGetVersion()),
        "cpu": _cpu_name(),
    }
