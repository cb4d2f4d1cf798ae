"""Round 13 (docs/performance.md): where does the bench's 1-point gap on the fused derivative come from?

Raw, `flat` is level with the naive peer (round 12), yet every full bench since round 9 has the peer
0.6-1.2 points ahead. The bench differs from the raw runs in three ways, each isolated here:
- the clock: our backend records a CUDA event pair around every launch (the run summary's kernel_s);
- the arrays: each implementation in the bench uploads its own copies after the pool is emptied;
- the runner: Python per launch (argument checks, the kernel picker).
Rows, all timed by the bench's own loop (`time_runner`, 5 x ~100 ms batches, CUDA events):
- bench: ours / bench: peer          the bench's two runners, as `stencilforge bench` builds them
- ours, no per-launch events         the bench's runner for ours with the backend's clock stubbed out
- raw flat / raw peer, on X arrays   the two compiled kernels launched directly on ours' or the peer's arrays
Every row's outputs are NaN-poisoned first and compared bit for bit with the first row's. Three passes, interleaved.

    PYTHONPATH=src python3 benchmarks/experiments/derivatives_bench_gap.py
"""
import sys

sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import interleaved_runners

from stencilforge.backends.cuda import CudaBackend, codegen
from stencilforge.bench.measure import MeasureOptions, _FnRunner, cupy_event_clock, gpu_copy_bandwidth
from stencilforge.bench.peers import PEERS, naive_operator_source
from stencilforge.bench.suite import BackendRunner
from stencilforge.bench.workloads import GPU_MATRIX, build_case

T = 128


class _Silent:
    """A clock that records nothing: what launches cost without the backend's per-launch event pair."""

    def start(self):
        return None

    def stop(self, token) -> None:
        pass


def main() -> None:
    ceiling = gpu_copy_bandwidth(2 << 30, MeasureOptions())["gbps"]
    print(f"copy {ceiling:.1f} GB/s")
    case = build_case(next(w for w in GPU_MATRIX if w.name == "derivatives-fused"))
    op, grid = case.plan, case.grid
    outs = [d.out for d in op.outputs]
    n0, n1 = grid.shape
    cells = n0 * n1

    ours = BackendRunner(case, CudaBackend("flat"), cupy_event_clock)
    quiet_backend = CudaBackend("flat")
    quiet_backend._timer = _Silent()
    quiet = BackendRunner(case, quiet_backend, cupy_event_clock)
    peer = PEERS["naive-cuda"].runner(case)

    flat = codegen.operator_kernel(op, "flat", grid.dtype, (T,))
    flat_fn = cp.RawModule(code=f"typedef {codegen.ctype(grid.dtype)} real;\n" + flat.source, options=("-std=c++17",)).get_function(flat.name)
    peer_fn = cp.RawModule(code=naive_operator_source(op, grid.shape, grid.dtype), options=("-std=c++17",)).get_function("peer_naive")
    sync = cp.cuda.Device().synchronize

    def raw(fn, threads, f, scalars):
        args = (f["u"], *(f[o] for o in outs)) + scalars
        return _FnRunner(lambda: fn(((cells + threads - 1) // threads,), (threads,), args), sync, cupy_event_clock), f

    flat_scalars = (np.int32(n0), np.int32(n1), np.float64(1.0 / n1))
    rows = {
        "bench: ours (flat 128)": (ours, ours.fields),
        "bench: peer (256 threads)": (peer, peer.fields),
        "ours, no per-launch events": (quiet, quiet.fields),
        "raw flat, ours' arrays": raw(flat_fn, T, ours.fields, flat_scalars),
        "raw flat, peer's arrays": raw(flat_fn, T, peer.fields, flat_scalars),
        "raw peer, ours' arrays": raw(peer_fn, 256, ours.fields, ()),
        "raw peer, peer's arrays": raw(peer_fn, 256, peer.fields, ()),
    }
    for name, (_, f) in rows.items():
        print(f"{name:30s} u at {f['u'].data.ptr:#x}, " + ", ".join(f"{o} at {f[o].data.ptr:#x}" for o in outs))

    table = interleaved_runners({k: (r, [f[o] for o in outs]) for k, (r, f) in rows.items()}, cells * case.bytes_per_cell, ceiling)
    print("\nderivatives-fused 10000^2 float64 (% of copy, passes in order)")
    for name, pcts in table.items():
        print(f"{name:30s} " + " / ".join(f"{p:5.2f}" if isinstance(p, float) else p for p in pcts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
