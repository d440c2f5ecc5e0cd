"""Folders and files only this user controls: where the cache, the daemon's socket and the logs live.

A state, cache or run path is trusted only when no other user could have put something there or can
swap it: every folder on the way is owned by this user or by root and not writable by others (a
sticky folder owned by root, like /tmp, excepted: others cannot rename or remove what is ours in it),
the folder itself is this user's and private, and a file in it is opened without following a symlink
and used only when it is a regular file of this user's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from memory_store._errors import UnsafePathError
from memory_store._write import held_lock

PRIVATE_FOLDER_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def private_folder(path: str | os.PathLike[str], *, create: bool = True, missing_ok: bool = False) -> Path:
    """``path`` as a folder only this user controls, created (0700, with its missing parents) when
    ``create``; an existing folder of ours that others could read is tightened to 0700. With
    ``missing_ok`` (and not ``create``), a missing ``path`` is returned as it is once every folder
    on the way that exists checks out: what a client needs before it connects to a socket there.

    Raises UnsafePathError, naming the first folder on the way another user could swap, when any
    is owned by someone else or writable by others, or when ``path`` is a symlink or not a folder.
    """
    folder = Path(os.path.abspath(os.fspath(path)))
    uid = os.getuid()
    for ancestor in reversed(folder.parents):
        _check_ancestor(ancestor, uid)
    if create:
        try:
            os.makedirs(folder, mode=PRIVATE_FOLDER_MODE, exist_ok=True)
        except FileExistsError:
            pass  # something that is not a folder: the checks below say what
        except OSError as exc:
            raise UnsafePathError(f"cannot create {folder}: {exc.strerror}") from None
        for ancestor in reversed(folder.parents):  # what makedirs created, and what appeared meanwhile
            _check_ancestor(ancestor, uid)
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        if missing_ok:
            return folder
        raise UnsafePathError(f"{folder} does not exist") from None
    except OSError as exc:
        raise UnsafePathError(f"cannot check {folder}: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise UnsafePathError(f"{folder} is a symlink; refusing to use it")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePathError(f"{folder} is not a folder")
    if info.st_uid != uid:
        raise UnsafePathError(f"{folder} belongs to uid {info.st_uid}, not to this user (uid {uid})")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(folder, PRIVATE_FOLDER_MODE, follow_symlinks=False)
    return folder


def _check_ancestor(folder: Path, uid: int) -> None:
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return  # not there yet: created below as ours
    except OSError as exc:
        raise UnsafePathError(f"cannot check {folder}: {exc.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        try:
            info = os.stat(folder)  # a symlinked system folder (/var/run -> /run) is fine when its target is
        except OSError as exc:
            raise UnsafePathError(f"cannot check {folder}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):  # XDG_STATE_HOME=/etc/passwd: nothing below it can exist
        raise UnsafePathError(f"{folder} is not a folder")
    if info.st_uid not in (uid, 0):
        raise UnsafePathError(f"{folder} belongs to uid {info.st_uid}: another user could swap what is below it")
    mode = stat.S_IMODE(info.st_mode)
    if mode & _OTHERS_WRITE and not (mode & stat.S_ISVTX and info.st_uid == 0):
        raise UnsafePathError(f"{folder} is writable by others (mode {mode:04o}): another user could swap what is below it")


def _first_file_on_the_way(path: str) -> str:
    """The first of ``path``'s folders that is something else (XDG_STATE_HOME=/etc/passwd)."""
    for ancestor in reversed(Path(os.path.abspath(path)).parents):
        with contextlib.suppress(OSError):
            if not stat.S_ISDIR(os.stat(ancestor).st_mode):
                return str(ancestor)
    return os.path.dirname(path)


def open_private(path: str | os.PathLike[str], flags: int = os.O_RDONLY, *, create: bool = False) -> int:
    """A descriptor of ``path``, a regular file of this user's, opened without following a symlink
    and without blocking on a FIFO; with ``create``, made 0600 when missing.

    Raises FileNotFoundError when it is missing (and not created), UnsafePathError when it is a
    symlink, not a regular file, or another user's.
    """
    name = os.fspath(path)
    try:
        seen = os.lstat(name)
    except FileNotFoundError:
        if not create:
            raise
    except NotADirectoryError:
        raise UnsafePathError(f"{_first_file_on_the_way(name)} is not a folder") from None
    else:  # refused before anything opens it: a FIFO or a device is never opened at all
        if stat.S_ISLNK(seen.st_mode):
            raise UnsafePathError(f"{name} is a symlink; refusing to open it")
        if not stat.S_ISREG(seen.st_mode):
            raise UnsafePathError(f"{name} is not a regular file")
    open_flags = flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    try:
        fd = os.open(name, open_flags, PRIVATE_FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(f"{name} is a symlink; refusing to open it") from None
        if exc.errno == errno.ENXIO:  # O_NONBLOCK write-open of a FIFO nobody reads
            raise UnsafePathError(f"{name} is not a regular file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(f"{name} is not a regular file")
        if info.st_uid != os.getuid():
            raise UnsafePathError(f"{name} belongs to uid {info.st_uid}, not to this user")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_private(path: str | os.PathLike[str], max_bytes: int) -> bytes | None:
    """At most ``max_bytes`` of ``path``, a regular file of this user's in a folder only this user
    controls (``private_folder``: never a symlinked one, as the writers refuse it too), opened as
    ``open_private`` opens it; None when it or its folder is missing. UnsafePathError or OSError as
    those two raise them."""
    private_folder(os.path.dirname(os.path.abspath(os.fspath(path))), create=False, missing_ok=True)
    try:
        fd = open_private(path)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, max_bytes)
    finally:
        os.close(fd)


@contextlib.contextmanager
def private_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive flock on ``path``, a private lock file (made 0600 when missing, opened as
    ``open_private`` opens), for the block.

    Raises UnsafePathError when ``path`` is a symlink, not a regular file, another user's, or
    cannot be opened.
    """
    try:
        fd = open_private(path, os.O_RDWR, create=True)
    except UnsafePathError:
        raise
    except OSError as exc:
        raise UnsafePathError(f"cannot lock {os.fspath(path)}: {exc.strerror}") from None
    with held_lock(fd):
        yield
