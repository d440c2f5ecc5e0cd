"""A root's files: memories read, written, removed and resolved by relative path, and its two sidecars.

The one place a memory path is confined to its root. Every folder on the way is opened relative
to the one above it without following symlinks, so no component of a read or a write is a symlink
leading anywhere; a symlinked memory file is read only when its target lies inside the root, as
the scan reads it; writes and removals never follow a symlink at all.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memory_store._root_rule import broad_root_refusal
from memory_store._errors import MemoryExistsError, MemoryNotFoundError, MemoryParseError, MemoryPathError, MemoryStoreError
from memory_store._fd import SidecarProblem, opened_folder, opened_root
from memory_store._format import format_memory, new_memory_path
from memory_store._index_file import IndexFile, find_index_files, replace_index
from memory_store._learned_format import LEARNED_PATH, LearnedEntry, LearningUpdate
from memory_store._learned_log import LearnedChanges, LearnedFile
from memory_store._parse import parse_memory
from memory_store._scan import Root, is_memory_name, link_target, read_listed
from memory_store._sidecar import EnrichmentEntry, Sidecar, Versions, sidecar_path
from memory_store._types import DEFAULT_MAX_BYTES, SkippedFile
from memory_store._write import write_in_folder


@dataclass(frozen=True, slots=True)
class SavedMemory:
    """A memory written by ``MemoryRoot.save``: its ref, its file, and whether it replaced one."""

    ref: str
    path: Path
    overwritten: bool


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
        instead of the root's own ``.recall-kit/enrichment.jsonl``. A path that is no folder of
        memories (the file system root, the home folder or above it, a NUL in it: ``broad_root_refusal``)
        raises MemoryStoreError, as ``MemoryStore.open`` does: `add --root ~` wrote into the home folder."""
        refusal = broad_root_refusal(os.fspath(path))
        if refusal is not None:
            raise MemoryStoreError(refusal)
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
        with opened_root(self._root) as root_fd, opened_folder(root_fd, parts[:-1], ref, create=False) as folder_fd:
            kind = _kind(folder_fd, parts[-1], ref)
            try:
                if kind == "other":
                    raise MemoryPathError("not a regular file")
                if kind == "symlink":
                    link_target(self._root, rel, os.path.realpath(self._root.path))
            except MemoryStoreError as exc:
                raise _about(exc, ref, "cannot resolve") from None
        return Path(self._root.abspath(rel))

    def linked_path(self, rel: str) -> str | None:
        """Where ``rel`` leads through symlinks (a symlinked folder on its way, or the file itself),
        relative to the root, when that is inside it; None when it leads nowhere, to the root itself or
        out of it. Only realpath looks through the links: nothing is opened."""
        try:
            return link_target(self._root, rel, os.path.realpath(self._root.path))
        except MemoryStoreError:
            return None

    def read_bytes(self, rel: str) -> bytes:
        """The bytes of the memory file at ``rel``, at most ``max_bytes`` as the scan reads them."""
        ref = self._ref(rel)
        parts = self._parts(rel, ref)
        with opened_root(self._root) as root_fd, opened_folder(root_fd, parts[:-1], ref, create=False) as folder_fd:
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
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (os.fsdecode's, surrogateescape's): not text a file can hold
            raise MemoryParseError(f"not written: {ref} is not valid UTF-8 text") from None
        with opened_root(self._root) as root_fd, opened_folder(root_fd, parts[:-1], ref, create=True, writing=True) as folder_fd:
            info = _lstat(folder_fd, name, ref)
            refusal = _existing_refusal(info, ref, overwrite=overwrite)
            if refusal is not None:
                raise refusal
            mode = stat.S_IMODE(info.st_mode) if info is not None else None
            try:
                write_in_folder(folder_fd, name, data, replace=overwrite, mode=mode)
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
        project: str | None = None,
    ) -> SavedMemory:
        """Format a new memory, check it as the store will read it, and write it where ``new_memory_path``
        says: ``<type folder>/<slug of name>.md`` (``projects/<project>/`` for a project's).

        MemoryParseError (nothing is written) when the store would skip it, or when ``project`` is given
        for another type; otherwise as ``write``.
        """
        if any(not any(ch.isalnum() for ch in keyword) for keyword in keywords):
            raise MemoryParseError("a keyword is empty: it has no letter or digit")  # "", " ", a zero-width space
        text = format_memory(name=name, description=description, type=type, body=body, keywords=keywords)
        doc = parse_memory(text, max_bytes=self._max_bytes)  # the store's own rules, before any write
        if doc.problems:  # what it would load the memory without (a keyword over its length): `validate` says so
            raise MemoryParseError(doc.problems[0])
        try:
            rel = new_memory_path(doc.type, doc.name, project)
        except ValueError as exc:
            raise MemoryParseError(str(exc)) from None
        replaced = self.write(rel, text, overwrite=overwrite)
        return SavedMemory(self._ref(rel), Path(self._root.abspath(rel)), replaced)

    def remove(self, rel: str) -> None:
        """Delete the memory file at ``rel`` (a symlinked memory loses its link, never its target)."""
        ref = self._ref(rel)
        parts = self._parts(rel, ref)
        with opened_root(self._root) as root_fd, opened_folder(root_fd, parts[:-1], ref, create=False) as folder_fd:
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
            self._remove_empty_folders(root_fd, parts[:-1], ref)
        self.forget_learning_of_gone([rel], removed=ref)

    @staticmethod
    def _remove_empty_folders(root_fd: int, folders: Sequence[str], ref: str) -> None:
        """Remove the folders that held ``ref`` and are empty now, the deepest first, never the root:
        a folder holding anything (a hidden file included) stays, and so do those above it."""
        for depth in range(len(folders), 0, -1):
            try:
                with opened_folder(root_fd, folders[: depth - 1], ref, create=False) as parent_fd:
                    os.rmdir(folders[depth - 1], dir_fd=parent_fd)
            except (OSError, MemoryStoreError):
                return

    def forget_learning_of_gone(self, paths: Iterable[str], *, removed: str | None = None) -> int:
        """Forget what was learned for those of ``paths`` whose memory file is gone, at once (the learned
        file is compacted, so the words leave the disk); how many entries went. A learned file that is
        refused (a symlink, not a regular file) is never read, so it holds nothing to forget. ``removed``:
        the ref just removed, which a failure's message names."""
        try:
            return self._learned.forget_gone(paths)
        except MemoryPathError:
            return 0
        except MemoryStoreError as exc:
            if removed is None:
                raise
            raise MemoryStoreError(f"removed {removed}, but what was learned for it stays: {exc}") from None

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
        with ``live_paths`` (relative paths of the root's memories), drop entries of memories that are gone
        (not among them, and nothing at their path).
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

    # --- the agents' index files ---------------------------------------------------------------

    def index_files(self) -> list[IndexFile]:
        """Every ``MEMORY.md`` below the root (in the folders the scan enters), read or refused with
        its reason: a symlink, not a regular file, over ``memory_store.INDEX_MAX_BYTES``."""
        return find_index_files(self._root)

    def replace_index(self, rel: str, data: bytes, *, expected: bytes) -> Path:
        """Replace the ``MEMORY.md`` at ``rel`` with ``data`` atomically, only while its bytes are still
        ``expected``, after keeping them in ``.recall-kit/index-backups/``; returns the backup's path.
        MemoryPathError for a symlink, a file that is not regular, or one of another user's;
        MemoryStoreError when it changed meanwhile (nothing written) or cannot be written."""
        return replace_index(self._root, rel, data, expected)

    # --- what a store reads --------------------------------------------------------------------

    @property
    def given_sidecar(self) -> Path | None:
        """The file outside the root that keeps its enrichment, when one was given (a watching store
        watches it beside the root); None when the root keeps its own."""
        return None if self._sidecar.inside else Path(self._sidecar.path)

    def read_enrichment(self) -> tuple[Versions, list[SkippedFile]]:
        """What the root's sidecar holds (relative path -> its entries; a missing sidecar is empty), read as
        the store reads it, and the errors a snapshot lists for it: its refusal, or each bad line."""
        refused = self._sidecar.refusal(self._root)
        entries, problems = self._sidecar.read(self._root) if refused is None else ({}, [])
        return entries, _file_errors(self.label, self._sidecar.label_path(), refused, problems)

    def learning_since(self, version: int | None) -> tuple[LearnedChanges | None, list[SkippedFile]]:
        """What the root's learned file holds now, as a change since ``version`` of an earlier read (None:
        every entry), and the errors a snapshot lists for it; no change (None) when the file is refused."""
        refused = self._learned.refusal()
        changes = self._learned.read_changes(version) if refused is None else None
        problems = changes.problems if changes is not None else []
        return changes, _file_errors(self.label, LEARNED_PATH, refused, problems)

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


def _file_errors(
    label: str, where: str, refused: tuple[str, str] | None, problems: list[SidecarProblem]
) -> list[SkippedFile]:
    """A sidecar's errors in root ``label``: its refusal, or else each problem at ``where`` (``where:line``
    for a line's)."""
    if refused is not None:
        return [SkippedFile(label, *refused)]
    return [SkippedFile(label, f"{where}:{line}" if line else where, reason) for line, reason in problems]


def _about(exc: MemoryStoreError, ref: str, doing: str) -> MemoryStoreError:
    """The same kind of error, its reason now naming ``ref``."""
    prefix = "refused" if isinstance(exc, MemoryPathError) else doing
    return type(exc)(f"{prefix} {ref}: {exc}")



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
