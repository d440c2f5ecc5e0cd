"""The enrichment sidecar: model-written search terms per memory version, kept beside the memories, never in them.

One JSON object a line: ``{"path": <POSIX path relative to the root>, "sha256": <hex of
the memory file's bytes>, "keywords": [...], "usage_scenarios": [...]}``; other keys are
ignored. Every line is untrusted: it is validated and its terms cleaned (``_terms``) on the way
in and on the way out. ``Sidecar`` is where a root's sidecar is: its own, reached from the root
without following symlinks, or a file given from outside.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from memory_store._errors import MemoryPathError, MemoryStoreError
from memory_store._json import line_problem, parse_json
from memory_store._fd import (
    SidecarProblem,
    open_current,
    open_own_file,
    opened_folder,
    opened_root,
    own_file_refusal,
    read_bounded_fd,
    not_updated,
)
from memory_store._scan import Root
from memory_store._terms import clean_terms, valid_path
from memory_store._types import Enrichment
from memory_store._write import atomic_write, file_lock, keep_out_of_git, write_in_folder

SIDECAR_PATH = ".recall-kit/enrichment.jsonl"  # relative to a root; hidden, so never scanned as a memory
MAX_KEYWORDS = 32
MAX_KEYWORD_CHARS = 64
MAX_SCENARIOS = 8
MAX_SCENARIO_CHARS = 200
MAX_SIDECAR_BYTES = 64 * 1024 * 1024  # about 30,000 fully enriched memories
MAX_LINE_BYTES = 64 * 1024  # a full entry is under 4 KiB

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_SIDECAR_FOLDER, _, _SIDECAR_NAME = SIDECAR_PATH.rpartition("/")


@dataclass(frozen=True, slots=True)
class EnrichmentEntry:
    """One sidecar line: terms for the memory at ``path`` whose bytes hash to ``sha256``."""

    path: str
    sha256: str
    keywords: tuple[str, ...] = ()
    usage_scenarios: tuple[str, ...] = ()
    model: str | None = None  # who wrote it; informational

    @property
    def enrichment(self) -> Enrichment:
        """The entry's terms, as the Enrichment a doc carries."""
        return Enrichment(self.keywords, self.usage_scenarios)


def clean_entry(entry: EnrichmentEntry) -> EnrichmentEntry:
    """The entry with its terms cleaned; raises ValueError with a one-line reason when path or sha256 is invalid."""
    path = valid_path(entry.path)
    if not isinstance(entry.sha256, str) or not _HEX64.fullmatch(entry.sha256):
        raise ValueError("'sha256' must be 64 hex digits")
    model = clean_terms([entry.model], 1, MAX_KEYWORD_CHARS) if entry.model is not None else ()
    return EnrichmentEntry(
        path,
        entry.sha256.lower(),
        clean_terms(entry.keywords, MAX_KEYWORDS, MAX_KEYWORD_CHARS),
        clean_terms(entry.usage_scenarios, MAX_SCENARIOS, MAX_SCENARIO_CHARS),
        model[0] if model else None,
    )


Versions = dict[str, tuple[EnrichmentEntry, ...]]  # relative path -> its entries, one a file hash, oldest first


def parse_enrichment(data: bytes) -> tuple[dict[str, EnrichmentEntry], list[SidecarProblem]]:
    """Parse a sidecar's bytes: (relative path -> entry, problems). A bad line never hides the good ones;
    of several lines for one path, the last is the entry, and a problem names it when an earlier one
    was for other bytes (the store reads each, and keeps the one for the memory's bytes: a copy written
    back from this alone may lose that one; ``update_enrichment`` merges without loss)."""
    repeated: dict[str, int] = {}
    versions, problems = _parse_versions(data, repeated)
    for path, number in repeated.items():
        problems.append((number, f"an earlier line for {path!r} is for other bytes; only this last one is returned"))
    return latest(versions), sorted(problems)


def parse_versions(data: bytes) -> tuple[Versions, list[SidecarProblem]]:
    """Parse a sidecar's bytes, keeping every file hash a path has a line for (a later line for the same
    hash replaces it): two lines for one memory, say from a merge, leave the fresh one to be found
    whichever comes last."""
    return _parse_versions(data, None)


