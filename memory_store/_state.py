"""The store's mutable working state, and the immutable snapshots built from it.

Only one thread mutates a StoreState at a time (the store holds a lock); readers
never see it, they see the Snapshot it last built.
"""

from __future__ import annotations

import os
import stat
from typing import Callable

from memory_store._scan import (
    Candidate,
    Entry,
    Root,
    is_hidden,
    is_memory_name,
    list_candidates,
    read_candidate,
    symlinked_folder_error,
)
from memory_store._types import LoadError, MemoryDoc, Snapshot


class StoreState:
    """Per-root entries (relative path -> doc or error) plus the delta since the last snapshot."""

    def __init__(self, roots: list[Root], max_bytes: int, reuse: Callable[[str, int, int], MemoryDoc | None] | None = None) -> None:
        self.roots = roots
        self.reuse = reuse  # asked once per file of the first scan, then dropped
        self.max_bytes = max_bytes
        self._entries: dict[str, dict[str, Entry]] = {root.label: {} for root in roots}
        self._links: dict[str, set[str]] = {root.label: set() for root in roots}  # rels read via a symlink
        self._missing: dict[str, LoadError] = {}
        self._docs: dict[str, MemoryDoc] = {}
        self._errors: dict[str, LoadError] = {}
        self._touched: set[str] = set()
        self._published: Snapshot | None = None

    # --- reading the file system -------------------------------------------------

    def rescan(self, root: Root, under: str = "") -> None:
        """Re-read a whole root (``under`` = "") or one subtree, dropping what is gone."""
        if under and is_hidden(under):
            return
        if under and not os.path.isdir(root.abspath(under)):
            self._drop_under(root, under)  # the folder is gone, or became a file
            if os.path.lexists(root.abspath(under)):
                self.refresh(root, under)
            return
        if not os.path.isdir(root.path):
            self._set_missing(root)
            under = ""
            found: dict[str, Entry] = {}
        else:
            self._clear_missing(root)
            found = self._scan(root, under)
        entries = self._entries[root.label]
        prefix = f"{under}/" if under else ""
        stale = [rel for rel in entries if rel not in found and (not under or rel == under or rel.startswith(prefix))]
        for rel in stale:
            self._put(root, rel, None)
        for rel, entry in found.items():
            self._put(root, rel, entry)

    def _scan(self, root: Root, under: str) -> dict[str, Entry]:
        candidates, errors = list_candidates(root, under)
        root_real = os.path.realpath(root.path)
        found: dict[str, Entry] = {err.path: err for err in errors}
        links = self._links[root.label]
        for cand in sorted(candidates, key=lambda c: c.rel):  # a stable doc order for a given tree
            found[cand.rel] = self._reused(cand) or read_candidate(root, cand, self.max_bytes, root_real)
            if cand.kind == "symlink":
                links.add(cand.rel)
        return found

    def _reused(self, cand: Candidate) -> MemoryDoc | None:
        if self.reuse is None or cand.kind != "file" or self._published is not None:
            return None
        try:
            info = os.stat(cand.abspath, follow_symlinks=False)
        except OSError:
            return None  # let the read report it
        return self.reuse(cand.abspath, info.st_size, info.st_mtime_ns) if stat.S_ISREG(info.st_mode) else None

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
        abspath = root.abspath(rel)
        try:
            info = os.lstat(abspath)
        except OSError:
            # Gone. A vanished folder arrives as a folder event and goes through rescan().
            self._put(root, rel, None)
            return
        name = rel.rsplit("/", 1)[-1]
        if stat.S_ISDIR(info.st_mode):
            self.rescan(root, rel)
        elif stat.S_ISLNK(info.st_mode) and not is_memory_name(name):
            self._put(root, rel, symlinked_folder_error(root, rel, abspath, os.path.realpath(root.path)))
        elif is_memory_name(name):
            kind = "symlink" if stat.S_ISLNK(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
            links = self._links[root.label]
            links.add(rel) if kind == "symlink" else links.discard(rel)
            self._put(root, rel, read_candidate(root, Candidate(rel, abspath, kind), self.max_bytes))
        else:
            self._put(root, rel, None)

    # --- snapshots ---------------------------------------------------------------

    def publish(self, version_if_changed: int) -> Snapshot | None:
        """Build the next snapshot when anything changed since the last one, else None."""
        prev = self._published
        if prev is None:
            changed = frozenset(self._docs)
            removed: frozenset[str] = frozenset()
        else:
            changed = frozenset(r for r in self._touched if r in self._docs and self._docs[r] != prev.docs.get(r))
            removed = frozenset(r for r in self._touched if r not in self._docs and r in prev.docs)
        errors = tuple(sorted(self._errors.values(), key=lambda e: (e.scope, e.path)))
        self._touched.clear()
        if prev is not None and not changed and not removed and errors == prev.errors:
            return None
        snapshot = Snapshot.build(version_if_changed, self._docs, errors, changed, removed)
        self._published = snapshot
        return snapshot

    # --- bookkeeping -------------------------------------------------------------

    def _put(self, root: Root, rel: str, entry: Entry | None) -> None:
        entries = self._entries[root.label]
        old = entries.get(rel)
        if old == entry:
            return
        ref = f"{root.label}/{rel}"
        self._touched.add(ref)
        if isinstance(old, LoadError):
            del self._errors[ref]
        elif old is not None:
            del self._docs[ref]
        if entry is None:
            del entries[rel]
            self._links[root.label].discard(rel)
            return
        entries[rel] = entry
        if isinstance(entry, LoadError):
            self._errors[ref] = entry
        else:
            self._docs[ref] = entry

    def _drop_under(self, root: Root, rel: str) -> None:
        """A path vanished: drop it, and anything below it if it was a folder."""
        entries = self._entries[root.label]
        self._put(root, rel, None)
        prefix = rel + "/"
        for child in [r for r in entries if r.startswith(prefix)]:
            self._put(root, child, None)

    def _set_missing(self, root: Root) -> None:
        if root.label not in self._missing:
            err = LoadError(root.label, root.path, "root folder does not exist")
            self._missing[root.label] = err
            self._errors[f"{root.label}/{root.path}"] = err

    def _clear_missing(self, root: Root) -> None:
        if self._missing.pop(root.label, None) is not None:
            del self._errors[f"{root.label}/{root.path}"]
