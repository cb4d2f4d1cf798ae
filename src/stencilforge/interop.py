"""Arrays of other libraries (PyTorch, JAX, CuPy: anything with `__dlpack__`) in, results back in their kind.

Inside, host data is NumPy and device data CuPy. `native` reads an input through
DLPack, which shares its memory (no copy) where the device and layout allow;
`like` hands a result back to the input's library on the input's device, so a
torch tensor in gives a torch tensor out whichever backend computed it.
"""

from __future__ import annotations

import importlib
import logging

import numpy as np

from .backends import get_backend
from .errors import StencilforgeError
from .optional import require

HOST_DEVICES = (1, 3)  # DLPack kDLCPU and kDLCUDAHost (pinned host memory)
CUDA_DEVICES = (2, 13)  # kDLCUDA and kDLCUDAManaged

log = logging.getLogger(__name__)


def device_of(x) -> str | None:
    """'cpu' or 'cuda' for an array that says where it lives (`__dlpack_device__`); None for anything else."""
    if isinstance(x, np.ndarray):
        return "cpu"
    where = getattr(x, "__dlpack_device__", None)
    if where is None or not hasattr(x, "__dlpack__"):
        return None
    kind = int(where()[0])
    if kind in HOST_DEVICES:
        return "cpu"
    if kind in CUDA_DEVICES:
        return "cuda"
    raise StencilforgeError(f"a {type(x).__name__} on DLPack device type {kind} cannot be read: use host or CUDA memory")


def native(x):
    """`x` as a NumPy array (host memory) or a CuPy array (CUDA memory), sharing x's memory where DLPack
    allows; anything without `__dlpack__` (lists, numbers) through np.asarray."""
    device = device_of(x)
    if device is None or isinstance(x, np.ndarray):
        return np.asarray(x)
    cupy = require("cupy", f"a {type(x).__name__} in CUDA memory") if device == "cuda" else None
    if cupy is not None and isinstance(x, cupy.ndarray):
        return x
    try:
        return np.from_dlpack(x) if cupy is None else cupy.from_dlpack(x)
    except Exception as exc:  # each library refuses in its own way (a torch tensor that requires grad, a conjugate view)
        raise StencilforgeError(f"cannot read the {type(x).__name__} through DLPack: {str(exc).splitlines()[0]}") from None


def module_of(arr):
    """numpy or cupy: the module of a `native` array."""
    return np if isinstance(arr, np.ndarray) else require("cupy", "a CUDA array")


def to_module(a, xp):
    """`a` (a number, a NumPy or a CuPy array) in the memory of xp (numpy or cupy), moved only if it lives elsewhere."""
    if xp is not np:
        return xp.asarray(a)
    return a.get() if device_of(a) == "cuda" else np.asarray(a)


def backend_for(name: str, arrays, host: str = "cpu") -> str:
    """`name`, or for 'auto' the backend where the `native` arrays live: cuda for CUDA memory; for host memory
    numba (numpy where numba is missing), or `host` itself when it is not 'cpu' (e.g. 'auto' for a long run,
    which uploads its data once); no arrays: 'auto'."""
    if name != "auto":
        return name
    devices = {device_of(a) for a in arrays} - {None}
    if not devices:
        return "auto"
    if "cuda" in devices:
        chosen = "cuda"
    elif host != "cpu":
        return host
    else:
        try:
            chosen = get_backend("numba").name
        except StencilforgeError:
            chosen = "numpy"
    log.info("backend auto: %s, for input in %s memory", chosen, "CUDA" if chosen == "cuda" else "host")
    return chosen


def _from_dlpack(like):
    """The from_dlpack of `like`'s library (its array-API namespace, else its top-level module), or None."""
    namespace = getattr(like, "__array_namespace__", None)
    if namespace is not None:
        return getattr(namespace(), "from_dlpack", None)
    try:
        return getattr(importlib.import_module(type(like).__module__.partition(".")[0]), "from_dlpack", None)
    except ImportError:
        return None


def like(result, original):
    """`result` (a NumPy or CuPy array) as `original`'s kind on `original`'s device: moved between host and
    device only where they differ, handed over by DLPack without a copy. Inputs of no array library
    (lists) get NumPy; a library without from_dlpack gets NumPy or CuPy."""
    device = device_of(original)
    if device == "cuda" and isinstance(result, np.ndarray):
        result = require("cupy", "a CUDA array").asarray(result)
    elif device != "cuda":
        result = to_module(result, np)
    if device is None or type(original) is type(result):
        return result
    convert = _from_dlpack(original)
    if convert is None:
        return result
    try:
        return convert(result)
    except Exception:  # some libraries take only compact strides: hand over a contiguous copy
        return convert(module_of(result).ascontiguousarray(result))
