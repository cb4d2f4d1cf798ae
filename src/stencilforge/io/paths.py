"""Output paths checked before a run starts, and files replaced atomically."""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import secrets
from contextlib import contextmanager
from pathlib import Path

from ..errors import StencilforgeError

HDF5_SUFFIXES = (".h5", ".hdf5")  # snapshot files with an XDMF sidecar
SNAPSHOT_SUFFIXES = (*HDF5_SUFFIXES, ".nc", ".npz")

log = logging.getLogger(__name__)


def check_output(path: str | os.PathLike, what: str, suffixes: tuple[str, ...] | None = None, overwrite: bool = True,
                 option: str = "--overwrite") -> Path:
    """Refuse a path whose directory is missing or unwritable, or whose suffix we cannot write.

    With `overwrite` False an existing file is refused too: a user's own file must never be replaced silently.
    """
    if not str(path).strip():
        raise StencilforgeError(f"{what} path is empty")
    path = Path(path)
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise StencilforgeError(f"{what} {path} must end in {', '.join(suffixes)}")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise StencilforgeError(f"cannot write {what} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or not _accepts_files(parent):
        raise StencilforgeError(f"cannot write {what} {path}: directory {parent} is not writable")
    if path.is_dir():
        raise StencilforgeError(f"cannot write {what} {path}: it is a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise StencilforgeError(f"cannot write {what} {path}: the file exists and is not writable")
    if path.exists() and not overwrite:
        raise StencilforgeError(f"{what} {path} already exists; pass {option} to replace it")
    return path


def _accepts_files(directory: Path) -> bool:
    """Whether a file can really be created there: os.access says yes for /proc and read-only mounts as root."""
    try:
        fd, name = _create_temp(directory / ".stencilforge-probe")
    except OSError:
        return False
    os.close(fd)
    os.unlink(name)
    return True


def _create_temp(path: Path) -> tuple[int, Path]:
    """A new hidden file beside `path` whose name carries our pid, so a later run can tell it is stale."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{secrets.token_hex(4)}.tmp{path.suffix}")
    return os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666), tmp  # permissions follow the umask


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_temps(path: Path) -> list[Path]:
    """Delete the temporary files that a killed run left beside `path` (their writer's pid is gone)."""
    path = Path(path)
    pattern = re.compile(rf"^\.{re.escape(path.stem)}\.(\d+)-[0-9a-f]{{8}}\.tmp{re.escape(path.suffix)}$")
    removed: list[Path] = []
    try:
        entries = list(path.parent.iterdir()) if str(path.parent) else list(Path(".").iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if match and not _alive(int(match.group(1))):
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


@contextmanager
def sole_writer(path: Path, what: str):
    """Hold `path` for this run alone, or refuse in one line: two runs writing one file crash HDF5 and miscount.

    The lock is flock on a hidden file beside it (`.NAME.lock`; the output itself is replaced by renames),
    so the system drops it however the run ends; the run that lets go removes the file. Where the
    filesystem offers no flock (Lustre mounted without it) the run goes on unguarded, with a warning.
    """
    lock = path.with_name(f".{path.name}.lock")
    try:
        fd = _flock(lock)
    except BlockingIOError:
        raise StencilforgeError(f"{what} {path} is being written by another run; wait for it to end or choose another file") from None
    except OSError as exc:
        raise StencilforgeError(f"cannot write {what} {path}: cannot create {lock.name}: {exc.strerror}") from None
    if fd is None:
        log.warning("cannot lock %s: this filesystem has no flock, so a second run writing it would not be refused", path)
        yield
        return
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)  # while still holding it: no run can lock a file that is then removed
        os.close(fd)


def _flock(lock: Path) -> int | None:
    """A descriptor holding the exclusive lock on the file now named `lock` (BlockingIOError while another
    holds it), or None where the filesystem has no flock."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)  # written to: NFS locks a file only open for writing
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            lock.unlink(missing_ok=True)
            return None
        try:
            if os.path.samestat(os.fstat(fd), os.stat(lock)):
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the run that held it removed the file after we opened it: lock the one now there


@contextmanager
def atomic_path(path: Path, durable: bool = True):
    """Yield a temporary path in the target's directory; rename it into place only on success.

    A crash or a failed write leaves the previous file (if any) untouched and no partial file behind
    (after kill -9 the next run writing `path` removes it); `durable` also syncs the data to disk
    before the rename (checkpoints need it, a sidecar does not).
    """
    # Hidden, unique, same directory (so the rename is atomic), suffix kept: writers pick the format from it.
    fd, tmp_path = _create_temp(path)
    os.close(fd)
    try:
        yield tmp_path
        if durable:
            with open(tmp_path, "rb+") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)



def reserve(path: Path, nbytes: int) -> None:
    """Allocate disk blocks for the next `nbytes` appended to `path`, or raise ENOSPC cleanly now.

    HDF5 meets a full disk badly (handles it cannot close, a segfault at exit),
    so its writes go only into space reserved here first; it truncates the file
    to what it used when it closes it.
    """
    fd = os.open(path, os.O_WRONLY)
    try:
        os.posix_fallocate(fd, os.fstat(fd).st_size, nbytes + nbytes // 16 + (64 << 10))  # + metadata
    finally:
        os.close(fd)
