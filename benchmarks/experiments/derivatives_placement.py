"""Round 13 (docs/performance.md): how much does where the arrays lie move the fused derivative?

Run 1 had both raw kernels 0.4 points faster on one runner's arrays than on the other's, and in ten
full benches the peer's fresh arrays have always come out ahead of ours. Two questions:
- A. The spread: 8 fresh triples (u, d1, d2 allocated one by one, all kept alive so each lies elsewhere),
  raw flat and raw peer timed on each. Do they move together, and by how much?
- B. Relative placement: one allocation holding u, d1 and d2 back to back, d1 shifted by s bytes and d2
  by 2s past the 2 MiB-rounded array size. If some shifts are steadily fast, the streams' relative
  alignment is what matters, and a backend that allocates its fields could choose it.
Timing: cuda_bench.timed (CUDA events, median of 7 x 10 launches); % of the memcpy bandwidth measured in
the same run. The list B runs twice. Outputs NaN-poisoned and checked bit for bit against the first triple's peer result.

    PYTHONPATH=src python3 benchmarks/experiments/derivatives_placement.py
"""
import sys

sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge.backends.cuda import codegen
from stencilforge.bench.peers import naive_operator_source
from stencilforge.bench.workloads import GPU_MATRIX, build_case

T, PAGE = 128, 2 << 20


def main() -> int:
    ceiling = copy_bandwidth()["memcpy_gbps"]
    print(f"memcpy {ceiling:.0f} GB/s")
    case = build_case(next(w for w in GPU_MATRIX if w.name == "derivatives-fused"))
    op, grid = case.plan, case.grid
    n0, n1 = grid.shape
    cells = n0 * n1
    nbytes = cells * case.bytes_per_cell
    flat = codegen.operator_kernel(op, "flat", grid.dtype, (T,))
    flat_fn = cp.RawModule(code=f"typedef {codegen.ctype(grid.dtype)} real;\n" + flat.source, options=("-std=c++17",)).get_function(flat.name)
    peer_fn = cp.RawModule(code=naive_operator_source(op, grid.shape, grid.dtype), options=("-std=c++17",)).get_function("peer_naive")
    host_u = case.fields["u"]
    ref = []

    def measure(u, d1, d2) -> tuple[float, float]:
        out = []
        for fn, threads, extra in ((flat_fn, T, (np.int32(n0), np.int32(n1), np.float64(1.0 / n1))), (peer_fn, 256, ())):
            d1[...] = np.nan
            d2[...] = np.nan

            def go(fn=fn, threads=threads, extra=extra):
                fn(((cells + threads - 1) // threads,), (threads,), (u, d1, d2) + extra)

            go()
            got = [cp.asnumpy(d1), cp.asnumpy(d2)]
            if not ref:
                ref.extend(got)
            if not all(np.array_equal(a, b) for a, b in zip(got, ref)):
                raise SystemExit("a placement changed the result")
            out.append(100 * nbytes / timed(go) / 1e9 / ceiling)
        return out[0], out[1]

    print("\nA. fresh triples (flat / peer, % of copy; u, d1, d2 addresses)")
    keep = []
    for i in range(8):
        u = cp.asarray(host_u)
        d1, d2 = cp.empty_like(u), cp.empty_like(u)
        keep.append((u, d1, d2))
        f, p = measure(u, d1, d2)
        print(f"triple {i}: flat {f:6.2f}  peer {p:6.2f}   {u.data.ptr:#x} {d1.data.ptr:#x} {d2.data.ptr:#x}", flush=True)
    del keep
    cp.get_default_memory_pool().free_all_blocks()

    print("\nB. one allocation, d1 at +size+s, d2 at +2(size+s) (flat / peer, % of copy)")
    size = -(-host_u.nbytes // PAGE) * PAGE
    for s in (0, 128, 4096, 65536, 1 << 20, PAGE + 65536, 3 << 20, 5 * PAGE) * 2:
        buf = cp.empty(3 * (size + s), dtype=cp.uint8)
        views = [buf[k * (size + s): k * (size + s) + host_u.nbytes].view(grid.dtype).reshape(grid.shape) for k in range(3)]
        views[0].set(host_u)
        f, p = measure(*views)
        print(f"s = {s:>9d} B: flat {f:6.2f}  peer {p:6.2f}", flush=True)
        del buf, views
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
