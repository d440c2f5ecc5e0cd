"""Listing memory files under a root and reading each one defensively.

Listing and reading are two steps on purpose: a file may vanish, change type or
lose its permissions between them, and each of those is reported, not raised.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Union

from memory_store._parse import parse_memory
from memory_store._types import INDEX_FILE_NAME, LoadError, MemoryDoc
from memory_store._errors import MemoryParseError

Entry = Union[MemoryDoc, LoadError]

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # O_NONBLOCK: a FIFO must not hang us


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


@dataclass(frozen=True, slots=True)
class Candidate:
    """A listed file that looks like a memory; ``kind`` is what the listing saw."""

    rel: str
    abspath: str
    kind: str  # "file" | "symlink" | "other"


def is_memory_name(name: str) -> bool:
    """A memory is a visible ``*.md`` file other than the folder's MEMORY.md index."""
    return name.lower().endswith(".md") and not name.startswith(".") and name != INDEX_FILE_NAME


def is_hidden(rel: str) -> bool:
    """True when any component of the relative path is hidden (``.git``, editor temp files)."""
    return any(part.startswith(".") for part in rel.split("/"))


def list_candidates(root: Root, under: str = "") -> tuple[list[Candidate], list[LoadError]]:
    """List memory-file candidates below ``root``/``under``; folders that cannot be listed are errors.

    Hidden entries are skipped. Symlinked folders are not followed (a watcher
    could not follow them either); one pointing outside the root is reported.
    """
    candidates: list[Candidate] = []
    errors: list[LoadError] = []
    root_real = os.path.realpath(root.path)
    stack = [(root.abspath(under), under)]
    while stack:
        folder, folder_rel = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith("."):
                        continue
                    rel = f"{folder_rel}/{name}" if folder_rel else name
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((entry.path, rel))
                    elif entry.is_symlink():
                        if is_memory_name(name):
                            candidates.append(Candidate(rel, entry.path, "symlink"))
                        elif (err := symlinked_folder_error(root, rel, entry.path, root_real)) is not None:
                            errors.append(err)
                    elif is_memory_name(name):
                        kind = "file" if entry.is_file(follow_symlinks=False) else "other"
                        candidates.append(Candidate(rel, entry.path, kind))
        except FileNotFoundError:
            continue  # removed while we walked; the watcher reports the deletion
        except NotADirectoryError:
            continue
        except PermissionError:
            errors.append(LoadError(root.label, folder_rel or ".", "unreadable folder: permission denied"))
        except OSError as exc:
            errors.append(LoadError(root.label, folder_rel or ".", f"unreadable folder: {exc.strerror}"))
    return candidates, errors


def read_candidate(root: Root, cand: Candidate, max_bytes: int, root_real: str | None = None) -> Entry:
    """Read and parse one listed file; every failure becomes a LoadError with a one-line reason."""
    try:
        doc_or_reason = _read(root, cand, max_bytes, root_real or os.path.realpath(root.path))
    except MemoryParseError as exc:
        return LoadError(root.label, cand.rel, str(exc))
    return doc_or_reason


def symlinked_folder_error(root: Root, rel: str, abspath: str, root_real: str) -> LoadError | None:
    """A symlink that is not a memory file matters only when it is a folder leading out of the root."""
    if os.path.isdir(abspath) and not _inside(os.path.realpath(abspath), root_real):
        return LoadError(root.label, rel, "symlinked folder points outside the root")
    return None


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)


def _read(root: Root, cand: Candidate, max_bytes: int, root_real: str) -> Entry:
    if cand.kind == "other":
        return LoadError(root.label, cand.rel, "not a regular file")
    target, flags = cand.abspath, _OPEN_FLAGS | os.O_NOFOLLOW
    if cand.kind == "symlink":
        try:
            target = os.path.realpath(cand.abspath, strict=True)
        except FileNotFoundError:
            return LoadError(root.label, cand.rel, "broken symlink: its target does not exist")
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return LoadError(root.label, cand.rel, "symlink loop")
            return LoadError(root.label, cand.rel, f"unreadable symlink: {exc.strerror}")
        if not _inside(target, root_real):
            return LoadError(root.label, cand.rel, "symlink points outside the root")
    try:
        fd = os.open(target, flags)
    except FileNotFoundError:
        return LoadError(root.label, cand.rel, "file vanished before it could be read")
    except PermissionError:
        return LoadError(root.label, cand.rel, "unreadable: permission denied")
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink that replaced the listed file
            return LoadError(root.label, cand.rel, "file was replaced by a symlink while being read")
        return LoadError(root.label, cand.rel, f"unreadable: {exc.strerror}")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return LoadError(root.label, cand.rel, "not a regular file")
        if info.st_size > max_bytes:
            return LoadError(root.label, cand.rel, f"file is {info.st_size} bytes, over the {max_bytes}-byte limit")
        data = _read_all(fd, max_bytes + 1)
    except OSError as exc:
        return LoadError(root.label, cand.rel, f"unreadable: {exc.strerror}")
    finally:
        os.close(fd)
    return parse_memory(
        data, scope=root.label, path=cand.rel, abspath=cand.abspath, mtime=info.st_mtime, max_bytes=max_bytes
    )


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
