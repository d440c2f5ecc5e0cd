"""Opening a root's folders and files by fd: each folder relative to the one above it, never through a symlink.

What MemoryRoot and both sidecars (the enrichment sidecar, the learned log) open their files with.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence

from memory_store._errors import MemoryNotFoundError, MemoryPathError, MemoryStoreError
from memory_store._scan import Root, open_beneath, open_root

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OWN_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC

SidecarProblem = tuple[int, str]  # (line number, or 0 for the whole file; one-line reason)


@contextlib.contextmanager
def opened_root(root: Root) -> Iterator[int]:
    """The root folder open for the block; MemoryNotFoundError when it is gone."""
    try:
        fd = open_root(root)
    except FileNotFoundError:
        raise MemoryNotFoundError(f"memory root does not exist: {root.path}") from None
    except OSError as exc:
        raise MemoryStoreError(f"cannot open the memory root {root.path}: {exc.strerror}") from None
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def opened_folder(root_fd: int, parts: Sequence[str], ref: str, *, create: bool, writing: bool = False) -> Iterator[int]:
    """The folder ``parts`` below the root, opened one component at a time; none may be a symlink.
    ``writing``: the root and every folder on the way must belong to this user (``_check_own_folder``)."""
    fd = os.dup(root_fd)
    try:
        if writing:
            _check_own_folder(fd, "the root", ref)
        for depth, part in enumerate(parts, 1):
            folder = "/".join(parts[:depth])
            nxt = _enter(fd, part, folder, ref, create)
            os.close(fd)
            fd = nxt
            if writing:
                _check_own_folder(fd, folder, ref)
        yield fd
    finally:
        os.close(fd)


def _check_own_folder(fd: int, folder: str, ref: str) -> None:
    """Refuse to write ``ref`` when the open folder ``fd`` on its way belongs to another user
    (MemoryPathError): they could read what is written there, and swap what is below it."""
    if (owner := _foreign_owner(fd)) is not None:
        raise MemoryPathError(
            f"refused {ref}: {folder} belongs to uid {owner}, not to this user, and nothing is written in another user's folder"
        )


def _foreign_owner(fd: int) -> int | None:
    """The uid owning the open folder ``fd`` when it is not this user (the one whose files we write)."""
    owner = os.fstat(fd).st_uid
    return None if owner == os.geteuid() else owner


def _enter(fd: int, part: str, folder: str, ref: str, create: bool) -> int:
    """Open the folder ``part`` in ``fd`` without following a symlink (made first when missing and ``create``)."""
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if not (create and isinstance(exc, FileNotFoundError)):
            raise _unreachable(fd, part, folder, ref, exc) from None
    try:
        os.mkdir(part, dir_fd=fd)
    except FileExistsError:
        pass  # made meanwhile: opened below like any folder
    except OSError as exc:
        raise MemoryStoreError(f"cannot write {ref}: cannot create {folder}: {exc.strerror}") from None
    try:
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        raise _unreachable(fd, part, folder, ref, exc) from None


def _unreachable(fd: int, part: str, folder: str, ref: str, exc: OSError) -> MemoryStoreError:
    """Why the folder ``part`` on the way to ``ref`` could not be entered."""
    if isinstance(exc, FileNotFoundError):
        return MemoryNotFoundError(f"no memory file {ref}")
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        try:
            is_link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        what = "a symlink" if is_link else "not a folder"
        return MemoryPathError(f"refused {ref}: {folder} is {what}, and nothing is read or written through one")
    return MemoryStoreError(f"cannot reach {ref}: {folder}: {exc.strerror}")


def kind_at(folder_fd: int, name: str) -> str:
    """What is at ``name`` in an open folder: "missing", "symlink", "folder", "file" or "other"."""
    try:
        info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "other"
    if stat.S_ISLNK(info.st_mode):
        return "symlink"
    return "folder" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"


def open_own_file(root: Root, rel: str) -> int | None:
    """The root's own file at ``rel`` (a sidecar) opened for reading from the root, no symlink
    followed; None when the root is gone."""
    try:
        root_fd = open_root(root)
    except OSError:
        return None
    try:
        return open_beneath(root_fd, rel, _OWN_FILE_FLAGS)
    finally:
        os.close(root_fd)


def own_file_refusal(root: Root, rel: str, what: str, subject: str, *, writing: bool) -> tuple[str, str] | None:
    """Where and why the file ``rel`` in the root's sidecar folder (``what`` names it, ``subject`` what
    it keeps) can be neither read nor written, as (path relative to the root, one-line reason)."""
    folder, _, name = rel.rpartition("/")
    try:
        root_fd = open_root(root)
    except OSError:
        return None  # no root, so no sidecar; the root's own error says so
    try:
        if writing and (owner := _foreign_owner(root_fd)) is not None:
            return folder, f"the root belongs to uid {owner}, not to this user, and nothing is written in another user's folder"
        kind = kind_at(root_fd, folder)
        if kind == "symlink":
            return folder, f"the sidecar folder is a symlink; {subject} is never read or written through one"
        if kind not in ("missing", "folder"):
            return folder, "the sidecar folder is not a folder"
        if kind == "missing":
            return None
        try:
            folder_fd = os.open(folder, _DIR_FLAGS, dir_fd=root_fd)
        except OSError:
            return None  # swapped meanwhile, or unreadable: reading and writing report it
        try:
            if writing and (owner := _foreign_owner(folder_fd)) is not None:
                return folder, f"the sidecar folder belongs to uid {owner}, not to this user, and nothing is written in another user's folder"
            for file, about in [(name, what), *([(name + ".lock", f"{what}'s lock")] if writing else [])]:
                kind = kind_at(folder_fd, file)
                if kind == "symlink":
                    return f"{folder}/{file}", f"{about} is a symlink; symlinks are not followed"
                if kind not in ("missing", "file"):
                    return f"{folder}/{file}", f"{about} is not a regular file"
        finally:
            os.close(folder_fd)
    finally:
        os.close(root_fd)
    return None


def read_bounded_fd(fd: int, limit: int) -> bytes | SidecarProblem:
    """The bytes of the regular file open at ``fd``, or the whole-file problem when it is not one or
    is over ``limit`` bytes (never more than ``limit`` + 1 bytes read). Raises OSError."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        return (0, "not a regular file")
    if info.st_size > limit:
        return (0, f"file is {info.st_size} bytes, over the {limit}-byte limit")
    chunks: list[bytes] = []
    remaining = limit + 1
    while remaining > 0 and (chunk := os.read(fd, min(remaining, 1 << 20))):
        chunks.append(chunk)
        remaining -= len(chunk)
    if remaining <= 0:
        return (0, f"file is over the {limit}-byte limit")
    return b"".join(chunks)


def open_current(folder_fd: int, name: str, *, follow: bool, where: str) -> int | None:
    """``name`` in an open folder opened for reading (never blocking on a FIFO), or None when it is
    missing; without ``follow`` a symlink there is refused (MemoryPathError). One that cannot be opened
    (EACCES, EIO) is MemoryStoreError: a writer that took it for missing would replace every entry it holds."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        return os.open(name, flags, dir_fd=folder_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise MemoryPathError(f"refused {where}: it is a symlink; symlinks are not followed") from None
        raise not_updated(where, f"unreadable ({exc.strerror})") from None


def not_updated(where: str, why: str) -> MemoryStoreError:
    """The error of a writer that cannot read the whole file it would replace (``why``): its entries would be lost."""
    return MemoryStoreError(f"{where} is not updated: {why}; its entries would be lost (nothing written)")
