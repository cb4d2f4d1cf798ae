"""Round 13 (docs/performance.md): which step of the backend's launch path costs the fused derivative 0.45 points?

Run 2 (`derivatives_launch_path.py`) showed the compiled code is not it: the backend's own CUfunction,
called directly, runs as fast as CuPy's compile of the source. So the loss lies between the runner and
that function. Each row strips one more layer, on one set of arrays, timed by the bench's loop
(three passes interleaved, outputs NaN-poisoned and compared bit for bit with the first row's), and
the host's time per call is measured by enqueuing 100 calls with no wait (the GPU queue is deep enough
that the host does not block).

    PYTHONPATH=src python3 benchmarks/experiments/derivatives_launch_steps.py
"""
import sys
import time

sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import interleaved_runners

from stencilforge.backends.cuda import CudaBackend, codegen
from stencilforge.bench.measure import MeasureOptions, _FnRunner, cupy_event_clock, gpu_copy_bandwidth
from stencilforge.bench.suite import BackendRunner
from stencilforge.bench.workloads import GPU_MATRIX, build_case

T = 128


def host_us(fn, n: int = 100) -> float:
    """Host microseconds per call while the calls are enqueued."""
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    cp.cuda.Device().synchronize()
    return (t1 - t0) / n * 1e6


def main() -> int:
    ceiling = gpu_copy_bandwidth(2 << 30, MeasureOptions())["gbps"]
    print(f"copy {ceiling:.1f} GB/s")
    case = build_case(next(w for w in GPU_MATRIX if w.name == "derivatives-fused"))
    op, grid = case.plan, case.grid
    outs = [d.out for d in op.outputs]
    shape = grid.shape
    cells = shape[0] * shape[1]

    backend = CudaBackend("flat")
    ours = BackendRunner(case, backend, cupy_event_clock)
    f = ours.fields
    apply = backend.axis_operator(op, grid.dtype, shape)
    kernel = codegen.operator_kernel(op, "flat", grid.dtype, (T,))
    launch = backend._launcher(kernel, grid.dtype)
    fn = backend._function(kernel, grid.dtype)
    arrays = (f["u"], *(f[o] for o in outs))
    args = arrays + (np.int32(shape[0]), np.int32(shape[1]), np.float64(1.0 / shape[1]))
    blocks3, blocks1 = kernel.grid(shape), ((cells + T - 1) // T,)
    print(f"kernel.grid {blocks3}, block {kernel.block}, dynamic smem {kernel.dynamic_smem}")
    sync = cp.cuda.Device().synchronize

    calls = {
        "backend runner (bench)": None,
        "apply(u, d1, d2)": lambda: apply(*arrays),
        "backend launch(grid, args)": lambda: launch(blocks3, args),
        "function(grid3, block3, smem=0)": lambda: fn(blocks3, kernel.block, args, shared_mem=kernel.dynamic_smem),
        "function(grid1, (128,))": lambda: fn(blocks1, (T,), args),
    }
    runners = {k: (ours if c is None else _FnRunner(c, sync, cupy_event_clock)) for k, c in calls.items()}
    hosts = {k: host_us(lambda: ours.run(1)) if c is None else host_us(c) for k, c in calls.items()}

    table = interleaved_runners({k: (r, [f[o] for o in outs]) for k, r in runners.items()}, cells * case.bytes_per_cell, ceiling)
    print("\nderivatives-fused 10000^2 float64, one set of arrays (% of copy, passes in order; host us per call)")
    for name, pcts in table.items():
        cells_text = " / ".join(f"{p:5.2f}" if isinstance(p, float) else p for p in pcts)
        print(f"{name:34s} {cells_text}   host {hosts[name]:6.1f} us", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
