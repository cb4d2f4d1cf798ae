"""NVRTC compilation to a cubin for one architecture, with an on-disk cache.

The cache key hashes the source, the options (which carry -arch) and the
NVRTC version, so a kernel built by another compiler or for another GPU is
never loaded. The same `compile_cubin` runs in CI (cuda-bindings plus the
nvidia-cuda-nvrtc wheel, no driver needed) and at run time.
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path

from ...cache import cache_dir, write_atomic
from ...errors import StencilforgeError

BASE_OPTIONS = ("-std=c++17", "-default-device")

log = logging.getLogger(__name__)


def options(arch: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    return (f"-arch={arch}",) + BASE_OPTIONS + tuple(extra)


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return None
    return nvrtc


def nvrtc_version() -> tuple[int, int] | None:
    nvrtc = _nvrtc()
    if nvrtc is None:
        return None
    err, major, minor = nvrtc.nvrtcVersion()
    return (major, minor) if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else None


def _log(nvrtc, prog) -> str:
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.decode(errors="replace").rstrip("\x00").strip()


def _first_error(log: str) -> str:
    for line in log.splitlines():
        if "error" in line:
            return line.strip()
    return log.splitlines()[0].strip() if log else "no compiler log"


def compile_cubin(source: str, arch: str, what: str, extra: tuple[str, ...] = ()) -> bytes:
    """Machine code for `arch` (e.g. sm_90); `what` names the kernel and strategy in errors."""
    nvrtc = _nvrtc()
    if nvrtc is None:
        raise StencilforgeError("compiling CUDA kernels needs the cuda-bindings package (pip install cuda-bindings)")
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"stencilforge.cu", 0, [], [])
    if err != ok:
        raise StencilforgeError(f"NVRTC could not create a program for {what}: {err.name}")
    try:
        opts = [o.encode() for o in options(arch, extra)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != ok:
            raise StencilforgeError(f"CUDA compile of {what} failed: {_first_error(_log(nvrtc, prog))}")
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        if err != ok:
            raise StencilforgeError(f"NVRTC produced no machine code for {what}: {err.name}")
        cubin = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        if err != ok:
            raise StencilforgeError(f"NVRTC produced no machine code for {what}: {err.name}")
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def cache_key(source: str, arch: str, version, extra: tuple[str, ...] = ()) -> str:
    text = "\0".join([source, " ".join(options(arch, extra)), f"nvrtc-{version}"])
    return hashlib.sha256(text.encode()).hexdigest()


def cached_cubin(source: str, arch: str, what: str, extra: tuple[str, ...] = ()) -> Path | None:
    """Path of the cubin for (source, options, arch, NVRTC version), compiled now if absent.

    None when cuda-bindings is missing: the caller then compiles through CuPy,
    whose own cache key covers the same four things.
    """
    version = nvrtc_version()
    if version is None:
        return None
    path = cache_dir("cuda") / f"{cache_key(source, arch, version, extra)}.cubin"
    if path.exists():
        log.info("%s: loaded from the kernel cache (%s)", what, path.name)
        return path
    start = time.perf_counter()
    write_atomic(path, compile_cubin(source, arch, what, extra))
    log.info("%s: compiled for %s with NVRTC %d.%d in %.2f s", what, arch, *version, time.perf_counter() - start)
    return path


def device_arch(cp) -> str:
    """The current device's architecture as NVRTC names it (sm_90 on an H200)."""
    return f"sm_{cp.cuda.Device().compute_capability}"


def load_module(cp, source: str, arch: str, what: str, extra: tuple[str, ...] = ()):
    """A CuPy RawModule of `source`: its cubin from the project's cache (compiled now if absent), or compiled by
    CuPy, under its own cache, where cuda-bindings is not installed."""
    path = cached_cubin(source, arch, what, extra)
    if path is not None:
        return cp.RawModule(path=str(path))
    log.info("%s: compiled through CuPy (its own cache; cuda-bindings is not installed)", what)
    return cp.RawModule(code=source, options=options(arch, extra)[1:])
