"""A root's files: memories read, written, removed and resolved by relative path, and its enrichment sidecar.

The one place a memory path is confined to its root. Every folder on the way is opened relative
to the one above it without following symlinks, so no component of a read or a write is a symlink
leading anywhere; a symlinked memory file is read only when its target lies inside the root, as
the scan reads it; writes and removals never follow a symlink at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memory_store._errors import MemoryExistsError, MemoryNotFoundError, MemoryPathError, MemoryStoreError
from memory_store._format import format_memory, new_memory_path
from memory_store._learned import (
    LEARNED_PATH,
    MAX_LEARNED_BYTES,
    LearnedEntry,
    LearningUpdate,
    entry_line,
    merge_updates,
    oldest_first,
    parse_learned,
)
from memory_store._parse import parse_memory
from memory_store._private import PRIVATE_FILE_MODE
from memory_store._scan import Root, is_memory_name, link_target, open_beneath, open_root, read_listed
from memory_store._sidecar import (
    SIDECAR_PATH,
    EnrichmentEntry,
    SidecarProblem,
    open_current,
    read_bounded_fd,
    read_enrichment,
    read_sidecar_fd,
    sidecar_path,
    update_enrichment,
    update_in_folder,
)
from memory_store._types import DEFAULT_MAX_BYTES
from memory_store._write import file_lock, write_in_folder

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SIDECAR_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
_SIDECAR_FOLDER, _, _SIDECAR_NAME = SIDECAR_PATH.rpartition("/")


@dataclass(frozen=True, slots=True)
class SavedMemory:
    """A memory written by ``MemoryRoot.save``: its ref, its file, and whether it replaced one."""

    ref: str
    path: Path
    overwritten: bool


@dataclass(frozen=True, slots=True)
class Sidecar:
    """Where a root's enrichment lives: its own hidden file, or a file given from outside."""

    path: str  # absolute
    inside: bool  # True: the root's own SIDECAR_PATH, reached from the root without following symlinks

    def label_path(self) -> str:
        """The sidecar as a snapshot's errors name it."""
        return SIDECAR_PATH if self.inside else self.path

    def read(self, root: Root) -> tuple[dict[str, EnrichmentEntry], list[SidecarProblem]]:
        """The sidecar's entries and problems; a missing sidecar is empty."""
        if not self.inside:
            return read_enrichment(self.path)
        try:
            fd = _open_own_sidecar(root)
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
            fd = _open_own_sidecar(root)
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
            return update_enrichment(self.path, entries, live_paths)
        where = f"{root.label}/{SIDECAR_PATH}"
        with _root_fd(root) as root_fd, _folder(root_fd, [_SIDECAR_FOLDER], where, create=True) as folder_fd:
            update_in_folder(folder_fd, _SIDECAR_NAME, entries, live_paths, follow=False, where=where)
        return Path(self.path)


FileIdentity = tuple[int, int, int, int, int]  # (device, inode, size, mtime ns, ctime ns)
_NO_FILE: FileIdentity = (0, 0, 0, 0, 0)


_VERSIONS = itertools.count(1)
MAX_KEPT_CHANGES = 64  # versions a kept parse can tell changes since; an older reader gets every entry


