"""Round 8 (docs/performance.md): rows and rows_vec with every store a streaming store (__stcs), against
themselves and the naive peer, two passes over the variants; its output is benchmarks/results/h100-derivatives-stcs.txt."""
import re
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed
from stencilforge.backends.cuda import codegen
from stencilforge.bench.peers import naive_operator_source
from stencilforge.bench.workloads import GPU_MATRIX, build_case

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s", flush=True)
for wname in ("derivatives-fused", "derivatives"):
    w = next(w for w in GPU_MATRIX if w.name == wname)
    case = build_case(w)
    op, grid = case.plan, case.grid
    f = {k: cp.asarray(v) for k, v in case.fields.items()}
    outs = [d.out for d in op.outputs]
    n0, n1 = grid.shape
    cells = n0 * n1
    runs = {}
    peer = cp.RawModule(code=naive_operator_source(op, grid.shape, grid.dtype)).get_function("peer_naive")
    runs["peer naive"] = lambda: peer(((cells + 255) // 256,), (256,), (f["u"], *(f[o] for o in outs)))
    base = [codegen.operator_kernel(op, "rows", grid.dtype, (1, 128)), codegen.operator_kernel(op, "rows", grid.dtype, (1, 256)),
            codegen.rows_vector_operator(op, grid.dtype, (1, 256), "vec256"), codegen.rows_vector_operator(op, grid.dtype, (1, 128), "vec128"),
            codegen.rows_vector_operator(op, grid.dtype, (1, 512), "vec512")]
    for k in base:
        srcs = {"": k.source}
        srcs["stcs"] = re.sub(r"(f_\w+\[c\d+\]|v_\w+\[c\d+ / \d+\]) = ([^;]+);", r"__stcs(&\1, \2);", k.source)
        for tag, src in srcs.items():
            fn = cp.RawModule(code="typedef double real;\n" + src, options=("-std=c++17",)).get_function(k.name)
            runs[f"{k.strategy} {k.tile} {tag}"] = lambda fn=fn, k=k: fn(k.grid(grid.shape), k.block, tuple(f[n] for n in k.args) + (np.int32(n0), np.int32(n1)))
    ref = None
    print(f"== {wname} {grid.shape}", flush=True)
    for rep in range(2):
        for name, run in runs.items():
            for o in outs:
                f[o][...] = np.nan
            run()
            got = [cp.asnumpy(f[o]) for o in outs]
            ref = ref or got
            err = max(float(np.max(np.abs(a - b)) / np.max(np.abs(b))) for a, b in zip(got, ref))
            sec = timed(run)
            print(f"{name:34s} {sec * 1e3:7.4f} ms {100 * cells * case.bytes_per_cell / sec / 1e9 / ceiling:5.1f}%  rel err {err:.1e}", flush=True)
