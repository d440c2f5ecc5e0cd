"""A root's ``MEMORY.md`` index files: found, read and replaced through fd-relative opens, never
through a symlink, and never another user's.

The agents load a folder's ``MEMORY.md`` into their context; the store never reads it as a memory
(``INDEX_FILE_NAME``). ``recall-kit doctor`` reads each one to compare it with the memories, and
``doctor --fix`` replaces one with a mended copy: only when its bytes are still those it was mended
from, after a backup in the root's ``.recall-kit/index-backups`` (kept out of git), atomically.
The walk enters the folders the scan enters: not hidden ones, not symlinked ones, not deeper than
``MAX_FOLDER_DEPTH``.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from memory_store._errors import MemoryPathError, MemoryStoreError
from memory_store._fd import opened_folder, opened_root, read_bounded_fd
from memory_store._scan import MAX_FOLDER_DEPTH, Root, folder_depth, open_root
from memory_store._types import INDEX_FILE_NAME
from memory_store._write import file_lock, keep_out_of_git, write_in_folder

# An index the agents load is at most 25,000 characters (both clients cut it there); ten times more
# is no index anyone wrote, and is reported rather than read.
INDEX_MAX_BYTES = 256 * 1024
SIDECAR_FOLDER = ".recall-kit"
BACKUP_FOLDER = "index-backups"  # inside SIDECAR_FOLDER
MAX_BACKUPS = 20  # per index: the oldest beyond these go when a new one is kept
_LOCK_NAME = "index.lock"  # inside SIDECAR_FOLDER: serialises two mending runs, no agent takes it
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class IndexFile:
    """One ``MEMORY.md`` below a root: its path relative to the root, and its bytes, or why they
    were not read (a symlink, not a regular file, too big, unreadable), worded to follow "it is"."""

    rel: str
    data: bytes | None
    problem: str | None = None


def find_index_files(root: Root, max_bytes: int = INDEX_MAX_BYTES) -> list[IndexFile]:
    """Every ``MEMORY.md`` in the folders the scan enters, in path order, each read (at most
    ``max_bytes``) or refused with its reason. [] when the root cannot be opened."""
    try:
        root_fd = open_root(root)
    except OSError:
        return []
    found: list[IndexFile] = []
    pending: list[tuple[int, str]] = [(root_fd, "")]
    while pending:
        fd, folder = pending.pop()
        try:
            with os.scandir(fd) as entries:
                listed = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        except OSError:
            listed = []  # the scan reports a folder it cannot list
        for name, is_dir in listed:
            rel = f"{folder}/{name}" if folder else name
            if name.startswith("."):
                continue
            if is_dir:
                if folder_depth(rel) > MAX_FOLDER_DEPTH:
                    continue
                try:
                    pending.append((os.open(name, _DIR_FLAGS, dir_fd=fd), rel))
                except OSError:
                    continue  # swapped for a symlink, or gone: nothing the store reads either
            elif name == INDEX_FILE_NAME:
                found.append(_read_index(fd, rel, max_bytes))
        os.close(fd)
    return sorted(found, key=lambda f: f.rel)


def _read_index(folder_fd: int, rel: str, max_bytes: int) -> IndexFile:
    try:
        info = os.stat(INDEX_FILE_NAME, dir_fd=folder_fd, follow_symlinks=False)
    except OSError as exc:
        return IndexFile(rel, None, f"unreadable: {exc.strerror}")
    if stat.S_ISLNK(info.st_mode):
        return IndexFile(rel, None, "a symlink: not read (an agent may follow it; recall-kit never does)")
    if not stat.S_ISREG(info.st_mode):
        return IndexFile(rel, None, "not a regular file: not read")
    if info.st_size > max_bytes:
        return IndexFile(rel, None, f"{info.st_size:,} bytes, over the {max_bytes:,}-byte limit: not read")
    try:
        fd = os.open(INDEX_FILE_NAME, _READ_FLAGS, dir_fd=folder_fd)
    except OSError as exc:
        what = "replaced by a symlink while being read" if exc.errno == errno.ELOOP else f"unreadable: {exc.strerror}"
        return IndexFile(rel, None, what)
    try:
        read = read_bounded_fd(fd, max_bytes)
    except OSError as exc:
        return IndexFile(rel, None, f"unreadable: {exc.strerror}")
    finally:
        os.close(fd)
    if isinstance(read, tuple):  # swapped or grown since the stat
        return IndexFile(rel, None, f"changed while being read ({read[1]}): not read")
    return IndexFile(rel, read)


def replace_index(root: Root, rel: str, data: bytes, expected: bytes) -> Path:
    """Replace the index ``rel`` (a ``MEMORY.md`` below the root) with ``data``, atomically, when its
    bytes are still ``expected``; a copy of them is kept first in the root's sidecar folder. Returns
    the backup's path.

    MemoryPathError when the index or a folder on its way is a symlink or not what it must be, or
    belongs to another user; MemoryStoreError when its bytes changed since ``expected`` was read
    (nothing is written) or it cannot be written.
    """
    parts = rel.split("/")
    if parts[-1] != INDEX_FILE_NAME or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        raise MemoryPathError(f"refused {root.label}/{rel}: not an index file path")
    where = f"{root.label}/{rel}"
    with opened_root(root) as root_fd:
        with opened_folder(root_fd, [SIDECAR_FOLDER], where, create=True, writing=True) as sidecar_fd:
            keep_out_of_git(sidecar_fd)
            with (
                file_lock(_LOCK_NAME, dir_fd=sidecar_fd),
                opened_folder(root_fd, parts[:-1], where, create=False, writing=True) as folder_fd,
            ):
                info, current = _current(folder_fd, where)
                if current != expected:
                    raise MemoryStoreError(f"{where} changed since it was read; nothing written (run the command again)")
                backup = _backup(root, sidecar_fd, rel, current)
                try:
                    write_in_folder(folder_fd, INDEX_FILE_NAME, data, replace=True, mode=stat.S_IMODE(info.st_mode))
                except OSError as exc:
                    raise MemoryStoreError(f"cannot write {where}: {exc.strerror}") from None
    return backup


def _current(folder_fd: int, where: str) -> tuple[os.stat_result, bytes]:
    """The index's stat and bytes, read without following a symlink or blocking on a FIFO."""
    try:
        fd = os.open(INDEX_FILE_NAME, _READ_FLAGS, dir_fd=folder_fd)
    except FileNotFoundError:
        raise MemoryStoreError(f"{where} is gone; nothing written") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise MemoryPathError(f"refused {where}: it is a symlink, and nothing is written through one") from None
        raise MemoryStoreError(f"cannot read {where}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise MemoryPathError(f"refused {where}: it is not a regular file")
        if info.st_uid != os.geteuid():
            raise MemoryPathError(f"refused {where}: it belongs to uid {info.st_uid}, not to this user; it is not mended")
        read = read_bounded_fd(fd, INDEX_MAX_BYTES)
    except OSError as exc:
        raise MemoryStoreError(f"cannot read {where}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if isinstance(read, tuple):
        raise MemoryStoreError(f"cannot mend {where}: {read[1]}")
    return info, read


_BACKUP_NAME_BYTES = 200  # well inside a file name's 255 bytes, whatever the file system


def _backup_name(rel: str) -> str:
    """The name of an index's backup folder: ``rel`` with each ``/`` as ``__``, and a ``%`` or ``_`` of
    its own percent-encoded, so two indexes never share it (``a__b/MEMORY.md`` is
    ``a%5F%5Fb__MEMORY.md``, ``a/b/MEMORY.md`` is ``a__b__MEMORY.md``) and it reads back as the path.
    A name over ``_BACKUP_NAME_BYTES`` (a file name has at most 255 bytes) keeps its start and ends in
    ``%~`` and a hash of ``rel``: no encoded name holds ``%~``, so it is never another index's."""
    name = "__".join(part.replace("%", "%25").replace("_", "%5F") for part in rel.split("/"))
    if len(os.fsencode(name)) <= _BACKUP_NAME_BYTES:
        return name
    start = os.fsdecode(os.fsencode(name)[: _BACKUP_NAME_BYTES - 34])  # a character cut in two: its bytes, escaped
    return f"{start}%~{hashlib.sha256(os.fsencode(rel)).hexdigest()[:32]}"


def _backup(root: Root, sidecar_fd: int, rel: str, data: bytes) -> Path:
    """``data`` kept as ``.recall-kit/index-backups/<_backup_name(rel)>/<time>`` (0600), never replacing a
    file; a second one in the same second takes the next number after the last (``-1``, ``-2``), so
    names sort by age. A folder per index: keeping one lists only that index's backups, so mending
    10,000 indexes is not quadratic."""
    name = _backup_name(rel)
    where = f"{root.label}/{SIDECAR_FOLDER}/{BACKUP_FOLDER}/{name}"
    with opened_folder(sidecar_fd, [BACKUP_FOLDER, name], where, create=True) as fd:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        kept = _backups(fd)
        taken = [attempt for when, attempt, _entry in kept if when == stamp]
        first = max(taken) + 1 if taken else 0
        for attempt in range(first, first + 100):
            entry = stamp + (f"-{attempt}" if attempt else "")
            try:
                write_in_folder(fd, entry, data, replace=False, mode=0o600)
            except FileExistsError:
                continue
            except OSError as exc:
                raise MemoryStoreError(f"cannot keep a backup of {root.label}/{rel}: {exc.strerror}; nothing written") from None
            _prune(fd, sorted([*kept, (stamp, attempt, entry)]))
            return Path(root.abspath(f"{SIDECAR_FOLDER}/{BACKUP_FOLDER}/{name}/{entry}"))
    raise MemoryStoreError(f"cannot keep a backup of {root.label}/{rel}: too many backups this second")


_BACKUP_ENTRY = re.compile(r"(\d{8}T\d{6})(?:-(\d+))?")


def _backups(folder_fd: int) -> list[tuple[str, int, str]]:
    """The backups in one index's backup folder, oldest first: (time stamp, number, file name)."""
    try:
        listed = os.listdir(folder_fd)
    except OSError:
        return []
    return sorted((match.group(1), int(match.group(2) or 0), entry) for entry in listed if (match := _BACKUP_ENTRY.fullmatch(entry)))


def _prune(folder_fd: int, kept: list[tuple[str, int, str]]) -> None:
    """Remove the oldest of ``kept`` (one index's backups, oldest first) beyond MAX_BACKUPS."""
    for _stamp, _attempt, entry in kept[: max(0, len(kept) - MAX_BACKUPS)]:
        try:
            os.unlink(entry, dir_fd=folder_fd)
        except OSError:
            pass  # gone meanwhile, or not ours to remove: the next backup tries again
