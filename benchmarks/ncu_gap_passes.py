"""Launch one fused heat3d pass (pair) or one d1 + d2 pass (deriv) on the CUDA backend, for ncu."""
import sys

import cupy as cp

from stencilforge.backends import get_backend
from stencilforge.bench.suite import BackendRunner, FusedRunner
from stencilforge.bench.workloads import Workload, build_case

what = sys.argv[1]
if what == "pair":
    c = build_case(Workload("heat3d", (512, 512, 512), "float32"))
    r = FusedRunner(c, get_backend("cuda"))
    print("pair", r.resolved)
    r.run(2)
else:
    c = build_case(Workload("derivatives-fused", (10000, 10000), "float64"))
    r = BackendRunner(c, get_backend("cuda"))
    print("deriv", getattr(r.kernel, "strategy", None), getattr(r.kernel, "tile", None))
    r.run(1)
cp.cuda.Device().synchronize()
