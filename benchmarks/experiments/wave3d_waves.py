"""Round 12 (docs/performance.md): does the last, partly filled wave of blocks cost wave3d r8 at 512^3?

streaming_vec 64x4x128 launches 4 x 128 x 8 = 4096 blocks at 512^3, and the H100 holds 2 per SM on 132
SMs: 15.5 waves. Changing only the y extent moves the fill of the last wave (496: 15.03 waves, 520: 15.76,
528: 16.00) at nearly the same work per cell. Prints blocks, resident blocks per SM (CUDA occupancy API)
and waves per shape, then cuda_profile's timing (checked against the oracle first; rows on 128-byte lines).

    PYTHONPATH=src python3 benchmarks/experiments/wave3d_waves.py OUT_PREFIX ZxYxX[,ZxYxX...] VARIANT ...
"""
import sys
sys.path.insert(0, "benchmarks")
import cupy as cp
import numpy as np

import cuda_profile
from stencilforge import problems
from stencilforge.backends.cuda import codegen
from stencilforge.backends.cuda.compile import BASE_OPTIONS

prefix, shapes, variants = sys.argv[1], [tuple(int(n) for n in s.split("x")) for s in sys.argv[2].split(",")], sys.argv[3:]
cuda_profile.PARAMS["wave3d"] = {"radius": 8}
sms = cp.cuda.Device().attributes["MultiProcessorCount"]
for shape in shapes:
    cuda_profile.LARGE["wave3d"] = shape
    cuda_profile.FIELDS.clear()
    print(f"=== wave3d r8 {'x'.join(map(str, shape))} float32", flush=True)
    for spec in variants:
        name, strategy, tile, _ = cuda_profile.parse(spec)
        setup = problems.build(name, shape=shape, dtype="float32", radius=8)
        k = codegen.sweep_kernel(setup.sweep, strategy, setup.grid.dtype, tile)
        fn = cp.RawModule(code=codegen.module_source([k], setup.grid.dtype, spec), options=BASE_OPTIONS).get_function(k.name)
        if k.dynamic_smem > codegen.STATIC_SMEM_LIMIT:
            fn.max_dynamic_shared_size_bytes = k.dynamic_smem
        per_sm = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.kernel.ptr, int(np.prod(k.block)), k.dynamic_smem)
        blocks = int(np.prod(k.grid(shape)))
        print(f"{spec:34s} {blocks} blocks, {per_sm} per SM x {sms} SMs: {blocks / (per_sm * sms):.2f} waves, "
              f"{fn.num_regs} registers", flush=True)
    sys.argv = ["cuda_profile.py", "time", *variants, "--json", f"{prefix}_{'x'.join(map(str, shape))}.json"]
    cuda_profile.main()
