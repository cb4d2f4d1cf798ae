"""`auto`'s device facts: the copy bandwidth measured once per device and driver, and the rule that reads it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

from stencilforge import problems
from stencilforge.backends.cuda import facts as facts_module
from stencilforge.backends.cuda.facts import DeviceFacts, device_facts
from stencilforge.backends.cuda.tune import FUSED_ROWS_VEC_GBPS_PER_SM, choose
from stencilforge.problems import derivatives as deriv
from stencilforge.simulation import axis_operator


def derivatives_operator():
    """The axis operator the named problem derivatives runs (its one stage: d1 and d2 in one pass)."""
    (stage,) = problems.problem("derivatives")[0].analysis.stages
    return axis_operator(stage)


def fake_cupy(sms=132, driver=13000):
    device = SimpleNamespace(attributes={"MultiProcessorCount": sms})
    cuda = SimpleNamespace(Device=lambda: device, runtime=SimpleNamespace(driverGetVersion=lambda: driver))
    return SimpleNamespace(cuda=cuda)


def test_bandwidth_is_measured_once_per_device_and_driver(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCILFORGE_CACHE_DIR", str(tmp_path))
    calls = []
    monkeypatch.setattr(facts_module, "_measure_copy", lambda cp: calls.append(1) or 3000.0 + len(calls))
    first = device_facts(fake_cupy(), "GPU A")
    again = device_facts(fake_cupy(), "GPU A")
    assert first == again == DeviceFacts("GPU A", 132, 3001.0) and len(calls) == 1
    assert device_facts(fake_cupy(driver=13001), "GPU A").copy_gbps == 3002.0  # another driver measures again
    assert device_facts(fake_cupy(), "GPU B").copy_gbps == 3003.0
    stored = json.loads((tmp_path / "cuda" / "bandwidth.json").read_text())
    assert len(stored) == 3 and all(v > 0 for v in stored.values())


def test_a_damaged_cache_file_is_measured_over(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCILFORGE_CACHE_DIR", str(tmp_path))
    (tmp_path / "cuda").mkdir()
    (tmp_path / "cuda" / "bandwidth.json").write_text("{not json")
    monkeypatch.setattr(facts_module, "_measure_copy", lambda cp: 4200.0)
    assert device_facts(fake_cupy(), "GPU A").copy_gbps == 4200.0


def test_fused_derivatives_take_the_vector_kernel_where_each_sm_must_move_more():
    fused = derivatives_operator()
    assert len(fused.outputs) == 2
    slow = DeviceFacts("slow", 132, 0.9 * FUSED_ROWS_VEC_GBPS_PER_SM * 132)
    fast = DeviceFacts("fast", 132, 1.1 * FUSED_ROWS_VEC_GBPS_PER_SM * 132)
    assert choose(fused, (10000, 10000), np.float64, facts=slow)[0] == "flat"
    assert choose(fused, (10000, 10000), np.float64, facts=fast)[0] == "rows_vec"
    assert choose(fused, (10000, 10000), np.float64)[0] == "flat"  # no device known (show-kernel, CI)
    one = deriv.operator(1, 0.01, 4, (1,))
    assert choose(one, (10000, 10000), np.float64, facts=slow)[0] == "rows_vec"  # one output: on any device


def test_the_threshold_lies_between_the_two_measured_devices():
    """H100 SXM and H200: 132 SMs, copy bandwidth as measured in benchmarks/results/derivatives-cuda-h*-552f1c6.json."""
    for name, wins in (("h100", "flat"), ("h200", "rows_vec")):
        with open(f"benchmarks/results/derivatives-cuda-{name}-552f1c6.json") as fh:
            report = json.load(fh)
        sms = report["device"]["sms"]
        device = DeviceFacts(name, sms, report["ceilings"]["copy"]["gbps"])
        fused = [r for r in report["results"] if r["workload"] == "derivatives-fused" and r.get("status") == "ok"]
        best = max((r for r in fused if r.get("strategy") in ("flat", "rows_vec")), key=lambda r: r["teff_gbps"])
        assert best["strategy"] == wins
        assert choose(derivatives_operator(), (10000, 10000), np.float64, facts=device)[0] == wins