@dataclass
class _LearnedParse:
    """One version of the learned file as parsed: its entries, each one's current line and their total
    size (what a compaction writes), the bytes and lines read from the file, and its problems."""

    identity: FileIdentity
    entries: dict[str, LearnedEntry]
    lines: dict[str, bytes]
    size: int
    problems: list[SidecarProblem]
    consumed: int = 0  # bytes of the file read: a tail appended past them is read on its own
    line_count: int = 0
    open_line: bool = False  # the bytes read end inside a line (a whole entry, with no newline after it)
    origin: int = field(default_factory=lambda: next(_VERSIONS))  # the version it was read whole at
    history: list[tuple[int, frozenset[str]]] = field(default_factory=list)  # (version, paths it changed)

    @property
    def version(self) -> int:
        """This parse's version: unique in the process, new after every change."""
        return self.history[-1][0] if self.history else self.origin

    def changed(self, paths: Iterable[str]) -> None:
        """Record a change of the entries at ``paths``: a new version, the last MAX_KEPT_CHANGES remembered."""
        self.history.append((next(_VERSIONS), frozenset(paths)))
        if len(self.history) > MAX_KEPT_CHANGES:
            self.origin = self.history.pop(0)[0]

    def since(self, version: int | None) -> set[str] | None:
        """The paths changed since ``version`` of this parse, or None when it is none this parse remembers."""
        if version == self.origin:
            return set().union(*(paths for _, paths in self.history))
        for index, (seen, _) in enumerate(self.history):
            if seen == version:
                return set().union(*(paths for _, paths in self.history[index + 1 :]))
        return None

    def copy(self) -> _LearnedParse:
        """A copy to change while this one stays as it is (the entries themselves are shared: never changed)."""
        return dataclasses.replace(
            self, entries=dict(self.entries), lines=dict(self.lines), problems=list(self.problems), history=list(self.history)
        )

    def appendable(self) -> bool:
        """Whether this is a file that ends where it was read, on a line's end, with no bad line to drop."""
        return self.identity != _NO_FILE and self.consumed == self.identity[2] and not self.open_line and not self.problems

    def applied(self, data: bytes, first_line: int, base: int) -> set[str]:
        """Read the log's ``data`` (starting at line ``first_line``, byte ``base``) into this parse; the
        paths its lines set or forgot."""
        read = parse_learned(data, self.entries, first_line)
        for path in read.touched:
            self.size -= len(self.lines.pop(path, b""))
            if path in self.entries:
                self.lines[path] = line = entry_line(self.entries[path]).encode("ascii")
                self.size += len(line)
        self.problems += read.problems
        self.consumed, self.line_count = base + read.consumed, first_line - 1 + read.lines
        if read.consumed:
            self.open_line = data[read.consumed - 1 : read.consumed] != b"\n"
        return read.touched


@dataclass(frozen=True, slots=True)
class LearnedChanges:
    """What the learned file holds now, as a change since a version a reader saw: every entry (``entries``)
    when that version is not one the kept parse remembers, else only the paths that changed (``delta``,
    None for a path forgotten)."""

    version: int
    entries: dict[str, LearnedEntry] | None
    delta: dict[str, LearnedEntry | None]
    problems: list[SidecarProblem]


COMPACT_MIN_BYTES = 256 * 1024  # a log this small is appended to whatever share of it is superseded
COMPACT_FACTOR = 2  # past that, compacted once its bytes reach twice those of its current lines


