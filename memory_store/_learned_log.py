"""The learned log's engine: a root's own ``.recall-kit/learned.jsonl`` appended to, compacted and
versioned (its lines' format is ``_learned_format``'s)."""

from __future__ import annotations

import dataclasses
import errno
import itertools
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memory_store._errors import MemoryNotFoundError, MemoryPathError, MemoryStoreError
from memory_store._git import GitVerdict, git_would_commit
from memory_store._fd import (
    SidecarProblem,
    kind_at,
    open_current,
    open_own_file,
    not_updated,
    opened_folder,
    opened_root,
    own_file_refusal,
    read_bounded_fd,
)
from memory_store._learned_format import (
    LEARNED_PATH,
    MAX_LEARNED_BYTES,
    LearnedEntry,
    LearningUpdate,
    entry_line,
    merge_updates,
    oldest_first,
    parse_learned,
)
from memory_store._private import PRIVATE_FILE_MODE
from memory_store._scan import Root
from memory_store._write import file_lock, keep_out_of_git, write_in_folder

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
    head: bytes = b""  # the file's first PREFIX_CHECK_BYTES as read, and the last ones before ``consumed``:
    edge: bytes = b""  # a file grown in place whose bytes there differ was rewritten (an editor), not appended to
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

    def kept_bytes(self, data: bytes) -> None:
        """Note ``data``, read or written right after the bytes read so far, in ``head`` and ``edge``."""
        if len(self.head) < PREFIX_CHECK_BYTES:
            self.head = (self.head + data[:PREFIX_CHECK_BYTES])[:PREFIX_CHECK_BYTES]
        self.edge = (self.edge + data[-PREFIX_CHECK_BYTES:])[-PREFIX_CHECK_BYTES:]

    def prefix_kept(self, fd: int) -> bool:
        """Whether the file open at ``fd`` still holds, where this parse read them, its first bytes and the
        last ones before ``consumed``: what an append leaves alone and an editor's rewrite shifts."""
        head = os.pread(fd, len(self.head), 0) if self.head else b""
        edge = os.pread(fd, len(self.edge), self.consumed - len(self.edge)) if self.edge else b""
        return head == self.head and edge == self.edge

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
        self.kept_bytes(data[: read.consumed])
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


