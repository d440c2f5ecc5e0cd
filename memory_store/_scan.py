"""Walking a root and reading each memory file defensively, without ever following a symlinked folder.

Every open below a root is relative to an already open folder and refuses symlinks
(``O_NOFOLLOW``), so a folder swapped for a symlink between a listing and a read can
never make a file outside the root be read. A file, folder or permission changing
under the walk is reported, not raised.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Callable, Union

from memory_store._errors import MemoryNotFoundError, MemoryParseError, MemoryPathError, MemoryStoreError
from memory_store._parse import parse_memory
from memory_store._types import INDEX_FILE_NAME, DeferredDoc, Listing, SkippedFile, MemoryDoc, StoredDoc

Read = Union[MemoryDoc, SkippedFile]  # what reading one file gives
Entry = Union[StoredDoc, SkippedFile]  # ... or a caller's cache stood in for reading it

# (abspath, lstat) of a listed regular file -> a doc parsed from it before, or None to read it.
Reuse = Callable[[str, os.stat_result], Union[StoredDoc, None]]

# Folders deeper than this below a root are reported and never entered, by the scan or the watcher:
# memories sit a few levels down, and a 1,100-level tree cost an fd per level and broke watching.
MAX_FOLDER_DEPTH = 64
# The most files and folders a bounded store (``MemoryStore.open(max_entries=...)``: the daemon's, for any
# client) reads and watches in one root set: five times the largest store the benchmarks run (10,000 memories).
MAX_ROOT_ENTRIES = 50_000
_log = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # O_NONBLOCK: a FIFO must not hang us
_SWAPPED = (errno.ELOOP, errno.ENOTDIR)  # what O_NOFOLLOW / O_DIRECTORY say when a path became a symlink or file


@dataclass(frozen=True, slots=True)
class Root:
    """One watched folder: its scope label and its absolute path (as given, not resolved)."""

    label: str
    path: str

    def rel(self, abspath: str) -> str | None:
        """The POSIX path of ``abspath`` relative to this root, or None when it lies outside."""
        if abspath == self.path:
            return ""
        prefix = self.path if self.path.endswith(os.sep) else self.path + os.sep
        if not abspath.startswith(prefix):
            return None
        return abspath[len(prefix) :].replace(os.sep, "/")

    def abspath(self, rel: str) -> str:
        return os.path.join(self.path, *rel.split("/")) if rel else self.path

    def memory_gone(self, rel: str) -> bool:
        """Whether nothing is at the memory path ``rel``: what a prune of a sidecar or the learned file asks
        before it forgets, so a memory that is there but not listed now (a YAML typo, a NUL byte mid-write,
        too big) keeps its enrichment and what it learned."""
        try:
            os.lstat(self.abspath(rel))
        except (FileNotFoundError, NotADirectoryError):
            return True
        except (OSError, ValueError):
            return False  # a folder that cannot be searched now (EACCES, EIO): the file may well be there
        return False


@dataclass(frozen=True, slots=True)
class Candidate:
    """A path that looks like a memory; ``kind`` is what a listing saw there."""

    rel: str
    abspath: str
    kind: str  # "file" | "symlink" | "other"


def is_memory_name(name: str) -> bool:
    """A memory is a visible ``*.md`` file other than the folder's MEMORY.md index."""
    return name.lower().endswith(".md") and not name.startswith(".") and name != INDEX_FILE_NAME


def is_hidden(rel: str) -> bool:
    """True when any component of the relative path is hidden (``.git``, editor temp files)."""
    return any(part.startswith(".") for part in rel.split("/"))


def folder_depth(rel: str) -> int:
    """How many folders below the root ``rel`` (a folder's path relative to it) is; the root is 0."""
    return rel.count("/") + 1 if rel else 0


def too_deep(root: Root, rel: str) -> SkippedFile:
    """The report for a folder the store does not enter."""
    return SkippedFile(root.label, rel, f"folder nested more than {MAX_FOLDER_DEPTH} levels deep: not read")


def shallow_part(rel: str) -> str:
    """``rel`` cut to the first folder on it that is too deep to enter (``rel`` itself when none is)."""
    parts = rel.split("/")
    return "/".join(parts[: MAX_FOLDER_DEPTH + 1]) if len(parts) > MAX_FOLDER_DEPTH else rel