class LearnedFile:
    """A root's own ``.recall-kit/learned.jsonl``: read and written from the root, never through a
    symlink, under the enrichment sidecar's lock routine.

    An update appends the new lines of the entries it changed (no fsync: what was learned is a hint,
    and a crash loses at most the last updates, never an older entry or a memory); the file is
    compacted, atomically with fsync and rename, when superseded lines make up half of it, when it
    would pass MAX_LEARNED_BYTES, when it has a bad or cut line to drop, and when a memory is
    forgotten (so its words leave the disk at once). Its parse is kept while
    the file is unchanged, and a tail another process appended is read on its own, so an update at
    10,000 memories neither re-reads nor re-writes the other entries."""

    def __init__(self, root: Root) -> None:
        self._root = root
        self._guard = threading.Lock()  # the kept parse; processes are kept apart by the file's flock
        self._kept: _LearnedParse | None = None
        self._pruned_for: frozenset[str] | None = None  # the live paths the kept parse was last pruned by

    @property
    def path(self) -> str:
        """The file's absolute path, under the root as given."""
        return self._root.abspath(LEARNED_PATH)

    def refusal(self, *, writing: bool = False) -> tuple[str, str] | None:
        """Where and why the file (``writing``: or its lock) can be neither read nor written, or None."""
        return own_file_refusal(self._root, LEARNED_PATH, "learned file", "what was learned", writing=writing)

    def read(self) -> tuple[dict[str, LearnedEntry], list[SidecarProblem]]:
        """The entries (relative path -> entry; an unchanged entry stays the same object) and problems;
        a missing file is empty."""
        changes = self.read_changes(None)
        return changes.entries or {}, changes.problems

    def read_changes(self, since: int | None) -> LearnedChanges:
        """What the file holds now, as a change since version ``since`` of an earlier read (None: every entry)."""
        try:
            fd = _open_own_sidecar(self._root, LEARNED_PATH)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return LearnedChanges(0, {}, {}, [])
            if exc.errno == errno.ELOOP:
                return LearnedChanges(0, {}, {}, [(0, "learned file is a symlink; symlinks are not followed")])
            return LearnedChanges(0, {}, {}, [(0, f"unreadable: {exc.strerror}")])
        if fd is None:
            return LearnedChanges(0, {}, {}, [])
        try:
            return self._shared(fd, since)
        except OSError as exc:
            return LearnedChanges(0, {}, {}, [(0, f"unreadable: {exc.strerror}")])
        finally:
            os.close(fd)

    def update(self, updates: Iterable[LearningUpdate], live_paths: Iterable[str] | None) -> Path:
        """Merge ``updates`` (dropping memories not in ``live_paths``), locked, mode 0600."""
        given = list(updates)
        live = live_paths if live_paths is None or isinstance(live_paths, (set, frozenset)) else set(live_paths)

        def change(entries: dict[str, LearnedEntry]) -> set[str]:
            try:
                changed = merge_updates(entries, given)
            except ValueError as exc:
                raise MemoryStoreError(str(exc)) from None
            if live is not None:
                # Every entry is checked unless the kept parse was pruned by this very set of live paths (a
                # store passes one frozenset while its memories are unchanged): a full pass costs ms at 10,000.
                with self._guard:
                    everything = live is not self._pruned_for
                    self._pruned_for = live if isinstance(live, frozenset) else None
                gone = [path for path in (entries if everything else changed) if path in entries and path not in live]
                for path in gone:
                    del entries[path]
                changed.update(gone)
            return changed

        self._rewrite(change, create=True)
        return Path(self.path)

    def clear(self, paths: Iterable[str] | None) -> int:
        """Forget the entries of ``paths`` (None: all); how many were removed. A missing file stays missing."""
        wanted = None if paths is None else set(paths)
        removed: set[str] = set()

        def change(entries: dict[str, LearnedEntry]) -> set[str]:
            removed.update(entries if wanted is None else wanted & entries.keys())
            for path in removed:
                del entries[path]
            return removed

        try:
            self._rewrite(change, create=False)
        except MemoryNotFoundError:
            return 0  # no sidecar folder, so nothing learned
        return len(removed)

    def _rewrite(self, change: Callable[[dict[str, LearnedEntry]], set[str]], *, create: bool) -> None:
        """Read, ``change`` (which returns the paths it changed), write the change when any; under the file's lock."""
        where = f"{self._root.label}/{LEARNED_PATH}"
        folder, _, name = LEARNED_PATH.rpartition("/")
        with _root_fd(self._root) as root_fd, _folder(root_fd, [folder], where, create=create) as folder_fd:
            with file_lock(name + ".lock", dir_fd=folder_fd):
                fd = open_current(folder_fd, name, follow=False, where=where)
                parse = _LearnedParse(_NO_FILE, {}, {}, 0, [])
                if fd is not None:
                    try:
                        if not stat.S_ISREG(os.fstat(fd).st_mode):
                            raise MemoryPathError(f"refused {where}: it is not a regular file")
                        parse = self._taken(fd)
                    except OSError:
                        pass  # unreadable: its entries are lost to every reader already
                    finally:
                        os.close(fd)
                elif not create and _kind_at(folder_fd, name) == "missing":
                    return
                try:
                    self._write_changed(folder_fd, name, where, parse, change(parse.entries))
                finally:
                    if parse.identity != _NO_FILE:  # unchanged, or written: the parse is the file's again
                        with self._guard:
                            self._kept = parse

    def _write_changed(
        self, folder_fd: int, name: str, where: str, parse: _LearnedParse, changed: set[str]
    ) -> None:
        """Re-encode the entries at ``changed``; append their lines, or compact the file within MAX_LEARNED_BYTES."""
        if not changed:
            return
        entries, lines = parse.entries, parse.lines
        appended: list[bytes] = []
        removed = False
        for path in changed:
            old = lines.pop(path, None)
            parse.size -= len(old or b"")
            if path in entries:
                line = entry_line(entries[path]).encode("ascii")
                lines[path] = line
                parse.size += len(line)
                appended.append(line)
            else:
                removed = removed or old is not None
        parse.changed(changed)
        tail = b"".join(appended)
        grown = parse.consumed + len(tail)
        # A memory forgotten (cleared, or pruned when it was deleted) leaves the file at once, words and all.
        small = grown <= MAX_LEARNED_BYTES and grown <= max(COMPACT_MIN_BYTES, COMPACT_FACTOR * parse.size)
        if not removed and small and parse.appendable():
            if self._append(folder_fd, name, where, parse, tail, len(appended)):
                return
        self._compact(folder_fd, name, where, parse)

    @staticmethod
    def _append(folder_fd: int, name: str, where: str, parse: _LearnedParse, tail: bytes, count: int) -> bool:
        """Append ``tail`` (``count`` lines) to the file the parse was read from; False when it is not there now."""
        kept = parse.identity
        parse.identity = _NO_FILE  # changed in place: no file is this parse until it is written
        try:
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
        except OSError:
            return False  # gone, or swapped for a symlink: a compaction replaces it
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or _identity(info) != kept:
                return False  # not the file that was read (the lock keeps our writers out; this is someone else)
            if info.st_nlink != 1 or info.st_uid != os.geteuid():
                return False  # a file with another name, or someone else's: only a new file of our own is written
            view = memoryview(tail)
            while view:
                view = view[os.write(fd, view) :]
            parse.identity = _identity(os.fstat(fd))
        except OSError as exc:
            raise MemoryStoreError(f"cannot write {where}: {exc.strerror}") from None
        finally:
            os.close(fd)
        parse.consumed += len(tail)
        parse.line_count += count
        return True

    @staticmethod
    def _compact(folder_fd: int, name: str, where: str, parse: _LearnedParse) -> None:
        """Write the parse's current lines as the whole file, the least recently learned dropped past MAX_LEARNED_BYTES."""
        entries, lines = parse.entries, parse.lines
        parse.identity = _NO_FILE
        if parse.size > MAX_LEARNED_BYTES:
            dropped = []
            for path in oldest_first(entries.values()):
                if parse.size <= MAX_LEARNED_BYTES:
                    break
                parse.size -= len(lines.pop(path))
                del entries[path]
                dropped.append(path)
            parse.changed(dropped)
        try:
            write_in_folder(folder_fd, name, b"".join(lines.values()), replace=True, mode=PRIVATE_FILE_MODE)
            written = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except OSError as exc:
            raise MemoryStoreError(f"cannot write {where}: {exc.strerror}") from None
        parse.identity, parse.problems = _identity(written), []
        parse.consumed, parse.line_count, parse.open_line = parse.size, len(lines), False

    def _shared(self, fd: int, since: int | None) -> LearnedChanges:
        """The entries and problems of the file open at ``fd`` (copies: a writer may take the kept parse
        next), parsed once a version, as a change since version ``since``."""
        identity = _identity(os.fstat(fd))
        with self._guard:
            kept = self._kept
            if kept is not None and kept.identity == identity:
                return _changes(kept, since)
        parse = self._parse(fd, identity, kept.copy() if kept is not None and _grown(kept, identity) else None)
        with self._guard:
            self._kept = parse
            return _changes(parse, since)

    def _taken(self, fd: int) -> _LearnedParse:
        """The parse of the file open at ``fd``, the caller's to change: the kept one is let go."""
        identity = _identity(os.fstat(fd))
        with self._guard:
            kept, self._kept = self._kept, None
        return kept if kept is not None and kept.identity == identity else self._parse(fd, identity, kept)

    def _parse(self, fd: int, identity: FileIdentity, base: _LearnedParse | None) -> _LearnedParse:
        """The file open at ``fd``: ``base`` (the caller's to change) with the tail appended since it was read,
        when the file is ``base``'s grown; otherwise read whole. Either may hold entries no prune has seen."""
        with self._guard:
            self._pruned_for = None
        if base is not None and _grown(base, identity) and identity[2] <= MAX_LEARNED_BYTES:
            tail = _read_from(fd, base.consumed, identity[2] - base.consumed)
            base.identity = identity
            base.changed(base.applied(tail, base.line_count + 1, base.consumed))
            return base
        data = read_bounded_fd(fd, MAX_LEARNED_BYTES)
        if isinstance(data, tuple):
            return _LearnedParse(identity, {}, {}, 0, [data])
        parse = _LearnedParse(identity, {}, {}, 0, [])
        parse.applied(data, 1, 0)
        return parse