def _parse_versions(data: bytes, repeated: dict[str, int] | None) -> tuple[Versions, list[SidecarProblem]]:
    last: dict[str, EnrichmentEntry] = {}
    older: dict[str, dict[str, EnrichmentEntry]] = {}  # by hash, for the few paths with lines for other bytes
    problems: list[SidecarProblem] = []
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            problems.append((number, f"line is {len(line)} bytes, over the {MAX_LINE_BYTES}-byte limit"))
            continue
        try:
            entry = _entry(parse_json(line))
        except ValueError as exc:
            problems.append((number, line_problem(exc)))
            continue
        before = last.get(entry.path)
        if before is not None and before.sha256 != entry.sha256:
            hashes = older.setdefault(entry.path, {})
            hashes.pop(before.sha256, None)  # re-inserted last: the order is that of each hash's last line
            hashes[before.sha256] = before
            hashes.pop(entry.sha256, None)
            if repeated is not None:
                repeated[entry.path] = number
        last[entry.path] = entry
    versions: Versions = {path: (entry,) for path, entry in last.items()}
    for path, hashes in older.items():
        versions[path] = (*hashes.values(), last[path])
    return versions, problems


def latest(versions: Versions) -> dict[str, EnrichmentEntry]:
    """Relative path -> the entry of its last line."""
    return {path: entries[-1] for path, entries in versions.items()}


def entry_for(versions: tuple[EnrichmentEntry, ...], content_hash: str) -> EnrichmentEntry | None:
    """The entry written for the bytes that hash to ``content_hash``, or None: every other is stale."""
    return next((entry for entry in versions if entry.sha256 == content_hash), None)


def _entry(obj: Any) -> EnrichmentEntry:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    lists: dict[str, list[str]] = {}
    for key in ("keywords", "usage_scenarios"):
        value = obj.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"'{key}' must be a list of strings")
        lists[key] = value
    model = obj.get("model")
    return clean_entry(
        EnrichmentEntry(
            obj.get("path"),  # type: ignore[arg-type]
            obj.get("sha256"),  # type: ignore[arg-type]
            tuple(lists["keywords"]),
            tuple(lists["usage_scenarios"]),
            model if isinstance(model, str) else None,
        )
    )


def read_sidecar_fd(fd: int) -> tuple[Versions, list[SidecarProblem]]:
    """Read a sidecar from an open file descriptor, then close it; a read error is a whole-file problem."""
    return _read_fd(fd, parse_versions)


_Parsed = TypeVar("_Parsed", Versions, dict[str, EnrichmentEntry])


def _read_fd(fd: int, parse: Callable[[bytes], tuple[_Parsed, list[SidecarProblem]]]) -> tuple[_Parsed, list[SidecarProblem]]:
    try:
        data = read_bounded_fd(fd, MAX_SIDECAR_BYTES)
    except OSError as exc:
        return {}, [(0, f"unreadable: {exc.strerror}")]
    finally:
        os.close(fd)
    return ({}, [data]) if isinstance(data, tuple) else parse(data)


def read_enrichment(path: str | os.PathLike[str]) -> tuple[dict[str, EnrichmentEntry], list[SidecarProblem]]:
    """Read the sidecar at ``path``: (relative path -> entry, [(line, reason)]), as ``parse_enrichment``
    parses. A missing file is empty."""
    fd = _open_sidecar(path)
    return _read_fd(fd, parse_enrichment) if isinstance(fd, int) else ({}, fd)


def _read_versions(path: str | os.PathLike[str]) -> tuple[Versions, list[SidecarProblem]]:
    fd = _open_sidecar(path)
    return read_sidecar_fd(fd) if isinstance(fd, int) else ({}, fd)


def _open_sidecar(path: str | os.PathLike[str]) -> int | list[SidecarProblem]:
    """An open descriptor of the sidecar at ``path``, or its problems: none when it is missing."""
    try:
        return os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [(0, f"unreadable: {exc.strerror}")]


def sidecar_text(entries: Iterable[EnrichmentEntry], *, versions: bool = False) -> str:
    """A whole sidecar's text: one cleaned entry a line, sorted by path (a later entry for a path wins;
    with ``versions``, only one for the same path and hash: each hash keeps its line, in the given order).

    Raises MemoryStoreError when an entry's path or hash is invalid.
    """
    cleaned: dict[tuple[str, str], EnrichmentEntry] = {}
    for entry in entries:
        good = _checked(entry)
        key = (good.path, good.sha256 if versions else "")
        cleaned.pop(key, None)
        cleaned[key] = good
    lines = []
    for entry in sorted(cleaned.values(), key=lambda entry: entry.path):  # stable: a path's hashes keep their order
        obj: dict[str, Any] = {
            "path": entry.path,
            "sha256": entry.sha256,
            "keywords": list(entry.keywords),
            "usage_scenarios": list(entry.usage_scenarios),
        }
        if entry.model is not None:
            obj["model"] = entry.model
        lines.append(json.dumps(obj) + "\n")  # ASCII escapes: a path with undecodable bytes still round-trips
    return "".join(lines)


