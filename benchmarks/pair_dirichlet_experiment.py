# ruff: noqa  (the script as it ran; removed in the next commit)
"""Experiment (kept in the commit that used it, then removed): two steps per pass against one under Dirichlet
walls that change in time, 4096^2, as run for pair-dirichlet-h{100,200}-2026-11-24.json (from the repository root:
python3 benchmarks/pair_dirichlet_experiment.py FILE, with tests/ on the path)."""
import sys; import json; sys.path.insert(0, "tests"); sys.path.insert(0, "benchmarks")
import importlib.util

from equations_bench import copy_gbps, timed

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend

spec = importlib.util.spec_from_file_location("vd", "examples/variable_diffusion.py"); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
b = CudaBackend(); ceiling = copy_gbps()
out = {"device": b.device_name, "copy_gbps": ceiling}
from test_equations import heat

for dtype, make in (("float32", m.build), ("float64", m.build), ("heat float32", lambda shape, dtype: heat(shape, dtype="float32")[0])):
    p = make(shape=(4096, 4096), dtype=dtype.split()[-1])
    single, paired = sf.Simulation(p, b), sf.Simulation(p, b)
    assert paired.build_pair() is None
    nbytes = p.analysis.bytes_per_cell() * 4096 * 4096
    s1 = timed(single.step); s2 = timed(paired.step_pair) / 2
    out[dtype] = {"bytes_per_cell": p.analysis.bytes_per_cell(), "single_step_pct_copy": 100 * nbytes / s1 / 1e9 / ceiling,
                  "two_steps_per_pass_pct_copy": 100 * nbytes / s2 / 1e9 / ceiling, "single_ms": s1 * 1e3, "pair_ms_per_step": s2 * 1e3}
    print(dtype, {k: round(v, 3) for k, v in out[dtype].items()})
json.dump(out, open(sys.argv[1], "w"), indent=1)