def _changes(parse: _LearnedParse, since: int | None) -> LearnedChanges:
    """The parse as a change since version ``since`` (every entry when it does not remember that version)."""
    paths = None if since is None else parse.since(since)
    problems = list(parse.problems)
    if paths is None:
        return LearnedChanges(parse.version, dict(parse.entries), {}, problems)
    return LearnedChanges(parse.version, None, {path: parse.entries.get(path) for path in paths}, problems)


def _read_from(fd: int, offset: int, size: int) -> bytes:
    """Up to ``size`` bytes of the file open at ``fd`` from ``offset`` (fewer when it is shorter now)."""
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.pread(fd, min(size, 1 << 20), offset)):
        chunks.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _grown(parse: _LearnedParse, identity: FileIdentity) -> bool:
    """Whether the file at ``identity`` is the one ``parse`` read, appended to since (same device and inode, longer)."""
    return parse.identity != _NO_FILE and parse.identity[:2] == identity[:2] and identity[2] > parse.identity[2]


def _identity(info: os.stat_result) -> FileIdentity:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _kind_at(folder_fd: int, name: str) -> str:
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


def _open_own_sidecar(root: Root, rel: str = SIDECAR_PATH) -> int | None:
    """The root's own sidecar (or the file at ``rel`` beside it) opened for reading from the root, no
    symlink followed; None when the root is gone."""
    try:
        root_fd = open_root(root)
    except OSError:
        return None
    try:
        return open_beneath(root_fd, rel, _SIDECAR_FILE_FLAGS)
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
        kind = _kind_at(root_fd, folder)
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
            for file, about in [(name, what), *([(name + ".lock", f"{what}'s lock")] if writing else [])]:
                kind = _kind_at(folder_fd, file)
                if kind == "symlink":
                    return f"{folder}/{file}", f"{about} is a symlink; symlinks are not followed"
                if kind not in ("missing", "file"):
                    return f"{folder}/{file}", f"{about} is not a regular file"
        finally:
            os.close(folder_fd)
    finally:
        os.close(root_fd)
    return None


