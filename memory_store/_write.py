"""Atomic writes: a reader sees the old file or the new one, never half of either; and the lock
writers of one file take around a read-merge-write."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from memory_store._errors import MemoryStoreError

_NEW_FILE_MODE = 0o666  # before umask, like open(path, "w")


def atomic_write(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` via a hidden temp file in the same folder, fsync, os.replace.

    The temp file's name starts with "." so a watching store ignores it. An
    existing file's permission bits are kept. Returns the absolute path written.
    """
    target = Path(os.path.abspath(os.fspath(path)))
    folder = target.parent
    temp = folder / f".{target.name}.{secrets.token_hex(4)}.tmp"
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise MemoryStoreError(f"cannot write {target}: {exc.strerror}") from None
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _NEW_FILE_MODE)
    except OSError as exc:
        raise MemoryStoreError(f"cannot write {target}: {exc.strerror}") from None
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(text.encode("utf-8"))
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise MemoryStoreError(f"cannot write {target}: {exc.strerror}") from None
    _fsync_folder(folder)
    return target


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable; some file systems do not allow it, which is fine."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def file_lock(lock_path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive flock on ``lock_path`` (created 0600, never through a symlink) for the block.

    Raises MemoryStoreError when the lock file cannot be opened.
    """
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise MemoryStoreError(f"cannot lock {os.fspath(lock_path)}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
