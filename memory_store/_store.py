"""MemoryStore: immutable snapshots of one or more memory roots, kept current by a watcher."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Union

from memory_store._errors import MemoryPathError, MemoryStoreError, StoreTimeoutError
from memory_store._learned_format import LearnedEntry, LearningUpdate
from memory_store._root import MemoryRoot, checked_label, default_label, given_path
from memory_store._root_rule import broad_root_refusal
from memory_store._scan import MAX_ROOT_ENTRIES, Reuse, Root, is_hidden
from memory_store._sidecar import EnrichmentEntry
from memory_store._state import StoreState
from memory_store._types import DEFAULT_MAX_BYTES, Snapshot

if TYPE_CHECKING:
    from memory_store._watch import Batch, Watcher

RootSpec = Union[str, "os.PathLike[str]", tuple[str, Union[str, "os.PathLike[str]"]]]
Subscriber = Callable[[Snapshot], None]
PathSpec = Union[str, "os.PathLike[str]"]
EnrichmentSpec = Union[bool, Mapping[str, PathSpec]]

# Folds an editor's write-temp-then-rename (and a burst of saves) into one update.
# bench/store_scaling.py: write-to-visible is this window plus 1-5 ms, at 100 to 10,000 files.
DEFAULT_DEBOUNCE_MS = 50
MAX_DEBOUNCE_MS = 60_000  # a window of a minute already holds every edit back by a minute


def debounce_refusal(debounce_ms: float) -> str | None:
    """Why ``debounce_ms`` cannot be a watcher's debounce window, in one line, or None: a number of
    milliseconds from 0 to MAX_DEBOUNCE_MS (NaN, which no comparison passes, never applied an edit)."""
    if isinstance(debounce_ms, bool) or not isinstance(debounce_ms, (int, float)):
        return f"debounce_ms must be a number of milliseconds, got {type(debounce_ms).__name__}"
    if not 0 <= debounce_ms <= MAX_DEBOUNCE_MS:
        return f"debounce_ms must be from 0 to {MAX_DEBOUNCE_MS:,} milliseconds, got {debounce_ms!r}"
    return None

_log = logging.getLogger(__name__)


class MemoryStore:
    """Serves immutable snapshots of memory files under one or more roots.

    Open with ``MemoryStore.open(...)``. ``snapshot()`` is a plain reference read
    and never blocks; updates build the next snapshot on the watcher's thread and
    swap it in, then call subscribers there.
    """

    def __init__(
        self,
        roots: list[Root],
        *,
        max_bytes: int,
        debounce_ms: float,
        sidecars: Mapping[str, PathSpec] | None = None,
        read_enrichment: bool = True,
        reuse: Reuse | None = None,
        learned: bool = True,
        max_entries: int | None = None,
    ) -> None:
        self._roots = roots
        self._max_entries = max_entries
        given = sidecars or {}
        self._files = {
            root.label: MemoryRoot(root.path, label=root.label, sidecar=given.get(root.label), max_bytes=max_bytes)
            for root in roots
        }
        # enrichment=False reads no sidecar; recording still goes to each root's own
        enriched = dict(self._files) if read_enrichment else {}
        self._state = StoreState(roots, max_bytes, enriched, reuse, dict(self._files) if learned else {}, max_entries)
        self._debounce_s = debounce_ms / 1000.0
        self._lock = threading.Lock()  # serialises state changes and publishing
        self._published = threading.Condition()
        self._snapshot = Snapshot.build(0, {}, ())
        self._subscribers: list[Subscriber] = []
        self._watcher: Watcher | None = None
        self._closed = False
        self._live: dict[str, set[str]] = {}  # label -> its memories' paths in the current snapshot, once asked
        self._live_frozen: dict[str, frozenset[str]] = {}  # the same, one object while they are unchanged

    @classmethod
    def open(
        cls,
        *roots: RootSpec,
        watch: bool = True,
        debounce_ms: float = DEFAULT_DEBOUNCE_MS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        allow_missing: bool = False,
        enrichment: EnrichmentSpec = True,
        reuse: Reuse | None = None,
        learned: bool = True,
        max_entries: int | None = MAX_ROOT_ENTRIES,
    ) -> "MemoryStore":
        """Scan ``roots`` into snapshot version 1 and, with ``watch``, keep it current.

        A root is a path or a ``(label, path)`` tuple; the default label is the
        folder's name, made unique with "-2", "-3". A root that does not exist
        raises MemoryStoreError unless ``allow_missing`` (then, when watching,
        it is picked up once it appears). Roots may overlap (nested, or a symlink
        to another): a file is one memory, listed under the first root given that
        reaches it. Folders more than MAX_FOLDER_DEPTH levels down are reported, not read.

        ``enrichment``: True reads each root's own sidecar (``.recall-kit/enrichment.jsonl``);
        False reads none; a mapping ``{root label or path: sidecar path}`` reads those
        roots' sidecars from the given files instead (the other roots keep their own).
        Sidecars are watched like the memories, and ``record_enrichment`` writes to the same files.

        ``reuse(abspath, lstat)`` is asked before each regular file of the first
        scan is read: a doc it returns stands in for reading and parsing that file (a
        caller's cache of unchanged files). Fresh enrichment is attached to it as to any doc.
        A ``DeferredDoc`` it returns is built only when a reader first looks at it.

        ``learned``: True attaches what each root's ``.recall-kit/learned.jsonl`` holds for a memory's
        path to its doc (``MemoryDoc.learned``), watched like the sidecars; False attaches nothing
        (``record_learning`` still writes the file).

        ``debounce_ms`` outside 0 to MAX_DEBOUNCE_MS raises MemoryStoreError (``debounce_refusal``).

        A root that is the file system root, the home folder or a folder above it raises MemoryStoreError
        (``broad_root_refusal``): no door opens one.

        ``max_entries`` (MAX_ROOT_ENTRIES unless given; None: no bound): a root whose folder holds more visible
        files and folders is neither read nor watched, and the snapshot's errors say so. It is checked at
        open, whenever the root's folder changes identity (a symlinked root retargeted, the folder replaced
        by a symlink) before it is watched, and at every rescan of the whole root.
        """
        refusal = debounce_refusal(debounce_ms) or _options_refusal(roots, max_bytes, max_entries, reuse, enrichment)
        if refusal is not None:
            raise MemoryStoreError(refusal)
        for spec in roots:
            refusal = broad_root_refusal(os.fspath(spec[1] if isinstance(spec, tuple) else spec))
            if refusal is not None:
                raise MemoryStoreError(refusal)
        resolved = _resolve_roots(roots)
        sidecars = _mapped_sidecars(resolved, enrichment)
        if not allow_missing:
            for root in resolved:
                if not os.path.isdir(root.path):
                    what = "is not a folder" if os.path.exists(root.path) else "does not exist"
                    raise MemoryStoreError(f"memory root {what}: {root.path}")
        store = cls(
            resolved,
            max_bytes=max_bytes,
            debounce_ms=debounce_ms,
            sidecars=sidecars,
            read_enrichment=enrichment is not False,
            reuse=reuse,
            learned=learned,
            max_entries=max_entries,
        )
        try:
            store._start(watch)
        except BaseException:
            store.close()  # never leave a watcher thread behind a failed open
            raise
        return store

    # --- reading -----------------------------------------------------------------

    @property
    def roots(self) -> tuple[tuple[str, str], ...]:
        """(label, absolute path) of each root, in the order given."""
        return tuple((root.label, root.path) for root in self._roots)

    @property
    def watching(self) -> bool:
        """Whether a watcher keeps the snapshots current (False once closed or when opened with ``watch=False``)."""
        return self._watcher is not None and not self._closed

    def snapshot(self) -> Snapshot:
        """The current snapshot. Never blocks."""
        return self._snapshot

    def wait_for_version(self, version: int, timeout: float = 5.0) -> Snapshot:
        """Block until a snapshot with at least ``version`` is published.

        Raises TimeoutError when none arrives in ``timeout`` seconds, and
        MemoryStoreError at once when the store is not watching (closed or one-shot).
        """
        with self._published:
            reached = self._published.wait_for(
                lambda: self._snapshot.version >= version or not self.watching, timeout
            )
            if self._snapshot.version >= version:
                return self._snapshot
            if not reached:
                raise StoreTimeoutError(
                    f"memory store: version {version} not reached in {timeout:g} s (at {self._snapshot.version})"
                )
            raise MemoryStoreError(f"memory store is not watching; it stays at version {self._snapshot.version}")

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(snapshot)`` after each new snapshot is swapped in; returns an unsubscribe function.

        Callbacks run on the store's watcher thread, in version order; keep them short.
        """
        if not callable(callback):
            raise MemoryStoreError(f"subscribe takes a callable, got {type(callback).__name__}")
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    # --- files -------------------------------------------------------------------

    def root(self, label: str) -> MemoryRoot:
        """The files of the root labelled ``label``: where memories are written, removed and read."""
        try:
            return self._files[label]
        except KeyError:
            raise MemoryPathError(f"unknown root {label!r}; roots: {sorted(self._files)}") from None

    def resolve(self, ref: str) -> Path:
        """The file of the memory ``ref`` (``<root label>/<path>``), once it is known to be one the store reads."""
        files, rel = self._split(ref)
        return files.resolve(rel)

    def read_bytes(self, ref: str) -> bytes:
        """The bytes of the memory file ``ref``, read as the scan reads it (confined, size-capped)."""
        files, rel = self._split(ref)
        return files.read_bytes(rel)

    def remove(self, ref: str) -> None:
        """Delete the memory file ``ref``; a watching store drops it from its next snapshot."""
        files, rel = self._split(ref)
        files.remove(rel)

    def record_enrichment(self, label: str, entries: Iterable[EnrichmentEntry]) -> Path:
        """Merge ``entries`` into the sidecar this store reads for root ``label`` (its own or the one given
        at open), dropping entries of memories that are neither in the current snapshot nor on disk (one
        that fails to parse for now keeps its entry). Returns the sidecar's path."""
        return self.root(label).record_enrichment(entries, self._live_paths(label))

    def record_learning(self, label: str, updates: Iterable[LearningUpdate]) -> Path:
        """Merge ``updates`` into root ``label``'s learned file, dropping entries of memories neither in the
        current snapshot nor on disk. A store that is not watching shows them in its next snapshot at once; a
        watching one when its watcher reports the write. Returns the file's path."""
        files = self.root(label)
        path = files.record_learning(updates, self._live_paths(label))
        self._reread_learned_unwatched(label)
        return path

    def _live_paths(self, label: str) -> frozenset[str]:
        """The relative paths of root ``label``'s memories in the current snapshot (kept current by ``_swap``)."""
        with self._lock:
            frozen = self._live_frozen.get(label)
            if frozen is not None:
                return frozen  # the same object until they change: the learned file skips a prune it has done
            live = self._live.get(label)
            if live is None:
                prefix = label + "/"
                live = {ref[len(prefix) :] for ref in self._snapshot.docs.keys() if ref.startswith(prefix)}
                self._live[label] = live
            frozen = self._live_frozen[label] = frozenset(live)
            return frozen

    def clear_learning(self, label: str | None = None, paths: Iterable[str] | None = None) -> int:
        """Forget what was learned for ``paths`` (relative to root ``label``; None: all) of root ``label``
        (None: of every root); how many entries went."""
        labels = [self.root(label).label] if label is not None else list(self._files)
        wanted = None if paths is None else list(paths)
        removed = 0
        for name in labels:
            removed += self._files[name].clear_learning(wanted)
            self._reread_learned_unwatched(name)
        return removed

    def learned_entries(self, label: str) -> dict[str, LearnedEntry]:
        """What root ``label``'s learned file holds now: relative path -> entry (its problems are the snapshot's errors)."""
        return self.root(label).read_learning()[0]

    def refresh_learned(self) -> Snapshot:
        """Re-read every root's learned file now and publish what changed (a store that is not watching
        picks up another process's learning this way); the current snapshot."""
        self._reread_learned(list(self._files))
        return self._snapshot

    def _reread_learned_unwatched(self, label: str) -> None:
        if not self.watching and not self._closed:
            self._reread_learned([label])

    def _reread_learned(self, labels: list[str]) -> None:
        with self._lock:
            if self._closed:
                return
            for root in self._roots:
                if root.label in labels:
                    self._state.reload_learned(root)
            published = self._publish_locked()
        if published is not None:
            self._notify(*published)

    def _publish_locked(self) -> tuple[list[Subscriber], Snapshot] | None:
        # under self._lock: the next snapshot, if anything changed, and whom to tell after the lock
        snapshot = self._state.publish(self._snapshot.version + 1)
        if snapshot is None:
            return None
        self._swap(snapshot)
        return list(self._subscribers), snapshot

    def _split(self, ref: str) -> tuple[MemoryRoot, str]:
        label, _, rel = ref.partition("/")
        files = self._files.get(label)
        if files is None:
            raise MemoryPathError(
                f"unknown root {label!r} in {ref!r}; refs look like <root>/<path>.md, roots: {sorted(self._files)}"
            )
        return files, rel

    # --- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Stop watching and join the watcher threads. The last snapshot stays readable."""
        if self._closed:
            return
        self._closed = True
        if self._watcher is not None:
            self._watcher.stop()
        with self._published:
            self._published.notify_all()

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "watching" if self.watching else "closed" if self._closed else "one-shot"
        return f"<MemoryStore {mode} v{self._snapshot.version} roots={[r.label for r in self._roots]}>"

    # --- updating ----------------------------------------------------------------

    def _start(self, watch: bool) -> None:
        with self._lock:
            if watch:
                from memory_store._watch import Watcher  # watchdog and its threads: a one-shot store never loads them

                # Watch first, then scan: a file written in between shows up as an event.
                given = [files.given_sidecar for files in self._state.enriched.values()]
                outside = [str(path) for path in given if path is not None]
                self._watcher = Watcher(
                    [r.path for r in self._roots], self._apply_batch, self._debounce_s, extra_files=outside,
                    max_entries=self._max_entries,
                )
                self._watcher.start()
                self._watcher.sync_watches()
            for root in self._roots:
                self._state.rescan(root)
            snapshot = self._state.publish(1)
        assert snapshot is not None
        self._swap(snapshot)

    def _apply_batch(self, batch: Batch, watcher: Watcher) -> None:
        with self._lock:
            if self._closed:
                return
            fresh = watcher.sync_watches()
            whole = {r.path for r in self._roots} if batch.rescan_all else set(fresh)
            for folder in batch.folders:  # a root itself, or a folder above it, moved or vanished
                whole.update(r.path for r in self._roots if r.path == folder or r.path.startswith(folder + os.sep))
            touched = batch.files | batch.folders
            for root in self._roots:
                if root.path in whole:
                    self._state.rescan(root)  # re-reads the sidecar too
                    continue
                if self._state.sidecar_touched(root, touched):
                    self._state.reload_enrichment(root)
                if self._state.learned_touched(root, touched):
                    self._state.reload_learned(root)
                rels = sorted(rel for p in batch.folders if (rel := root.rel(p)) and not is_hidden(rel))
                kept: list[str] = []
                for rel in rels:  # sorted, so a parent comes before its children
                    if not any(rel.startswith(k + "/") for k in kept):
                        kept.append(rel)
                for rel in kept:
                    self._state.rescan(root, rel)
                for path in batch.files:
                    rel = root.rel(path)
                    if rel and not any(rel == k or rel.startswith(k + "/") for k in kept):
                        self._state.refresh(root, rel)
                self._state.refresh_links(root)
            published = self._publish_locked()
            removed = published[1].removed if published is not None else frozenset()
            forget = {label: self._state.learned_of(label, removed) for label in self._state.learning} if removed else {}
        self._forget_removed(forget)  # before subscribers hear of the removal: its words are gone by then
        if published is not None:
            self._notify(*published)

    def _forget_removed(self, forget: dict[str, list[str]]) -> None:
        """Forget at once what was learned for the memories a snapshot removed whose files are gone (a
        plain ``rm``): their words leave the learned file now, not at the next learning update."""
        for label, paths in forget.items():
            if paths:
                try:
                    self._state.learning[label].forget_learning_of_gone(paths)
                except MemoryStoreError as exc:
                    _log.warning("memory store: %s", exc)

    @staticmethod
    def _notify(subscribers: list[Subscriber], snapshot: Snapshot) -> None:
        for callback in subscribers:
            try:
                callback(snapshot)
            except Exception:
                _log.exception("memory store subscriber %r failed", callback)

    def _swap(self, snapshot: Snapshot) -> None:
        for label, live in self._live.items():  # by the delta: a full pass costs ms at 10,000 memories
            prefix = label + "/"
            before = len(live)
            live.difference_update(ref[len(prefix) :] for ref in snapshot.removed if ref.startswith(prefix))
            gone = before - len(live)
            live.update(ref[len(prefix) :] for ref in snapshot.changed if ref.startswith(prefix))
            if gone or len(live) != before:
                self._live_frozen.pop(label, None)
        with self._published:
            self._snapshot = snapshot
            self._published.notify_all()