class MemoryRoot:
    """One root folder's memory files, by POSIX path relative to the root, never leaving it.

    Open one with ``MemoryRoot(path)`` or take a store's with ``MemoryStore.root(label)``. Errors are
    MemoryStoreError subclasses with one-line messages: MemoryPathError for a refused path,
    MemoryNotFoundError, MemoryExistsError.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        label: str | None = None,
        sidecar: str | os.PathLike[str] | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        """``label`` defaults to the folder's name; ``sidecar`` is a file to keep enrichment in
        instead of the root's own ``.recall-kit/enrichment.jsonl``."""
        absolute = given_path(path)
        self._root = Root(checked_label(label) if label is not None else default_label(absolute), absolute)
        self._sidecar = (
            Sidecar(str(sidecar_path(absolute)), inside=True)
            if sidecar is None
            else Sidecar(given_path(sidecar), inside=False)
        )  # the one resolution: the store reads what this root records
        self._learned = LearnedFile(self._root)
        self._max_bytes = max_bytes

    @property
    def label(self) -> str:
        """The root's scope label, the first part of its memories' refs."""
        return self._root.label

    @property
    def path(self) -> Path:
        """The root folder's absolute path, as given (a symlinked root is followed on purpose)."""
        return Path(self._root.path)

    @property
    def sidecar_path(self) -> Path:
        """Where the root's enrichment is kept: its own ``.recall-kit/enrichment.jsonl`` or the file given."""
        return Path(self._sidecar.path)

    @property
    def max_bytes(self) -> int:
        """The largest memory file read or saved, as the scan's limit."""
        return self._max_bytes

    def __repr__(self) -> str:
        return f"<MemoryRoot {self.label!r} {self._root.path}>"

    # --- reading -------------------------------------------------------------------------------

    def resolve(self, rel: str) -> Path:
        """The path of the memory file at ``rel``, once it is known to be one the store would read."""
        ref = self._ref(rel)
        parts = self._parts(rel, ref)
        with _root_fd(self._root) as root_fd, _folder(root_fd, parts[:-1], ref, create=False) as folder_fd:
            kind = _kind(folder_fd, parts[-1], ref)
            try:
                if kind == "other":
                    raise MemoryPathError("not a regular file")
                if kind == "symlink":
                    link_target(self._root, rel, os.path.realpath(self._root.path))
            except MemoryStoreError as exc:
                raise _about(exc, ref, "cannot resolve") from None
        return Path(self._root.abspath(rel))

    def read_bytes(self, rel: str) -> bytes:
        """The bytes of the memory file at ``rel``, at most ``max_bytes`` as the scan reads them."""
        ref = self._ref(rel)
        parts = self._parts(rel, ref)
        with _root_fd(self._root) as root_fd, _folder(root_fd, parts[:-1], ref, create=False) as folder_fd:
            kind = _kind(folder_fd, parts[-1], ref)
            try:
                data, _info = read_listed(
                    self._root, root_fd, folder_fd, rel, kind, self._max_bytes, os.path.realpath(self._root.path)
                )
            except MemoryStoreError as exc:
                raise _about(exc, ref, "cannot read") from None
        return data

    # --- writing -------------------------------------------------------------------------------

    def write(self, rel: str, text: str, *, overwrite: bool) -> bool:
        """Write ``text`` as the memory file at ``rel`` atomically, creating its folders; True when it
        replaced a file.

        Without ``overwrite`` an existing file (even one that appears meanwhile) is never replaced:
        MemoryExistsError. A symlink or anything but a regular file at ``rel`` is refused either way.
        """
        ref = self._ref(rel)
        parts = self._parts(rel, ref)
        name = parts[-1]
        with _root_fd(self._root) as root_fd, _folder(root_fd, parts[:-1], ref, create=True) as folder_fd:
            info = _lstat(folder_fd, name, ref)
            refusal = _existing_refusal(info, ref, overwrite=overwrite)
            if refusal is not None:
                raise refusal
            mode = stat.S_IMODE(info.st_mode) if info is not None else None
            try:
                write_in_folder(folder_fd, name, text.encode("utf-8"), replace=overwrite, mode=mode)
            except FileExistsError:
                appeared = _lstat(folder_fd, name, ref)  # what won the race is what the message names
                raced = _existing_refusal(appeared, ref, overwrite=False, meanwhile=" (it appeared meanwhile)")
                raise raced or MemoryExistsError(f"{ref} already exists (it appeared meanwhile)") from None
            except OSError as exc:
                raise MemoryStoreError(f"cannot write {ref}: {exc.strerror}") from None
        return info is not None

    def save(
        self,
        *,
        name: str,
        description: str,
        type: str,
        body: str = "",
        keywords: Sequence[str] = (),
        overwrite: bool = False,
    ) -> SavedMemory:
        """Format a new memory, check it as the store will read it, and write it as ``<type>/<slug of name>.md``.

        MemoryParseError (nothing is written) when the store would skip it; otherwise as ``write``.
        """
        text = format_memory(name=name, description=description, type=type, body=body, keywords=keywords)
        doc = parse_memory(text, max_bytes=self._max_bytes)  # the store's own rules, before any write
        rel = new_memory_path(doc.type, doc.name)
        replaced = self.write(rel, text, overwrite=overwrite)
        return SavedMemory(self._ref(rel), Path(self._root.abspath(rel)), replaced)

    def remove(self, rel: str) -> None:
        """Delete the memory file at ``rel`` (a symlinked memory loses its link, never its target)."""
        ref = self._ref(rel)
        parts = self._parts(rel, ref)
        with _root_fd(self._root) as root_fd, _folder(root_fd, parts[:-1], ref, create=False) as folder_fd:
            info = _lstat(folder_fd, parts[-1], ref)
            if info is None:
                raise MemoryNotFoundError(f"no memory file {ref}")
            if stat.S_ISDIR(info.st_mode):
                raise MemoryPathError(f"refused {ref}: it is a folder")
            try:
                os.unlink(parts[-1], dir_fd=folder_fd)
            except FileNotFoundError:
                raise MemoryNotFoundError(f"no memory file {ref}") from None
            except OSError as exc:
                raise MemoryStoreError(f"cannot remove {ref}: {exc.strerror}") from None

    # --- enrichment ----------------------------------------------------------------------------

    def has_sidecar(self) -> bool:
        """Whether the root's sidecar is there, a regular file the store reads."""
        return self._sidecar.exists(self._root)

    def sidecar_refusal(self) -> str | None:
        """Why enrichment cannot be recorded for this root, in one line (its sidecar's folder or file is
        a symlink or not what it must be, or cannot be written), or None when ``record_enrichment`` can
        write it. What a caller checks before asking a model for terms it could not keep."""
        return self._sidecar.write_refusal(self._root)

    def record_enrichment(self, entries: Iterable[EnrichmentEntry], live_paths: Iterable[str] | None = None) -> Path:
        """Merge ``entries`` into the root's sidecar and write it atomically, locked against other writers;
        with ``live_paths`` (relative paths of the root's memories), drop entries of memories that are gone.
        Returns the sidecar's path."""
        return self._sidecar.update(self._root, entries, live_paths)

    # --- learning ------------------------------------------------------------------------------

    @property
    def learned_path(self) -> Path:
        """Where the root keeps what was learned: its own ``.recall-kit/learned.jsonl``."""
        return Path(self._learned.path)

    def learning_refusal(self) -> str | None:
        """Why learning cannot be recorded for this root, in one line naming the file, or None when it can."""
        refused = self._learned.refusal(writing=True)
        return None if refused is None else f"{self._root.label}/{refused[0]}: {refused[1]}"

    def record_learning(self, updates: Iterable[LearningUpdate], live_paths: Iterable[str] | None = None) -> Path:
        """Merge ``updates`` into the root's learned file and write it atomically (mode 0600), locked against
        other writers; with ``live_paths`` (relative paths of the root's memories), drop entries of memories
        that are gone. Returns the file's path; MemoryStoreError (nothing written) when an update's path
        is invalid, MemoryPathError when the file or its folder is a symlink or not what it must be."""
        return self._learned.update(updates, live_paths)

    def read_learning(self) -> tuple[dict[str, LearnedEntry], list[SidecarProblem]]:
        """What was learned, relative path -> entry, and the file's problems as [(line, reason)] (0: the whole file)."""
        return self._learned.read()

    def clear_learning(self, paths: Iterable[str] | None = None) -> int:
        """Forget what was learned for ``paths`` (relative paths; None: every memory); how many entries went."""
        return self._learned.clear(paths)

    # --- paths ---------------------------------------------------------------------------------

    def _ref(self, rel: str) -> str:
        return f"{self._root.label}/{rel}"

    @staticmethod
    def _parts(rel: str, ref: str) -> list[str]:
        """``rel``'s components when it names a memory file by a plain path inside the root."""
        parts = rel.split("/")
        if not rel or "\x00" in rel or any(part in ("", ".", "..") or part.startswith(".") for part in parts):
            raise MemoryPathError(f"refused {ref}: only plain paths inside the root, without hidden parts")
        if not is_memory_name(parts[-1]):
            raise MemoryPathError(f"refused {ref}: not a memory file name (*.md, other than MEMORY.md)")
        return parts


