"""Output paths checked before a run starts, and files replaced atomically."""

from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from pathlib import Path

from ..errors import StencilforgeError

SNAPSHOT_SUFFIXES = (".h5", ".hdf5", ".npz")


def check_output(path: str | os.PathLike, what: str, suffixes: tuple[str, ...] | None = None) -> Path:
    """Refuse a path whose directory is missing or unwritable, or whose suffix we cannot write."""
    path = Path(path)
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise StencilforgeError(f"{what} {path} must end in {', '.join(suffixes)}")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise StencilforgeError(f"cannot write {what} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StencilforgeError(f"cannot write {what} {path}: directory {parent} is not writable")
    if path.is_dir():
        raise StencilforgeError(f"cannot write {what} {path}: it is a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise StencilforgeError(f"cannot write {what} {path}: the file exists and is not writable")
    return path


@contextmanager
def atomic_path(path: Path, durable: bool = True):
    """Yield a temporary path in the target's directory; rename it into place only on success.

    A crash or a failed write leaves the previous file (if any) untouched and no partial file behind;
    `durable` also syncs the data to disk before the rename (checkpoints need it, a sidecar does not).
    """
    # Hidden, unique, same directory (so the rename is atomic), suffix kept: writers pick the format from it.
    tmp_path = path.with_name(f".{path.stem}.{secrets.token_hex(6)}.tmp{path.suffix}")
    os.close(os.open(tmp_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # permissions follow the umask
    try:
        yield tmp_path
        if durable:
            with open(tmp_path, "rb+") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)
