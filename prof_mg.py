import cupy as cp, numpy as np, sys
from stencilforge.solvers.cuda_kernels import CudaKernels
from stencilforge.solvers.multigrid import Multigrid, Traffic
from stencilforge.backends.cuda import CudaBackend
arch = CudaBackend().arch
for shape in [(4096, 4096), (512, 512, 512)]:
    for dtype in ["float64", "float32"]:
        tr = Traffic()
        mg = Multigrid(shape, ("dirichlet",) * len(shape), tuple(1 / (n + 1) for n in shape), None, dtype, CudaKernels(tr, arch))
        fine, coarse = mg.levels[0], mg.levels[1]
        fine.f[...] = cp.random.standard_normal(fine.f.shape).astype(dtype)
        k = mg.kernels
        ops = {
            "colour": lambda: k.smooth_colour(fine, 0, 1.2),
            "restrict_residual": lambda: k.restrict_residual(fine, coarse),
            "prolong_add": lambda: k.prolong_add(fine, coarse),
            "residual_norm2": lambda: k.residual_norm2(fine, fine.u, fine.f),
            "cycle": lambda: mg.cycle(),
        }
        for name, fn in ops.items():
            for _ in range(3):
                fn()
            cp.cuda.Device().synchronize()
            b0 = tr.bytes
            s, e = cp.cuda.Event(), cp.cuda.Event()
            reps = 10
            s.record()
            for _ in range(reps):
                fn()
            e.record(); e.synchronize()
            ms = cp.cuda.get_elapsed_time(s, e) / reps
            nbytes = (tr.bytes - b0) / reps
            print(f"{'x'.join(map(str,shape)):12s} {dtype:8s} {name:18s} {ms:8.3f} ms  {nbytes/1e9:7.3f} GB  {nbytes/ms/1e6:7.0f} GB/s")
        del mg
        cp.get_default_memory_pool().free_all_blocks()
