"""Atomic writes: a reader sees the old file or the new one, never half of either; and the lock
writers of one file take around a read-merge-write."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from memory_store._errors import MemoryStoreError

_NEW_FILE_MODE = 0o666  # before umask, like open(path, "w")
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP_NAME = re.compile(r"\.[0-9a-f]{12}\.tmp")  # what write_in_folder names its temp file
STALE_TEMP_S = 60.0  # a temp file of ours this old belongs to a writer killed mid-write (kill -9, a crash)


SIDECAR_GITIGNORE = ".gitignore"  # in a root's .recall-kit folder: what is learned there is never committed
SIDECAR_GITIGNORE_TEXT = b"*\n"


def keep_out_of_git(folder_fd: int) -> None:
    """Give the sidecar folder open at ``folder_fd`` a ``.gitignore`` of ``*`` when it has none, so ``git add -A``
    in a repository holding the root never commits what was learned from the user's prompts. Written once:
    one that is there (whatever it holds, the user's if they changed it) is left as it is. Best effort: a
    folder it cannot be written in still takes the sidecars, as before."""
    try:
        os.stat(SIDECAR_GITIGNORE, dir_fd=folder_fd, follow_symlinks=False)
        return
    except FileNotFoundError:
        pass
    except OSError:
        return
    try:
        write_in_folder(folder_fd, SIDECAR_GITIGNORE, SIDECAR_GITIGNORE_TEXT, replace=False, mode=0o600)
    except OSError:
        pass  # made meanwhile (FileExistsError), or the folder refuses it: the sidecar's own write says so


def write_in_folder(folder_fd: int, name: str, data: bytes, *, replace: bool, mode: int | None = None) -> None:
    """Write ``data`` as ``name`` in the open folder ``folder_fd``: a hidden temp file, fsync, then
    renamed over ``name`` (``replace``) or linked into place (never replaces a file that is there).

    ``mode`` sets the new file's permission bits (default: 0666 less the umask). Nothing is ever
    written through a symlink: a symlink at ``name`` is replaced, or refused by the link. Raises
    OSError (FileExistsError when ``name`` exists and not ``replace``); no temp file is left behind.
    """
    # Short and hidden: a watching store ignores it, and a 250-byte name still has room beside it.
    temp = f".{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, _TEMP_FLAGS, _NEW_FILE_MODE, dir_fd=folder_fd)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.rename(temp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        else:
            os.link(temp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd, follow_symlinks=False)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=folder_fd)  # gone after a rename; the spare name after a link
    _fsync(folder_fd)
    _sweep_stale_temps(folder_fd)


def _sweep_stale_temps(folder_fd: int) -> None:
    """Remove the temp files a killed writer left in the folder (regular files of ours, named as
    ``write_in_folder`` names them, older than STALE_TEMP_S): each is a whole copy of what it was writing,
    learned words or a memory's text, which a later `learned clear` or `rm` would otherwise leave on disk."""
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(folder_fd) as listing:
        for entry in listing:
            if not _TEMP_NAME.fullmatch(entry.name):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and now - info.st_mtime > STALE_TEMP_S:
                    os.unlink(entry.name, dir_fd=folder_fd)


def atomic_write(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` via a hidden temp file in the same folder, fsync, rename.

    The temp file's name starts with "." so a watching store ignores it. An
    existing file's permission bits are kept. Returns the absolute path written.
    """
    target = Path(os.path.abspath(os.fspath(path)))
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise MemoryStoreError(f"cannot write {target}: {exc.strerror}") from None
    try:
        folder_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise MemoryStoreError(f"cannot write {target}: {exc.strerror}") from None
    try:
        write_in_folder(folder_fd, target.name, text.encode("utf-8"), replace=True, mode=mode)
    except OSError as exc:
        raise MemoryStoreError(f"cannot write {target}: {exc.strerror}") from None
    finally:
        os.close(folder_fd)
    return target


def _fsync(folder_fd: int) -> None:
    """Make the rename itself durable; some file systems do not allow it, which is fine."""
    with contextlib.suppress(OSError):
        os.fsync(folder_fd)


@contextlib.contextmanager
def file_lock(lock_path: str | os.PathLike[str], *, dir_fd: int | None = None) -> Iterator[None]:
    """Hold an exclusive flock on ``lock_path`` (created 0600, never through a symlink) for the block;
    with ``dir_fd``, ``lock_path`` is relative to that open folder.

    Raises MemoryStoreError when the lock file cannot be opened.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK  # a FIFO there never blocks
    try:
        fd = os.open(lock_path, flags, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        raise MemoryStoreError(f"cannot lock {os.fspath(lock_path)}: {exc.strerror}") from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:  # a FIFO or a device would be "locked" alone, by each writer for itself
        os.close(fd)
        raise MemoryStoreError(f"cannot lock {os.fspath(lock_path)}: it is not a regular file")
    with held_lock(fd):
        yield


@contextlib.contextmanager
def held_lock(fd: int) -> Iterator[None]:
    """Hold an exclusive flock on the open lock file ``fd`` for the block, then close it (which releases it)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
