"""Backend registry: every backend exposes the same small interface.

sweep(plan, grid) -> run(fields); sum_squares(plan, grid) -> run(fields) -> float;
axis_operator(op, dtype, shape=None) -> run(u, *outs) (shape: the arrays it will get, for kernel choice); asarray / to_host / synchronize; xp.
"""

from __future__ import annotations

import importlib

from ..errors import StencilforgeError

_MODULES = {
    "numpy": ("numpy_ref", "NumpyBackend"),
    "numba": ("numba_cpu", "NumbaBackend"),
    "cuda": ("cuda", "CudaBackend"),
}
NAMES = tuple(_MODULES)


def _load(name: str):
    module, cls = _MODULES[name]
    try:
        return getattr(importlib.import_module(f"{__name__}.{module}"), cls, None)
    except ImportError:
        return None


def available() -> list[str]:
    names = []
    for name in NAMES:
        cls = _load(name)
        if cls is not None and cls.available():
            names.append(name)
    return names


def get_backend(name: str = "auto", **options):
    """A backend instance; 'auto' is cuda when a GPU is usable, else numba, else numpy."""
    if name == "auto":
        for candidate in ("cuda", "numba", "numpy"):
            cls = _load(candidate)
            if cls is not None and cls.available():
                return cls(**options) if candidate == "cuda" else cls()
    if name not in _MODULES:
        raise StencilforgeError(f"unknown backend {name!r}: choose one of auto, {', '.join(NAMES)}")
    cls = _load(name)
    if cls is None or not cls.available():
        reason = getattr(cls, "unavailable_reason", lambda: "it is not installed")()
        raise StencilforgeError(
            f"backend {name!r} is not available ({reason}); available backends: {', '.join(available())}"
        )
    return cls(**options) if name == "cuda" else cls()