def open_root(root: Root) -> int:
    """Open the root folder itself; a symlinked root is followed on purpose (the user named it)."""
    return os.open(root.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def open_beneath(dir_fd: int, rel: str, final_flags: int = _DIR_FLAGS) -> int:
    """Open ``rel`` below ``dir_fd`` one component at a time, refusing every symlink on the way."""
    parts = [part for part in rel.split("/") if part]
    if not parts:
        return os.dup(dir_fd)
    fd = dir_fd
    try:
        for part in parts[:-1]:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            if fd != dir_fd:
                os.close(fd)
            fd = nxt
        return os.open(parts[-1], final_flags | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        if fd != dir_fd:
            os.close(fd)


class _OverBound(Exception):
    """The walk listed more visible files and folders than its bound allows."""


class _Budget:
    """How many more visible files and folders a bounded walk may list (None: no bound)."""

    def __init__(self, max_entries: int | None) -> None:
        self.left = max_entries

    def take(self, count: int) -> None:
        if self.left is not None:
            self.left -= count
            if self.left < 0:
                raise _OverBound


def walk(
    root: Root, root_fd: int, under: str, max_bytes: int, reuse: Reuse | None = None, max_entries: int | None = None
) -> tuple[dict[str, Entry], set[str]]:
    """Read every memory below ``under`` (a folder already checked to be one): (rel -> entry, rels read via a symlink).

    Hidden entries are skipped. Symlinked folders are never followed; one
    pointing outside the root is reported. A folder that cannot be listed is an error, and so is
    one more than MAX_FOLDER_DEPTH levels below the root (it is not entered).
    ``reuse(abspath, lstat)`` may stand in for reading a regular file (a caller's cache).
    With ``max_entries``, a walk that lists more visible files and folders than that stops, and its
    whole result is the one error that says so (``bound_error``): each folder is counted as it is
    listed, before any file in it is read, so the bound costs no walk of its own.
    """
    found: dict[str, Entry] = {}
    links: set[str] = set()
    root_real = os.path.realpath(root.path)
    if folder_depth(under) > MAX_FOLDER_DEPTH:
        found[under] = too_deep(root, under)
        return found, links
    reread = _Reread(root, max_bytes) if reuse is not None else None
    try:
        start = open_beneath(root_fd, under)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, *_SWAPPED):
            found[under or "."] = _folder_error(root, under, exc)
        return found, links  # gone or swapped: the watcher's event for it settles the path
    stack: list[tuple[int, str, list[str]]] = []
    fd, folder_rel = start, under
    budget = _Budget(max_entries)
    while True:
        try:
            subfolders = _read_folder(root, root_fd, fd, folder_rel, max_bytes, root_real, found, links, reuse, reread, budget)
        except _OverBound:
            os.close(fd)
            for parent_fd, *_ in stack:
                os.close(parent_fd)
            assert max_entries is not None
            return {under or ".": bound_error(root.label, max_entries)}, set()  # whatever was read of it goes
        stack.append((fd, folder_rel, subfolders))
        fd = -1
        while stack and fd == -1:
            parent_fd, parent_rel, pending = stack[-1]
            if not pending:
                os.close(parent_fd)
                stack.pop()
                continue
            name = pending.pop()
            folder_rel = f"{parent_rel}/{name}" if parent_rel else name
            if folder_depth(folder_rel) > MAX_FOLDER_DEPTH:
                found[folder_rel] = too_deep(root, folder_rel)
                continue
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, *_SWAPPED):
                    found[folder_rel] = _folder_error(root, folder_rel, exc)
        if fd == -1:
            return dict(sorted(found.items())), links  # a stable doc order for a given tree


