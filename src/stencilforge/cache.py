"""Where stencilforge keeps generated kernels and tuning results between runs.

$STENCILFORGE_CACHE_DIR moves it (as CUPY_CACHE_DIR does for CuPy); the default is ~/.cache/stencilforge.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """The cache directory, created; a per-user one in the temporary directory when the usual one cannot be
    (an unwritable or missing HOME must not stop a run: the cache only saves compile time)."""
    base = Path(os.environ.get("STENCILFORGE_CACHE_DIR") or Path.home() / ".cache" / "stencilforge")
    path = base.joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.access(path, os.W_OK | os.X_OK):
            return path
    except OSError:
        pass
    path = Path(tempfile.gettempdir(), f"stencilforge-cache-{os.getuid()}").joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_atomic(path: Path, data: bytes) -> None:
    """Write a cache file so no other process ever reads it half-written (the rename is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
