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
