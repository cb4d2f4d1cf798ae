"""Hand variants of the rows kernels vs the naive peer: does __restrict__ (ld.global.nc) matter?"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np
from cuda_bench import copy_bandwidth, timed

from stencilforge.backends.cuda import codegen
from stencilforge.bench.peers import naive_operator_source, naive_sweep_source
from stencilforge.bench.workloads import GPU_MATRIX, build_case

ceiling = copy_bandwidth()["memcpy_gbps"]
print(f"memcpy {ceiling:.0f} GB/s")


def unrestrict(src):
    return src.replace("__restrict__", "")


def restrict_peer(src):
    return src.replace("const double* u", "const double* __restrict__ u").replace("double* o", "double* __restrict__ o").replace(
        "float* out", "float* __restrict__ out").replace("const float* f_", "const float* __restrict__ f_")


for wname in ("derivatives-fused", "heat3d", "derivatives"):
    w = next(w for w in GPU_MATRIX if w.name == wname)
    case = build_case(w)
    plan, grid = case.plan, case.grid
    real = "double" if grid.dtype == np.float64 else "float"
    f = {k: cp.asarray(v) for k, v in case.fields.items()}
    variants = {}
    if case.is_sweep:
        ks = {t: codegen.sweep_kernel(plan, "rows", grid.dtype, t) for t in [(1, 4, 256), (1, 2, 256)]}
        scal = tuple(np.int32(n) for n in grid.shape) + (np.int32(grid.ghost),)
        out = plan.out
        for t, k in ks.items():
            for tag, src in (("", k.source), ("-norestrict", unrestrict(k.source))):
                fn = cp.RawModule(code=f"typedef {real} real;\n" + src, options=("-std=c++17",)).get_function(k.name)
                variants[f"rows{t}{tag}"] = (lambda fn=fn, k=k: fn(k.grid(grid.shape), k.block, tuple(f[n] for n in k.args) + scal))
        cells = grid.cells
        for tag, src in (("", naive_sweep_source(plan, grid)), ("-restrict", restrict_peer(naive_sweep_source(plan, grid)))):
            fn = cp.RawModule(code=src).get_function("peer_naive")
            variants[f"peer{tag}"] = (lambda fn=fn: fn(((cells + 255) // 256,), (256,), (f[out], *(f[n] for n in plan.inputs))))
        outs = [out]
    else:
        outs = [d.out for d in plan.outputs]
        scal = tuple(np.int32(n) for n in grid.shape)
        for t in [(1, 128), (1, 256), (2, 128)]:
            k = codegen.operator_kernel(plan, "rows", grid.dtype, t)
            for tag, src in (("", k.source), ("-norestrict", unrestrict(k.source))):
                fn = cp.RawModule(code=f"typedef {real} real;\n" + src, options=("-std=c++17",)).get_function(k.name)
                variants[f"rows{t}{tag}"] = (lambda fn=fn, k=k: fn(k.grid(grid.shape), k.block, tuple(f[n] for n in k.args) + scal))
        cells = grid.cells
        src0 = naive_operator_source(plan, grid.shape, grid.dtype)
        for tag, src in (("", src0), ("-restrict", restrict_peer(src0))):
            fn = cp.RawModule(code=src).get_function("peer_naive")
            variants[f"peer{tag}"] = (lambda fn=fn: fn(((cells + 255) // 256,), (256,), (f["u"], *(f[o] for o in outs))))
    ref = None
    for name, run in variants.items():
        for o in outs:
            f[o][...] = np.nan
        run()
        got = [cp.asnumpy(f[o]) for o in outs]
        if ref is None:
            ref = got
        same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, ref))
        sec = timed(run)
        gbps = grid.cells * case.bytes_per_cell / sec / 1e9
        print(f"{wname:18s} {name:28s} {sec * 1e3:7.4f} ms {100 * gbps / ceiling:5.1f}%  {'same' if same else 'DIFFERENT'}", flush=True)