PREFIX_CHECK_BYTES = 4096  # of a grown file's read bytes, compared at both ends before only its tail is read
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
        self._git: tuple[tuple[object, ...], GitVerdict] | None = None  # git's last answer, and what it depends on

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
            fd = open_own_file(self._root, LEARNED_PATH)
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
                looked = [path for path in (entries if everything else changed) if path in entries and path not in live]
                gone = [path for path in looked if self._root.memory_gone(path)]  # a file that fails to parse keeps its words
                for path in gone:
                    del entries[path]
                changed.update(gone)
            return changed

        self._rewrite(change, create=True, learning=True)
        return Path(self.path)

    def forget_gone(self, paths: Iterable[str]) -> int:
        """Forget the entries of those of ``paths`` whose memory file is gone (compacting the file, so their
        words leave the disk at once); how many went."""
        gone = [path for path in paths if self._root.memory_gone(path)]
        return self.clear(gone) if gone else 0

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

    def _rewrite(
        self, change: Callable[[dict[str, LearnedEntry]], set[str]], *, create: bool, learning: bool = False
    ) -> None:
        """Read, ``change`` (which returns the paths it changed), write the change when any; under the file's
        lock. ``learning`` (new words, not a forgetting): refused when git could commit the file."""
        where = f"{self._root.label}/{LEARNED_PATH}"
        folder, _, name = LEARNED_PATH.rpartition("/")
        with opened_root(self._root) as root_fd, opened_folder(root_fd, [folder], where, create=create, writing=True) as folder_fd:
            with file_lock(name + ".lock", dir_fd=folder_fd):
                if learning:
                    keep_out_of_git(folder_fd)  # our rule first, so that git is asked about the folder as we leave it
                    refusal = self._git_refusal(folder_fd)
                    if refusal is not None:
                        raise MemoryPathError(f"refused {where}: {refusal}; nothing is learned in this root")
                fd = open_current(folder_fd, name, follow=False, where=where)
                parse = _LearnedParse(_NO_FILE, {}, {}, 0, [])
                if fd is not None:
                    try:
                        if not stat.S_ISREG(os.fstat(fd).st_mode):
                            raise MemoryPathError(f"refused {where}: it is not a regular file")
                        parse = self._taken(fd)
                    except OSError as exc:
                        raise not_updated(where, f"unreadable ({exc.strerror})") from None
                    finally:
                        os.close(fd)
                elif not create and kind_at(folder_fd, name) == "missing":
                    return
                try:
                    self._write_changed(folder_fd, name, where, parse, change(parse.entries))
                finally:
                    if parse.identity != _NO_FILE:  # unchanged, or written: the parse is the file's again
                        with self._guard:
                            self._kept = parse

    def _git_refusal(self, folder_fd: int) -> str | None:
        """Why git could commit the file (it tracks it, or a rule of the repository lets it in), or None: asked
        again whenever the repository's index or the folder's .gitignore changed since git last answered."""
        kept = self._git
        if kept is not None and kept[0] == _git_stamp(folder_fd, kept[1].index, self._root.path):
            return kept[1].refusal
        verdict = git_would_commit(self._root.path, LEARNED_PATH)
        self._git = (_git_stamp(folder_fd, verdict.index, self._root.path), verdict)
        return verdict.refusal

    def _write_changed(
        self, folder_fd: int, name: str, where: str, parse: _LearnedParse, changed: set[str]
    ) -> None:
        """Re-encode the entries at ``changed``; append their lines, or compact the file within MAX_LEARNED_BYTES."""
        if not changed:
            return
        keep_out_of_git(folder_fd)
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
            if info.st_nlink != 1 or info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & ~PRIVATE_FILE_MODE:
                # a file with another name, someone else's, or one others may read (0644, as a git checkout
                # leaves it): only a new file of our own, mode 0600, is written
                return False
            view = memoryview(tail)
            while view:
                view = view[os.write(fd, view) :]
            parse.identity = _identity(os.fstat(fd))
        except OSError as exc:
            raise MemoryStoreError(f"cannot write {where}: {exc.strerror}") from None
        finally:
            os.close(fd)
        parse.kept_bytes(tail)
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
        data = b"".join(lines.values())
        parse.head = parse.edge = b""
        parse.kept_bytes(data)
        try:
            write_in_folder(folder_fd, name, data, replace=True, mode=PRIVATE_FILE_MODE)
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
        if base is not None and _grown(base, identity) and identity[2] <= MAX_LEARNED_BYTES and base.prefix_kept(fd):
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


def _git_stamp(folder_fd: int, index: str | None, root: str) -> tuple[object, ...]:
    """What git's answer about the learned file depends on: the folder's .gitignore and the repository's
    index, and the ``.git`` of the root and of every folder above it, where one that appears (a ``git
    init``, inside a repository or outside any) puts the root in another work tree."""
    places: list[tuple[str, int | None]] = [(".gitignore", folder_fd), *([(index, None)] if index else [])]
    places += [(os.path.join(folder, ".git"), None) for folder in _up_from(root)]
    found: list[object] = []
    for name, fd in places:
        try:
            found.append(_identity(os.stat(name, dir_fd=fd, follow_symlinks=False)))
        except OSError:
            found.append(None)
    return tuple(found)


def _up_from(folder: str) -> Iterator[str]:
    """``folder`` (made absolute) and every folder above it, up to the file system's root."""
    folder = os.path.abspath(folder)
    while True:
        yield folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent


def _identity(info: os.stat_result) -> FileIdentity:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
