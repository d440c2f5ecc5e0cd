"""The store's mutable working state, and the immutable snapshots built from it.

Only one thread mutates a StoreState at a time (the store holds a lock); readers
never see it, they see the Snapshot it last built.

A file is one memory whatever roots reach it (nested roots, a root and a symlink to it): of the
refs naming one file (by device and inode), those of the first root given are published, and the
other roots' are held back, silently, until that root no longer has the file. Only docs with equal
bytes can be one file, so only those are ever compared.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from collections.abc import Iterable

from memory_store._learned_format import LearnedEntry
from memory_store._root import MemoryRoot
from memory_store._sidecar import Versions, entry_for
from memory_store._scan import (
    Candidate,
    Entry,
    Reuse,
    MAX_FOLDER_DEPTH,
    Root,
    folder_depth,
    is_hidden,
    is_memory_name,
    open_beneath,
    open_root,
    read_at,
    shallow_part,
    symlinked_folder_error,
    walk,
)
from memory_store._types import DeferredDoc, Docs, Learned, SkippedFile, MemoryDoc, Snapshot, StoredDoc

_GONE = (errno.ENOENT, errno.ELOOP, errno.ENOTDIR)  # the path is not a folder we may enter (any more)


class StoreState:
    """Per-root entries (relative path -> doc or error) plus the delta since the last snapshot."""

    def __init__(
        self,
        roots: list[Root],
        max_bytes: int,
        enriched: dict[str, MemoryRoot] | None = None,
        reuse: Reuse | None = None,
        learning: dict[str, MemoryRoot] | None = None,
        max_entries: int | None = None,
    ) -> None:
        self.roots = roots
        self.max_entries = max_entries  # a root over it is neither read nor watched: one error says so
        self.reuse = reuse  # consulted by the first scan only: later reads always go to the file
        self.max_bytes = max_bytes
        self.enriched = dict(enriched or {})  # label -> the root whose sidecar is read; others are not enriched
        self.learning = dict(learning or {})  # label -> the root whose learned file is read; others learn nothing
        self._learned: dict[str, dict[str, Learned]] = {root.label: {} for root in roots}
        self._learned_entries: dict[str, dict[str, LearnedEntry]] = {root.label: {} for root in roots}
        self._learned_versions: dict[str, int] = {}  # label -> the version of its learned file last read
        self._learned_errors: dict[str, SkippedFile] = {}  # their own: the sidecar folder's refusal may be in both
        self._entries: dict[str, dict[str, Entry]] = {root.label: {} for root in roots}  # as read, unenriched
        self._links: dict[str, set[str]] = {root.label: set() for root in roots}  # rels read via a symlink
        self._enrichment: dict[str, Versions] = {root.label: {} for root in roots}
        self._sidecar_errors: dict[str, list[str]] = {root.label: [] for root in roots}
        self._missing: dict[str, SkippedFile] = {}
        self._docs: dict[str, StoredDoc] = {}  # as published: with fresh enrichment attached
        self._held: dict[str, StoredDoc] = {}  # docs of files an earlier root also reaches: not published
        self._by_hash: dict[str, set[str]] = {}  # content hash -> refs of the docs (published or held) with it
        self._unsettled: set[str] = set()  # content hashes whose refs may now name one file from two roots
        self._rank = {root.label: i for i, root in enumerate(roots)}  # the first root given owns a shared file
        self._by_label = {root.label: root for root in roots}
        self._errors: dict[str, SkippedFile] = {}
        self._touched: set[str] = set()
        self._published: Snapshot | None = None

    # --- reading the file system -------------------------------------------------

    def rescan(self, root: Root, under: str = "") -> None:
        """Re-read a whole root (``under`` = "") or one subtree, dropping what is gone; a subtree
        below MAX_FOLDER_DEPTH is rescanned from its first folder too deep to enter (it is reported)."""
        if under and is_hidden(under):
            return
        under = shallow_part(under)
        links: set[str] = set()
        try:
            root_fd = open_root(root)
        except OSError as exc:
            under = ""
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                self._set_missing(root)
                found: dict[str, Entry] = {}
            else:
                self._clear_missing(root)
                reason = "permission denied" if isinstance(exc, PermissionError) else exc.strerror
                found = {".": SkippedFile(root.label, ".", f"unreadable folder: {reason}")}
        else:
            self._clear_missing(root)
            try:
                is_folder = not under or _is_folder(root_fd, under)
                if is_folder:
                    first_scan = self._published is None
                    reuse = self.reuse if first_scan else None
                    bound = None if under else self.max_entries  # a whole root is bounded; a subtree of one is not
                    found, links = walk(root, root_fd, under, self.max_bytes, reuse, bound)
            finally:
                os.close(root_fd)
            if not is_folder:
                self._drop_under(root, under)  # the folder is gone, or became a file or a symlink
                self.refresh(root, under)
                return
        if not under:
            self.reload_enrichment(root)
            self.reload_learned(root)
        entries = self._entries[root.label]
        prefix = f"{under}/" if under else ""
        stale = [rel for rel in entries if rel not in found and (not under or rel == under or rel.startswith(prefix))]
        for rel in stale:
            self._put(root, rel, None)
        for rel, entry in found.items():
            self._put(root, rel, entry)
        self._links[root.label].update(rel for rel in links if rel in self._entries[root.label])

    def refresh_links(self, root: Root) -> None:
        """Re-read the root's symlinked memories: the watcher reports changes to their targets, not to them."""
        for rel in list(self._links[root.label]):
            self.refresh(root, rel)

    def refresh(self, root: Root, rel: str) -> None:
        """Re-read one path reported by the watcher: a file, a symlink, or a folder."""
        if not rel:
            self.rescan(root)
            return
        if is_hidden(rel):
            return
        parent_rel, _, name = rel.rpartition("/")
        if folder_depth(parent_rel) > MAX_FOLDER_DEPTH:
            self.rescan(root, parent_rel)  # in a folder the store does not enter: that folder is what changed
            return
        try:
            root_fd = open_root(root)
        except OSError:
            self._put(root, rel, None)  # the root itself went; its own event rescans it
            return
        try:
            try:
                parent_fd = open_beneath(root_fd, parent_rel)
            except OSError:
                self._put(root, rel, None)  # its folder is gone or no longer a folder: a fresh scan lists nothing
                return
            try:
                entry, is_folder = self._read_path(root, root_fd, parent_fd, rel, name)
            finally:
                os.close(parent_fd)
        finally:
            os.close(root_fd)
        if is_folder:
            self.rescan(root, rel)
        else:
            self._put(root, rel, entry)

    def _read_path(self, root: Root, root_fd: int, parent_fd: int, rel: str, name: str) -> tuple[Entry | None, bool]:
        """(entry for ``rel`` or None, whether it is a folder), looked at in its open parent folder."""
        try:
            info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except OSError:
            return None, False  # gone; a vanished folder arrives as a folder event and goes through rescan()
        links = self._links[root.label]
        if stat.S_ISDIR(info.st_mode):
            return None, True
        if stat.S_ISLNK(info.st_mode) and not is_memory_name(name):
            return symlinked_folder_error(root, rel, os.path.realpath(root.path)), False
        if not is_memory_name(name):
            return None, False
        kind = "symlink" if stat.S_ISLNK(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
        links.add(rel) if kind == "symlink" else links.discard(rel)
        return read_at(root, root_fd, parent_fd, rel, kind, self.max_bytes, os.path.realpath(root.path)), False

    # --- enrichment --------------------------------------------------------------

    def sidecar_touched(self, root: Root, paths: set[str]) -> bool:
        """Whether any of ``paths`` (absolute, as under the given root) is the root's sidecar or a folder above it."""
        files = self.enriched.get(root.label)
        return files is not None and _touches(paths, str(files.sidecar_path))

    def reload_enrichment(self, root: Root) -> None:
        """Re-read the root's sidecar; docs whose fresh enrichment changed are re-published."""
        files = self.enriched.get(root.label)
        if files is None:
            return
        new, errors = files.read_enrichment()
        label = root.label
        for ref in self._sidecar_errors[label]:
            self._errors.pop(ref, None)
        for err in errors:
            self._errors[err.ref] = err
        self._sidecar_errors[label] = [err.ref for err in errors]
        old, self._enrichment[label] = self._enrichment[label], new
        entries = self._entries[label]
        for rel in old.keys() | new.keys():
            raw = entries.get(rel)
            if old.get(rel) == new.get(rel) or raw is None or isinstance(raw, SkippedFile):
                continue
            self._reattach(label, rel, raw)

    def _reattach(self, label: str, rel: str, raw: StoredDoc) -> None:
        """Attach fresh enrichment and learned keys to a published or held doc; touched when they changed."""
        ref = f"{label}/{rel}"
        enriched = self._enriched(label, rel, raw)
        holder = self._docs if ref in self._docs else self._held
        old = holder[ref]
        if enriched.enrichment != old.enrichment or enriched.learned != old.learned:
            holder[ref] = enriched
            self._touched.add(ref)

    def _enriched(self, label: str, rel: str, doc: StoredDoc) -> StoredDoc:
        """``doc`` with the enrichment and learned keys the sidecars hold for it now."""
        entry = entry_for(self._enrichment[label].get(rel, ()), doc.content_hash)
        fresh = entry.enrichment if entry is not None else None  # none, or each stale (for other bytes): none
        learned = self._learned[label].get(rel)  # by path: what was learned survives edits
        if isinstance(doc, DeferredDoc):
            same = doc.enrichment == fresh and doc.learned == learned
            return doc if same else doc.with_attached(fresh, learned)
        if doc.enrichment == fresh and doc.learned == learned:
            return doc
        return dataclasses.replace(doc, enrichment=fresh, learned=learned)

    # --- learning ----------------------------------------------------------------

    def learned_touched(self, root: Root, paths: set[str]) -> bool:
        """Whether any of ``paths`` (absolute, as under the given root) is the root's learned file or a folder above it."""
        files = self.learning.get(root.label)
        return files is not None and _touches(paths, str(files.learned_path))

    def learned_of(self, label: str, refs: Iterable[str]) -> list[str]:
        """The relative paths of those of ``refs`` (root ``label``'s) that have something learned."""
        entries, prefix = self._learned_entries.get(label, {}), label + "/"
        return [ref[len(prefix) :] for ref in refs if ref.startswith(prefix) and ref[len(prefix) :] in entries]

    def reload_learned(self, root: Root) -> None:
        """Re-read the root's learned file; docs whose learned keys changed are re-published."""
        files = self.learning.get(root.label)
        if files is None:
            return
        label = root.label
        read, errors = files.learning_since(self._learned_versions.get(label))
        for ref in [ref for ref, err in self._learned_errors.items() if err.scope == label]:
            del self._learned_errors[ref]
        for err in errors:
            self._learned_errors[err.ref] = err
        if read is None or read.entries is not None:
            # An entry the file did not change is the same object as last time: only the others are looked at.
            entries = read.entries if read is not None and read.entries is not None else {}
            old_entries, self._learned_entries[label] = self._learned_entries[label], entries
            changed = [rel for rel, entry in entries.items() if old_entries.get(rel) is not entry]
            changed += old_entries.keys() - entries.keys()
        else:  # the file told what changed since the version last read: at 10,000 memories, no full pass
            entries = self._learned_entries[label]
            for rel, entry in read.delta.items():
                if entry is None:
                    entries.pop(rel, None)
                else:
                    entries[rel] = entry
            changed = list(read.delta)
        if read is not None:
            self._learned_versions[label] = read.version
        else:
            self._learned_versions.pop(label, None)
        learned = self._learned[label]
        raw_entries = self._entries[label]
        for rel in changed:
            entry = entries.get(rel)
            value = entry.learned if entry is not None else None
            if learned.get(rel) == value:
                continue
            if value is None:
                del learned[rel]
            else:
                learned[rel] = value
            raw = raw_entries.get(rel)
            if raw is not None and not isinstance(raw, SkippedFile):
                self._reattach(label, rel, raw)

    # --- snapshots ---------------------------------------------------------------

    def publish(self, version_if_changed: int) -> Snapshot | None:
        """Build the next snapshot when anything changed since the last one, else None."""
        for content_hash in self._unsettled:
            self._settle(content_hash)
        self._unsettled.clear()
        prev = self._published
        if prev is None:
            changed = frozenset(self._docs)
            removed: frozenset[str] = frozenset()
        else:
            # Identity, not equality: an unchanged doc keeps its object, and a deep compare could cost anything.
            changed = frozenset(r for r in self._touched if r in self._docs and self._docs[r] is not _stored(prev, r))
            removed = frozenset(r for r in self._touched if r not in self._docs and r in prev.docs)
        # The sidecar folder refused for both files is one error: the enrichment sidecar's.
        all_errors = {**self._learned_errors, **self._errors}
        errors = tuple(sorted(all_errors.values(), key=lambda e: (e.scope, e.path)))
        self._touched.clear()
        if prev is not None and not changed and not removed and errors == prev.errors:
            return None
        snapshot = Snapshot.build(version_if_changed, self._docs, errors, changed, removed)
        self._published = snapshot
        self.reuse = None  # the first scan is over: let go of the caller's cache
        return snapshot

    # --- bookkeeping -------------------------------------------------------------

    def _put(self, root: Root, rel: str, entry: Entry | None) -> None:
        entries = self._entries[root.label]
        old = entries.get(rel)
        if _same(old, entry):
            return
        ref = f"{root.label}/{rel}"
        self._touched.add(ref)
        if isinstance(old, SkippedFile):
            del self._errors[ref]
        elif old is not None:
            if self._docs.pop(ref, None) is None:
                del self._held[ref]
            self._forget_hash(ref, old.content_hash)
        if entry is None:
            del entries[rel]
            self._links[root.label].discard(rel)
            return
        entries[rel] = entry
        if isinstance(entry, SkippedFile):
            self._errors[ref] = entry
        else:
            self._docs[ref] = self._enriched(root.label, rel, entry)
            refs = self._by_hash.setdefault(entry.content_hash, set())
            refs.add(ref)
            if len(refs) > 1:
                self._unsettled.add(entry.content_hash)

    # --- one file, one memory ----------------------------------------------------

    def _forget_hash(self, ref: str, content_hash: str) -> None:
        refs = self._by_hash.get(content_hash)
        if refs is None:
            return
        refs.discard(ref)
        if not refs:
            del self._by_hash[content_hash]
        else:
            self._unsettled.add(content_hash)  # a doc it held back may be the file's only one now

    def _settle(self, content_hash: str) -> None:
        """Publish exactly one root's refs to each file among the docs with these bytes."""
        refs = self._by_hash.get(content_hash, set())
        files: dict[object, list[str]] = {}
        for ref in refs:
            files.setdefault(self._identity(ref), []).append(ref)
        for identity, same_file in files.items():
            first = min(self._rank[ref.partition("/")[0]] for ref in same_file)
            # of the first root's refs to it, the file itself before a symlink to it, then the first by name
            kept = min((ref for ref in same_file if self._rank[ref.partition("/")[0]] == first),
                       key=lambda ref: (self._is_link(ref), ref))
            for ref in same_file:
                shown = identity is None or ref == kept
                if shown and ref in self._held:
                    self._docs[ref] = self._held.pop(ref)
                    self._touched.add(ref)
                elif not shown and ref in self._docs:
                    self._held[ref] = self._docs.pop(ref)
                    self._touched.add(ref)

    def _identity(self, ref: str) -> object:
        """(device, inode) of the file ``ref`` reads (a symlinked memory's target); None when it cannot
        be told (gone meanwhile: the watcher's event for it follows), and such a ref is never held back."""
        label, _, rel = ref.partition("/")
        try:
            info = os.stat(self._by_label[label].abspath(rel))
        except OSError:
            return None
        return (info.st_dev, info.st_ino)

    def _is_link(self, ref: str) -> bool:
        label, _, rel = ref.partition("/")
        try:
            return stat.S_ISLNK(os.lstat(self._by_label[label].abspath(rel)).st_mode)
        except OSError:
            return False

    def _drop_under(self, root: Root, rel: str) -> None:
        """A path vanished: drop it, and anything below it if it was a folder."""
        entries = self._entries[root.label]
        self._put(root, rel, None)
        prefix = rel + "/"
        for child in [r for r in entries if r.startswith(prefix)]:
            self._put(root, child, None)

    def _set_missing(self, root: Root) -> None:
        if root.label not in self._missing:
            err = SkippedFile(root.label, root.path, "root folder does not exist")
            self._missing[root.label] = err
            self._errors[f"{root.label}/{root.path}"] = err

    def _clear_missing(self, root: Root) -> None:
        if self._missing.pop(root.label, None) is not None:
            del self._errors[f"{root.label}/{root.path}"]


def _stored(snapshot: Snapshot, ref: str) -> StoredDoc | None:
    try:
        return snapshot.docs.stored(ref) if isinstance(snapshot.docs, Docs) else snapshot.docs[ref]
    except KeyError:
        return None


def _same(old: Entry | None, new: Entry | None) -> bool:
    """Cheap equality: a doc is the same when its source and bytes are; never compare parsed structures."""
    if old is new:
        return True
    if old is None or new is None:
        return False
    if isinstance(old, DeferredDoc):
        old = old.load()
    if isinstance(new, DeferredDoc):
        new = new.load()
    if isinstance(old, MemoryDoc) and isinstance(new, MemoryDoc):
        return (old.content_hash, old.size, old.mtime, old.abspath) == (
            new.content_hash,
            new.size,
            new.mtime,
            new.abspath,
        )
    if isinstance(old, SkippedFile) and isinstance(new, SkippedFile):
        return old == new
    return False


def _is_folder(root_fd: int, rel: str) -> bool:
    """Whether ``rel`` is a real folder below the root (not a symlink to one)."""
    try:
        os.close(open_beneath(root_fd, rel))
    except OSError as exc:
        return exc.errno not in _GONE  # EACCES: a folder we may not read; the walk reports it
    return True


def _touches(paths: set[str], target: str) -> bool:
    """Whether any of ``paths`` (absolute) is ``target`` or a folder above it."""
    return any(p == target or target.startswith(p.rstrip(os.sep) + os.sep) for p in paths)