def _read_folder(
    root: Root,
    root_fd: int,
    fd: int,
    folder_rel: str,
    max_bytes: int,
    root_real: str,
    found: dict[str, Entry],
    links: set[str],
    reuse: Reuse | None = None,
    reread: _Reread | None = None,
    budget: _Budget | None = None,
) -> list[str]:
    """Read the memories directly in one open folder; return its visible subfolders' names. Its visible
    entries are taken from ``budget`` before any is read (_OverBound when they are too many)."""
    subfolders: list[str] = []
    try:
        with os.scandir(fd) as entries:
            listed = [(e.name, e.is_dir(follow_symlinks=False), e.is_symlink()) for e in entries]
    except OSError as exc:
        found[folder_rel or "."] = _folder_error(root, folder_rel, exc)
        return subfolders
    if budget is not None:
        budget.take(sum(1 for name, *_ in listed if not name.startswith(".")))
    folder_prefix = os.path.join(root.abspath(folder_rel), "")  # abspaths for reuse, joined once per folder
    for name, is_dir, is_link in listed:
        if name.startswith("."):
            continue
        rel = f"{folder_rel}/{name}" if folder_rel else name
        if is_dir:
            subfolders.append(name)
        elif is_link and not is_memory_name(name):
            if (err := symlinked_folder_error(root, rel, root_real)) is not None:
                found[rel] = err
        elif is_memory_name(name):
            if reuse is not None and not is_link and (doc := _reused(fd, name, folder_prefix, reuse)) is not None:
                if reread is not None and isinstance(doc, DeferredDoc):
                    doc._listed(Listing(root.label, rel, folder_prefix + name, reread))
                found[rel] = doc
                continue
            found[rel] = read_at(root, root_fd, fd, rel, "symlink" if is_link else "file", max_bytes, root_real)
            if is_link:
                links.add(rel)
    return subfolders


def _reused(fd: int, name: str, folder_prefix: str, reuse: Reuse) -> StoredDoc | None:
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return None  # reading it reports the problem
    if not stat.S_ISREG(info.st_mode):
        return None
    return reuse(folder_prefix + name, info)


class _Reread:
    """The store's own read of a file whose cached doc turned out unusable (see DeferredDoc)."""

    def __init__(self, root: Root, max_bytes: int) -> None:
        self._root = root
        self._max_bytes = max_bytes

    def __call__(self, rel: str, problem: str) -> MemoryDoc:
        ref = f"{self._root.label}/{rel}"
        _log.warning("memory store: the cached copy of %s is unusable (%s); reading the file again", ref, problem)
        read = read_candidate(self._root, Candidate(rel, self._root.abspath(rel), "file"), self._max_bytes)
        if isinstance(read, MemoryDoc):
            return read
        # Listed as a memory, so it must stay one until the watcher or the next scan sees what it is now.
        _log.warning("memory store: %s cannot be read again either: %s", ref, read.reason)
        return MemoryDoc(
            scope=self._root.label, path=rel, abspath=Path(self._root.abspath(rel)), name=PurePosixPath(rel).stem,
            description=f"unreadable: {read.reason}", type="reference", keywords=(), extra=MappingProxyType({}),
            body="", mtime=0.0, size=0, content_hash="",
        )


def read_candidate(root: Root, cand: Candidate, max_bytes: int) -> Read:
    """Read one path reported by the watcher; its folders are walked from the root without following symlinks."""
    try:
        root_fd = open_root(root)
    except OSError as exc:
        return SkippedFile(root.label, cand.rel, f"unreadable: {exc.strerror}")
    try:
        parent_rel = cand.rel.rpartition("/")[0]
        try:
            parent_fd = open_beneath(root_fd, parent_rel)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return SkippedFile(root.label, cand.rel, "file vanished before it could be read")
            if exc.errno in _SWAPPED:
                return SkippedFile(root.label, cand.rel, "a folder on its path was replaced by a symlink")
            return SkippedFile(root.label, cand.rel, f"unreadable: {exc.strerror}")
        try:
            return read_at(root, root_fd, parent_fd, cand.rel, cand.kind, max_bytes, os.path.realpath(root.path))
        finally:
            os.close(parent_fd)
    finally:
        os.close(root_fd)


def read_at(root: Root, root_fd: int, parent_fd: int, rel: str, kind: str, max_bytes: int, root_real: str) -> Read:
    """Read and parse one listed file in its open parent folder; every failure becomes a SkippedFile."""
    try:
        return _read(root, root_fd, parent_fd, rel, kind, max_bytes, root_real)
    except MemoryParseError as exc:
        return SkippedFile(root.label, rel, str(exc))
    except Exception as exc:  # one file must never stop a scan or the watcher, whatever it holds
        return SkippedFile(root.label, rel, f"unreadable: {type(exc).__name__}")


def symlinked_folder_error(root: Root, rel: str, root_real: str) -> SkippedFile | None:
    """A symlink that is not a memory file matters only when it is a folder leading out of the root.

    Only stat and realpath look through it, to word the report; nothing is read there.
    """
    abspath = root.abspath(rel)
    if os.path.isdir(abspath) and not _inside(os.path.realpath(abspath), root_real):
        return SkippedFile(root.label, rel, "symlinked folder points outside the root")
    return None


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def _folder_error(root: Root, rel: str, exc: OSError) -> SkippedFile:
    reason = "permission denied" if isinstance(exc, PermissionError) else exc.strerror
    return SkippedFile(root.label, rel or ".", f"unreadable folder: {reason}")