def _mapped_sidecars(roots: list[Root], spec: EnrichmentSpec) -> dict[str, PathSpec]:
    """Root label -> the sidecar given for it at open; the other roots keep their own."""
    if spec is True or spec is False:
        return {}
    if not isinstance(spec, Mapping):
        raise MemoryStoreError("enrichment must be True, False or a mapping of root label or path to sidecar path")
    mapped: dict[str, PathSpec] = {}
    for key, path in spec.items():
        key_path = given_path(key)
        match = [root for root in roots if key in (root.label, root.path) or key_path == root.path]
        if not match:
            raise MemoryStoreError(f"enrichment given for an unknown root: {os.fspath(key)!r}")
        for root in match:
            mapped[root.label] = path
    return mapped


def root_labels(*paths: str | os.PathLike[str]) -> list[str]:
    """The label each of ``paths`` gets as a root of one store opened with them in this order (a ref
    is ``<label>/<path>``): what a record of refs, such as the recall trail, is read back with."""
    return [root.label for root in _resolve_roots(paths)]


def _options_refusal(
    roots: tuple[object, ...], max_bytes: object, max_entries: object, reuse: object, enrichment: object
) -> str | None:
    """Why ``MemoryStore.open``'s arguments cannot be used, in one line, or None: what a wrong type or
    bound would otherwise do deep inside (a traceback, or every memory skipped with max_bytes=-1)."""
    for n, spec in enumerate(roots):
        pair = isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str) and isinstance(spec[1], (str, os.PathLike))
        if not (isinstance(spec, (str, os.PathLike)) or pair):
            return f"root {n + 1} must be a path or a (label, path) pair, got {type(spec).__name__}"
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        return f"max_bytes must be a whole number of bytes, 1 or more; got {max_bytes!r}"
    if max_entries is not None and (isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1):
        return f"max_entries must be None or a whole number, 1 or more; got {max_entries!r}"
    if reuse is not None and not callable(reuse):
        return f"reuse must be None or a callable, got {type(reuse).__name__}"
    if not isinstance(enrichment, bool) and not (
        isinstance(enrichment, Mapping) and all(isinstance(v, (str, os.PathLike)) for v in enrichment.values())
    ):
        return "enrichment must be True, False or a mapping of root label or path to sidecar path"
    return None


def _resolve_roots(specs: tuple[RootSpec, ...]) -> list[Root]:
    if not specs:
        raise MemoryStoreError("no memory root given")
    roots: list[Root] = []
    taken: set[str] = set()
    for spec in specs:
        label, raw = spec if isinstance(spec, tuple) else (None, spec)
        path = given_path(raw)
        if label is None:
            base = default_label(path)
            label, n = base, 1
            while label in taken:
                n += 1
                label = f"{base}-{n}"
        elif checked_label(label) in taken:
            raise MemoryStoreError(f"two roots share the label {label!r}")
        taken.add(label)
        roots.append(Root(label, path))
    return roots
