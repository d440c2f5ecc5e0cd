"""A root's files: memories read, written, removed and resolved by relative path, and its enrichment sidecar.

The one place a memory path is confined to its root. Every folder on the way is opened relative
to the one above it without following symlinks, so no component of a read or a write is a symlink
leading anywhere; a symlinked memory file is read only when its target lies inside the root, as
the scan reads it; writes and removals never follow a symlink at all.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from memory_store._errors import MemoryExistsError, MemoryNotFoundError, MemoryPathError, MemoryStoreError
from memory_store._format import format_memory, new_memory_path
from memory_store._learned import (
    LEARNED_PATH,
    MAX_LEARNED_BYTES,
    LearnedEntry,
    LearningUpdate,
    entry_line,
    oldest_first,
    merge_updates,
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


@dataclass
class _LearnedParse:
    """One version of the learned file as parsed: its entries, each one's line, their total size, its problems."""

    identity: FileIdentity
    entries: dict[str, LearnedEntry]
    lines: dict[str, bytes]
    size: int
    problems: list[SidecarProblem]


class LearnedFile:
    """A root's own ``.recall-kit/learned.jsonl``: read and rewritten from the root, never through a
    symlink, under the enrichment sidecar's lock routine; its parse is kept while the file is unchanged,
    so an update at 10,000 memories re-encodes only the entries it changes."""

    def __init__(self, root: Root) -> None:
        self._root = root
        self._guard = threading.Lock()  # the kept parse; processes are kept apart by the file's flock
        self._kept: _LearnedParse | None = None

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
        try:
            fd = _open_own_sidecar(self._root, LEARNED_PATH)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return {}, []
            if exc.errno == errno.ELOOP:
                return {}, [(0, "learned file is a symlink; symlinks are not followed")]
            return {}, [(0, f"unreadable: {exc.strerror}")]
        if fd is None:
            return {}, []
        try:
            return self._shared(fd)
        except OSError as exc:
            return {}, [(0, f"unreadable: {exc.strerror}")]
        finally:
            os.close(fd)

    def update(self, updates: Iterable[LearningUpdate], live_paths: Iterable[str] | None) -> Path:
        """Merge ``updates`` (dropping memories not in ``live_paths``), locked, atomically, mode 0600."""
        given = list(updates)
        live = live_paths if live_paths is None or isinstance(live_paths, (set, frozenset)) else set(live_paths)

        def change(entries: dict[str, LearnedEntry]) -> set[str]:
            try:
                changed = merge_updates(entries, given)
            except ValueError as exc:
                raise MemoryStoreError(str(exc)) from None
            if live is not None:
                gone = entries.keys() - live
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
        """Read, ``change`` (which returns the paths it changed), write back when any; under the file's lock."""
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
                        parse = self._taken(fd)  # bad lines are not carried over
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
        """Re-encode the entries at ``changed``, keep the file within MAX_LEARNED_BYTES, write it atomically."""
        if not changed:
            return
        entries, lines = parse.entries, parse.lines
        parse.identity = _NO_FILE  # changed in place: no file is this parse until it is written
        for path in changed:
            parse.size -= len(lines.pop(path, b""))
            if path in entries:
                line = entry_line(entries[path]).encode("ascii")
                lines[path] = line
                parse.size += len(line)
        if parse.size > MAX_LEARNED_BYTES:
            for path in oldest_first(entries.values()):
                if parse.size <= MAX_LEARNED_BYTES:
                    break
                parse.size -= len(lines.pop(path))
                del entries[path]
        try:
            write_in_folder(folder_fd, name, b"".join(lines.values()), replace=True, mode=PRIVATE_FILE_MODE)
            written = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        except OSError as exc:
            raise MemoryStoreError(f"cannot write {where}: {exc.strerror}") from None
        parse.identity, parse.problems = _identity(written), []

    def _shared(self, fd: int) -> tuple[dict[str, LearnedEntry], list[SidecarProblem]]:
        """Copies of the entries and problems of the file open at ``fd``, parsed once a version."""
        identity = _identity(os.fstat(fd))
        with self._guard:
            kept = self._kept
            if kept is not None and kept.identity == identity:
                return dict(kept.entries), list(kept.problems)  # copied here: a writer may take it next
        parse = self._parse(fd, identity)
        with self._guard:
            self._kept = parse
            return dict(parse.entries), list(parse.problems)

    def _taken(self, fd: int) -> _LearnedParse:
        """The parse of the file open at ``fd``, the caller's to change: the kept one is let go."""
        identity = _identity(os.fstat(fd))
        with self._guard:
            kept, self._kept = self._kept, None
        return kept if kept is not None and kept.identity == identity else self._parse(fd, identity)

    @staticmethod
    def _parse(fd: int, identity: FileIdentity) -> _LearnedParse:
        data = read_bounded_fd(fd, MAX_LEARNED_BYTES)
        if isinstance(data, tuple):
            return _LearnedParse(identity, {}, {}, 0, [data])
        entries, problems = parse_learned(data)
        lines = {path: entry_line(entry).encode("ascii") for path, entry in entries.items()}
        return _LearnedParse(identity, entries, lines, sum(map(len, lines.values())), problems)


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
