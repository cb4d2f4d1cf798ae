"""Where stencilforge keeps generated kernels and tuning results between runs.

$STENCILFORGE_CACHE_DIR moves it (as CUPY_CACHE_DIR does for CuPy); the default is ~/.cache/stencilforge.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    base = os.environ.get("STENCILFORGE_CACHE_DIR") or Path.home() / ".cache" / "stencilforge"
    return Path(base).joinpath(*parts)


def write_atomic(path: Path, data: bytes) -> None:
    """Write a cache file so no other process ever reads it half-written (the rename is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