def _read(root: Root, root_fd: int, parent_fd: int, rel: str, kind: str, max_bytes: int, root_real: str) -> Read:
    try:
        data, info = read_listed(root, root_fd, parent_fd, rel, kind, max_bytes, root_real)
    except MemoryStoreError as exc:
        return SkippedFile(root.label, rel, str(exc))
    abspath = root.abspath(rel)
    return parse_memory(data, scope=root.label, path=rel, abspath=abspath, mtime=info.st_mtime, max_bytes=max_bytes)


def read_listed(
    root: Root, root_fd: int, parent_fd: int, rel: str, kind: str, max_bytes: int, root_real: str
) -> tuple[bytes, os.stat_result]:
    """The bytes (at most ``max_bytes``) and stat of one memory file seen as ``kind`` in its open parent folder.

    A symlink is read only when its target is a file inside the root; anything else that is not a
    regular file is never opened. Raises, with the one-line reason as the message:
    MemoryNotFoundError (it vanished), MemoryPathError (refused) or MemoryStoreError (unreadable, too big).
    """
    if kind == "other":
        raise MemoryPathError("not a regular file")
    try:
        if kind == "symlink":
            fd = open_beneath(root_fd, link_target(root, rel, root_real), _FILE_FLAGS)
        else:
            fd = os.open(rel.rpartition("/")[2], _FILE_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        raise MemoryNotFoundError("file vanished before it could be read") from None
    except PermissionError:
        raise MemoryStoreError("unreadable: permission denied") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink that replaced the listed file
            raise MemoryPathError("file was replaced by a symlink while being read") from None
        raise MemoryStoreError(f"unreadable: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise MemoryPathError("not a regular file")
        if info.st_size > max_bytes:
            raise MemoryStoreError(f"file is {info.st_size} bytes, over the {max_bytes}-byte limit")
        data = _read_all(fd, max_bytes + 1)
    except OSError as exc:
        raise MemoryStoreError(f"unreadable: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew after the fstat
        raise MemoryStoreError(f"file is {len(data)} bytes, over the {max_bytes}-byte limit")
    return data, info


def link_target(root: Root, rel: str, root_real: str) -> str:
    """Where the symlinked memory ``rel`` leads, relative to the root; MemoryPathError unless it is inside.

    Only realpath looks through the link; the target is then opened from the root without symlinks.
    """
    try:
        target = os.path.realpath(root.abspath(rel), strict=True)
    except FileNotFoundError:
        raise MemoryPathError("broken symlink: its target does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise MemoryPathError("symlink loop") from None
        raise MemoryStoreError(f"unreadable symlink: {exc.strerror}") from None
    if target == root_real:
        raise MemoryPathError("not a regular file")
    if not _inside(target, root_real):
        raise MemoryPathError("symlink points outside the root")
    return os.path.relpath(target, root_real).replace(os.sep, "/")


def _read_all(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def count_entries(root: str, limit: int) -> int:
    """The visible files and folders below ``root``, counted until ``limit`` is reached (then ``limit``):
    hidden entries skipped and symlinked folders not followed, as the walk does."""
    count = 0
    pending = [root]
    while pending:
        try:
            with os.scandir(pending.pop()) as listing:
                for entry in listing:
                    if entry.name.startswith("."):
                        continue  # the store skips hidden entries (.git, editor files)
                    count += 1
                    if count >= limit:
                        return limit
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                    except OSError:
                        continue
        except OSError:
            continue  # a folder that cannot be listed holds nothing the store would read either
    return count


def over_bound(root: str, max_entries: int | None) -> bool:
    """Whether the folder ``root`` holds more than ``max_entries`` visible files and folders (None: no bound)."""
    return max_entries is not None and count_entries(root, max_entries + 1) > max_entries


def bound_error(label: str, max_entries: int) -> SkippedFile:
    """What a snapshot says of a root over the bound: it is neither read nor watched."""
    return SkippedFile(
        label, ".", f"more than {max_entries:,} files and folders, more than a folder of memories would; "
        "not read or watched (name the memory folder itself)"
    )
