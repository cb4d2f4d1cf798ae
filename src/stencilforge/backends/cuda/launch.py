"""Launches of generated kernels through the CUDA driver, their argument slots made once.

A generated pass takes about twenty arguments; CuPy converts every one on each
call, which took longer than the kernel itself on grids up to about 2048^2
(benchmarks/results/host-h100-2026-11-24.json). A `Launcher` keeps one ctypes
slot per argument, writes the values of a call into them and calls
cuLaunchKernel on CuPy's current stream, so the work stays ordered with
CuPy's own.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Sequence

from ...errors import StencilforgeError

SLOT = {"ptr": ctypes.c_void_p, "float32": ctypes.c_float, "float64": ctypes.c_double,
        "int32": ctypes.c_int, "int64": ctypes.c_longlong}


@functools.cache
def _driver():
    """cuLaunchKernel and cuGetErrorString from the driver library CuPy runs on, or None where it cannot
    be loaded by that name (the launches then go through CuPy)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    launch = lib.cuLaunchKernel
    launch.restype = ctypes.c_int
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    describe = lib.cuGetErrorString
    describe.restype = ctypes.c_int
    describe.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    return launch, describe


class Launcher:
    """launcher(values): the kernel on (blocks, threads), its arguments of `kinds` ("ptr" for an array's
    device address, else a NumPy dtype name) set to `values`."""

    def __init__(self, cp, function, kinds: Sequence[str], blocks, threads, what: str):
        self._cp, self._what = cp, what
        self._slots: list = [SLOT[k]() for k in kinds]
        self._params = (ctypes.c_void_p * len(kinds))(*[ctypes.addressof(s) for s in self._slots])
        self._geometry = tuple(int(v) for v in (*blocks, *threads))
        self._function = function  # holds the module, and with it the CUfunction, alive
        self._handle = ctypes.c_void_p(function.kernel.ptr)  # a CuPy RawKernel's loaded function

    @staticmethod
    def available() -> bool:
        return _driver() is not None

    def __call__(self, values) -> None:
        for slot, value in zip(self._slots, values):
            slot.value = value
        launch, describe = _driver()
        stream = self._cp.cuda.get_current_stream().ptr
        status = launch(self._handle, *self._geometry, 0, stream, self._params, None)
        if status:
            text = ctypes.c_char_p()
            describe(status, ctypes.byref(text))
            raise StencilforgeError(f"CUDA launch of {self._what} failed: {(text.value or b'error %d' % status).decode()}")