def _checked(entry: object) -> EnrichmentEntry:
    """``entry`` cleaned; MemoryStoreError in one line when it is no EnrichmentEntry or its path or hash is invalid."""
    if not isinstance(entry, EnrichmentEntry):
        raise MemoryStoreError(f"expected an EnrichmentEntry, got {type(entry).__name__}")
    try:
        return clean_entry(entry)
    except ValueError as exc:
        raise MemoryStoreError(f"invalid enrichment entry for {str(entry.path)[:200]!r}: {exc}") from None


def write_enrichment(path: str | os.PathLike[str], entries: Iterable[EnrichmentEntry]) -> Path:
    """Write the whole sidecar at ``path`` atomically, one cleaned entry a line, sorted by path.

    Creates the sidecar's folder when needed. Raises MemoryStoreError when an entry's
    path or hash is invalid or the file cannot be written; the old sidecar then stays.
    """
    text = sidecar_text(entries)
    target = _made_parent(path)
    _check_size(text, str(target))
    return atomic_write(target, text)


def _check_size(text: str, where: str) -> None:
    """MemoryStoreError when ``text`` (ASCII: ``sidecar_text`` escapes) is more than the reader reads:
    a sidecar written that size would read back as empty, and be replaced by the next update."""
    if len(text) > MAX_SIDECAR_BYTES:
        raise MemoryStoreError(f"cannot write {where}: it would be {len(text)} bytes, over the {MAX_SIDECAR_BYTES}-byte "
                               "limit a sidecar is read up to; nothing written")


def update_enrichment(
    path: str | os.PathLike[str],
    entries: Iterable[EnrichmentEntry],
    live_paths: Iterable[str] | None = None,
    *,
    gone: Callable[[str], bool] | None = None,
) -> Path:
    """Merge ``entries`` into the sidecar at ``path`` and write it atomically; with ``live_paths``
    (relative paths of the root's memories), drop the entries of memories that are gone: not in
    ``live_paths`` and, when ``gone`` is given, ``gone(path)`` too (a memory listed nowhere now but
    still on disk, say mid-write, keeps its entry).

    ``path`` is the caller's own: a symlink at it is read through, then replaced by the new file.
    """
    target = _made_parent(path)
    try:
        folder_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise MemoryStoreError(f"cannot write {target}: {exc.strerror}") from None
    try:
        update_in_folder(folder_fd, target.name, entries, live_paths, follow=True, where=str(target), gone=gone)
    finally:
        os.close(folder_fd)
    return target


def update_in_folder(
    folder_fd: int,
    name: str,
    entries: Iterable[EnrichmentEntry],
    live_paths: Iterable[str] | None,
    *,
    follow: bool,
    where: str,
    gone: Callable[[str], bool] | None = None,
) -> None:
    """The read-merge-write of the sidecar ``name`` in an open folder, under an flock on ``name.lock`` beside it.

    Writers of one sidecar (an `enrich` run, a long-lived store's background enrichment) take the lock,
    so neither loses the other's entries. Lines that were already corrupt are not carried over. Without
    ``follow``, a symlink at ``name`` is refused (MemoryPathError); the new file never goes through one.
    ``where`` names the sidecar in errors; ``gone`` as for ``update_enrichment``.
    """
    given = [_checked(entry) for entry in entries]  # before anything is read: a bad one is an error, never dropped by a prune
    with file_lock(name + ".lock", dir_fd=folder_fd):
        current, mode = _current(folder_fd, name, follow, where)
        for entry in given:
            current[entry.path] = (entry,)  # the entry for the memory's bytes now: every older one is stale
        every = [entry for versions in current.values() for entry in versions]
        kept = every if live_paths is None else prune_enrichment(every, live_paths, gone)
        text = sidecar_text(kept, versions=True)
        _check_size(text, where)
        try:
            write_in_folder(folder_fd, name, text.encode("utf-8"), replace=True, mode=mode)
        except OSError as exc:
            raise MemoryStoreError(f"cannot write {where}: {exc.strerror}") from None


def _current(folder_fd: int, name: str, follow: bool, where: str) -> tuple[Versions, int | None]:
    """The sidecar's entries as they stand, and its permission bits when it is a regular file."""
    fd = open_current(folder_fd, name, follow=follow, where=where)
    if fd is None:
        return {}, None
    try:
        info = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise not_updated(where, f"unreadable ({exc.strerror})") from None
    mode = stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else None
    entries, problems = read_sidecar_fd(fd)
    whole = [reason for line, reason in problems if line == 0]  # too big, unreadable: not one entry was read
    if whole:
        raise not_updated(where, whole[0])
    return entries, mode



