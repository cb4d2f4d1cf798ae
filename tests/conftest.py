import os
import tempfile

import numpy as np
import pytest

os.environ.setdefault("STENCILFORGE_CACHE_DIR", os.path.join(tempfile.gettempdir(), "stencilforge-test-cache"))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


CPU_BACKENDS = ("numpy", "numba")
TOLERANCES = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-12, atol=1e-12)}


@pytest.fixture
def passes_compiled_first(monkeypatch):
    """Numba's generated passes compile before a run steps, as for passes NumPy rounds otherwise, so a test comparing
    backends compares Numba's kernels, not the NumPy passes a run takes while they compile (`rounds_as_oracle`)."""
    from stencilforge.backends.numba import backend

    monkeypatch.setattr(backend, "rounds_as_oracle", lambda p: False)


@pytest.fixture(scope="session")
def nvrtc():
    """NVRTC from cuda-bindings, for compiling generated CUDA C without a GPU; the test skips without it."""
    nv = pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is not installed")
    try:
        err, _, _ = nv.nvrtcVersion()
    except Exception as exc:  # the bindings are there but libnvrtc is not
        pytest.skip(f"NVRTC library not loadable: {exc}")
    if err != nv.nvrtcResult.NVRTC_SUCCESS:
        pytest.skip(f"NVRTC not usable: {err}")
    return nv
