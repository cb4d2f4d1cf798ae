"""Round 13 (docs/performance.md): why is the backend's launch of `flat` slower than the same source launched raw?

Run 1 (`derivatives_bench_gap.py`) had the bench's runner 0.45 points behind a raw launch of the same
source on the same arrays, clock or no clock. Here every row runs on one set of arrays, timed by the
bench's loop, three passes interleaved, outputs NaN-poisoned and compared bit for bit with the first row's:
- the backend's runner (what the bench times);
- the CUfunction the backend launches, called directly (its cubin: NVRTC through cuda-bindings, cached);
- CuPy's compile of the backend's module source with the backend's options;
- CuPy's compile of the bare kernel source (run 1's raw row).
If the function called directly is as slow as the runner, the compiled code differs, not the launch.
The cubins are written to $OUT for cuobjdump (CuPy's via CUPY_CACHE_DIR).

    CUPY_CACHE_DIR=$OUT/cupy PYTHONPATH=src python3 benchmarks/experiments/derivatives_launch_path.py $OUT
"""
import sys
from pathlib import Path

sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import interleaved_runners

from stencilforge.backends.cuda import CudaBackend, codegen
from stencilforge.backends.cuda.compile import compile_cubin, nvrtc_version, options
from stencilforge.bench.measure import MeasureOptions, _FnRunner, cupy_event_clock, gpu_copy_bandwidth
from stencilforge.bench.suite import BackendRunner
from stencilforge.bench.workloads import GPU_MATRIX, build_case

T = 128


def main(out: Path) -> int:
    ceiling = gpu_copy_bandwidth(2 << 30, MeasureOptions())["gbps"]
    print(f"copy {ceiling:.1f} GB/s")
    print(f"NVRTC via cuda-bindings: {nvrtc_version()}, CuPy's NVRTC: {cp.cuda.nvrtc.getVersion()}, CuPy {cp.__version__}")
    case = build_case(next(w for w in GPU_MATRIX if w.name == "derivatives-fused"))
    op, grid = case.plan, case.grid
    outs = [d.out for d in op.outputs]
    n0, n1 = grid.shape
    cells = n0 * n1

    backend = CudaBackend("flat")
    ours = BackendRunner(case, backend, cupy_event_clock)
    f = ours.fields
    kernel = codegen.operator_kernel(op, "flat", grid.dtype, (T,))
    module = codegen.module_source([kernel], grid.dtype, f"{kernel.name}, strategy {kernel.strategy}, tile {kernel.tile}")
    if nvrtc_version() is not None:
        (out / "backend.cubin").write_bytes(compile_cubin(module, backend.arch, "flat"))
    bare = f"typedef {codegen.ctype(grid.dtype)} real;\n" + kernel.source
    args = (f["u"], *(f[o] for o in outs), np.int32(n0), np.int32(n1), np.float64(1.0 / n1))
    sync = cp.cuda.Device().synchronize

    def raw(fn):
        return _FnRunner(lambda: fn(((cells + T - 1) // T,), (T,), args), sync, cupy_event_clock)

    runners = {
        "backend runner": ours,
        "backend's CUfunction, direct": raw(backend._function(kernel, grid.dtype)),
        "CuPy compile, backend's source+options": raw(cp.RawModule(code=module, options=options(backend.arch)[1:]).get_function(kernel.name)),
        "CuPy compile, bare source": raw(cp.RawModule(code=bare, options=("-std=c++17",)).get_function(kernel.name)),
    }
    table = interleaved_runners({k: (r, [f[o] for o in outs]) for k, r in runners.items()}, cells * case.bytes_per_cell, ceiling)
    print("\nderivatives-fused 10000^2 float64, one set of arrays (% of copy, passes in order)")
    for name, pcts in table.items():
        print(f"{name:40s} " + " / ".join(f"{p:5.2f}" if isinstance(p, float) else p for p in pcts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