def _made_parent(path: str | os.PathLike[str]) -> Path:
    target = Path(os.path.abspath(os.fspath(path)))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MemoryStoreError(f"cannot write {target}: {exc.strerror}") from None
    return target


def prune_enrichment(
    entries: Iterable[EnrichmentEntry], live_paths: Iterable[str], gone: Callable[[str], bool] | None = None
) -> list[EnrichmentEntry]:
    """The entries whose memory still exists (``live_paths``: relative paths of a root's docs; with
    ``gone``, an entry not among them is kept unless ``gone(path)``)."""
    live = set(live_paths)
    return [entry for entry in entries if entry.path in live or (gone is not None and not gone(entry.path))]


def sidecar_path(root: str | os.PathLike[str]) -> Path:
    """Where a root's own sidecar lives."""
    return Path(os.path.abspath(os.fspath(root))) / SIDECAR_PATH


@dataclass(frozen=True, slots=True)
class Sidecar:
    """Where a root's enrichment lives: its own hidden file, or a file given from outside."""

    path: str  # absolute
    inside: bool  # True: the root's own SIDECAR_PATH, reached from the root without following symlinks

    def label_path(self) -> str:
        """The sidecar as a snapshot's errors name it."""
        return SIDECAR_PATH if self.inside else self.path

    def read(self, root: Root) -> tuple[Versions, list[SidecarProblem]]:
        """The sidecar's entries (each path's, one a file hash) and problems; a missing sidecar is empty."""
        if not self.inside:
            return _read_versions(self.path)
        try:
            fd = open_own_file(root, SIDECAR_PATH)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return {}, []
            if exc.errno == errno.ELOOP:
                return {}, [(0, "sidecar is a symlink; symlinks are not followed")]
            return {}, [(0, f"unreadable: {exc.strerror}")]
        if fd is None:
            return {}, []  # no root, so no sidecar; the root's own error says so
        return read_sidecar_fd(fd)

    def refusal(self, root: Root, *, writing: bool = False) -> tuple[str, str] | None:
        """Where and why the root's own sidecar can be neither read nor written: (path relative to
        the root, one-line reason) when its folder or the file (``writing``: or its lock) is not what
        it must be."""
        if not self.inside:
            return None  # a file the caller gave: theirs to place
        return own_file_refusal(root, SIDECAR_PATH, "sidecar", "enrichment", writing=writing)

    def write_refusal(self, root: Root) -> str | None:
        """Why enrichment cannot be recorded in this sidecar (one line naming it), or None when it can."""
        refused = self.refusal(root, writing=True)
        if refused is not None:
            where, reason = refused
            return f"{root.label}/{where}: {reason}"
        with contextlib.suppress(OSError):
            size = os.lstat(self.path).st_size
            if size > MAX_SIDECAR_BYTES:  # never read (``read_bounded_fd``'s words), so never replaced
                shown = f"{root.label}/{SIDECAR_PATH}" if self.inside else self.path
                return f"{shown}: file is {size} bytes, over the {MAX_SIDECAR_BYTES}-byte limit"
        folder = Path(self.path).parent
        while not os.path.lexists(folder) and folder != folder.parent:
            folder = folder.parent  # the nearest folder that is there: the rest is made in it
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"{folder} is not writable"
        return None

    def exists(self, root: Root) -> bool:
        """Whether the sidecar is a regular file that ``read`` reads."""
        if not self.inside:
            return os.path.isfile(self.path)
        try:
            fd = open_own_file(root, SIDECAR_PATH)
        except OSError:
            return False
        if fd is None:
            return False
        try:
            return stat.S_ISREG(os.fstat(fd).st_mode)
        finally:
            os.close(fd)

    def update(self, root: Root, entries: Iterable[EnrichmentEntry], live_paths: Iterable[str] | None) -> Path:
        """Merge ``entries`` into the sidecar (dropping memories not in ``live_paths``), locked, atomically."""
        if not self.inside:
            return update_enrichment(self.path, entries, live_paths, gone=root.memory_gone)
        where = f"{root.label}/{SIDECAR_PATH}"
        with opened_root(root) as root_fd, opened_folder(root_fd, [_SIDECAR_FOLDER], where, create=True, writing=True) as folder_fd:
            keep_out_of_git(folder_fd)
            update_in_folder(folder_fd, _SIDECAR_NAME, entries, live_paths, follow=False, where=where, gone=root.memory_gone)
        return Path(self.path)
