"""Backend registry: every backend offers the interface of `base.Backend`."""

from __future__ import annotations

import importlib
import importlib.util

from ..errors import StencilforgeError
from .base import Backend, Launch

_MODULES = {  # name -> (module, class, the package it cannot run without)
    "numpy": ("numpy_ref", "NumpyBackend", "numpy"),
    "numba": ("numba", "NumbaBackend", "numba"),
    "cuda": ("cuda", "CudaBackend", "cupy"),
}
NAMES = tuple(_MODULES)
__all__ = ["Backend", "Launch", "NAMES", "available", "get_backend"]


def _load(name: str):
    module, cls, _ = _MODULES[name]
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
            if importlib.util.find_spec(_MODULES[candidate][2]) is None:
                continue  # not installed: no need to import the backend to learn it cannot run
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
