# ruff: noqa  (the script as it ran; removed in the next commit)
"""Experiment: host time per launch and per step of generated passes on the GPU, Gray-Scott f32 at 256^2..4096^2."""
import sys, time, json, cProfile, pstats, io
import cupy as cp, stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from equations_bench import problem
b = CudaBackend(); out = {}
for n in (256, 512, 1024, 2048, 4096):
    p = problem(n); sim = sf.Simulation(p, b); sim.step(5); cp.cuda.runtime.deviceSynchronize()
    (pss, run), = sim.passes; arrays = sim.arrays()
    t0 = time.perf_counter()
    for _ in range(200): run(arrays, sim.params, 0.0)
    cp.cuda.runtime.deviceSynchronize(); kern = (time.perf_counter() - t0) / 200
    t0 = time.perf_counter()
    for _ in range(200): sim.step()
    cp.cuda.runtime.deviceSynchronize(); step = (time.perf_counter() - t0) / 200
    assert sim.build_pair() is None
    t0 = time.perf_counter()
    for _ in range(100): sim.step_pair()
    cp.cuda.runtime.deviceSynchronize(); pair = (time.perf_counter() - t0) / 200
    r = sf.run(p, backend=b, steps=400)
    out[n] = {"launch_loop_us": kern * 1e6, "step_us": step * 1e6, "pair_us_per_step": pair * 1e6, "run_us_per_step": r.summary["wall_s"] / 400 * 1e6}
    print(n, {k: round(v, 1) for k, v in out[n].items()})
p = problem(1024); sim = sf.Simulation(p, b); sim.step(5)
pr = cProfile.Profile(); pr.enable()
for _ in range(500): sim.step()
cp.cuda.runtime.deviceSynchronize(); pr.disable()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14); print(s.getvalue()[-3500:])
json.dump(out, open(sys.argv[1], "w"), indent=1)