def default_label(path: str) -> str:
    """A root's label when none is given: its folder's name."""
    return os.path.basename(path) or "root"


def checked_label(label: str) -> str:
    """``label`` when it can start a ref (non-empty, no '/'); else MemoryStoreError."""
    if not label or "/" in label:
        raise MemoryStoreError(f"invalid root label {label!r}: it must be non-empty and contain no '/'")
    return label


def given_path(path: str | os.PathLike[str]) -> str:
    """A path the user gave, made absolute (``~`` expanded); symlinks in it stay as given."""
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def _about(exc: MemoryStoreError, ref: str, doing: str) -> MemoryStoreError:
    """The same kind of error, its reason now naming ``ref``."""
    prefix = "refused" if isinstance(exc, MemoryPathError) else doing
    return type(exc)(f"{prefix} {ref}: {exc}")


@contextlib.contextmanager
def _root_fd(root: Root) -> Iterator[int]:
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
def _folder(root_fd: int, parts: Sequence[str], ref: str, *, create: bool) -> Iterator[int]:
    """The folder ``parts`` below the root, opened one component at a time; none may be a symlink."""
    fd = os.dup(root_fd)
    try:
        for depth, part in enumerate(parts, 1):
            nxt = _enter(fd, part, "/".join(parts[:depth]), ref, create)
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


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


def _existing_refusal(
    info: os.stat_result | None, ref: str, *, overwrite: bool, meanwhile: str = ""
) -> MemoryStoreError | None:
    """What is wrong with writing over ``info``, the entry found at ``ref``; None when it may be replaced."""
    if info is None:
        return None
    if stat.S_ISLNK(info.st_mode):
        return MemoryPathError(f"refused {ref}: it is a symlink{meanwhile}, and nothing is written through one")
    if not stat.S_ISREG(info.st_mode):
        return MemoryPathError(f"refused {ref}: it is not a regular file{meanwhile}")
    if not overwrite:
        return MemoryExistsError(f"{ref} already exists{meanwhile}")
    return None


def _lstat(folder_fd: int, name: str, ref: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MemoryStoreError(f"cannot reach {ref}: {exc.strerror}") from None


def _kind(folder_fd: int, name: str, ref: str) -> str:
    """What is at ``name`` in its open folder, as a listing would call it; MemoryNotFoundError when nothing."""
    info = _lstat(folder_fd, name, ref)
    if info is None:
        raise MemoryNotFoundError(f"no memory file {ref}")
    if stat.S_ISLNK(info.st_mode):
        return "symlink"
    return "file" if stat.S_ISREG(info.st_mode) else "other"
