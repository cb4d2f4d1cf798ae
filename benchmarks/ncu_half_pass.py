"""Three steps of heat3d 512^3 through the generated pass (float32 or float16 storage), for ncu."""
import sys

import cupy as cp

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.problems import heat

storage = None if sys.argv[1] == "float32" else "float16"
sim = sf.Simulation(heat.problem(3, (512, 512, 512), storage=storage), CudaBackend())
cp.cuda.Device().synchronize()
print("MARK start", flush=True)
for _ in range(3):
    sim.step()
cp.cuda.Device().synchronize()
