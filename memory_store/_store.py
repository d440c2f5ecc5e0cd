"""MemoryStore: immutable snapshots of one or more memory roots, kept current by a watcher."""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable, Mapping, Union

from memory_store._sidecar import sidecar_path
from memory_store._scan import Reuse, Root, is_hidden
from memory_store._state import Sidecar, StoreState
from memory_store._types import DEFAULT_MAX_BYTES, Snapshot
from memory_store._watch import Batch, Watcher
from memory_store._errors import MemoryStoreError

RootSpec = Union[str, "os.PathLike[str]", tuple[str, Union[str, "os.PathLike[str]"]]]
Subscriber = Callable[[Snapshot], None]
PathSpec = Union[str, "os.PathLike[str]"]
EnrichmentSpec = Union[bool, Mapping[str, PathSpec]]

# Folds an editor's write-temp-then-rename (and a burst of saves) into one update.
# bench/store_scaling.py: write-to-visible is this window plus 1-5 ms, at 100 to 10,000 files.
DEFAULT_DEBOUNCE_MS = 50

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
        sidecars: dict[str, Sidecar] | None = None,
        reuse: Reuse | None = None,
    ) -> None:
        self._roots = roots
        self._state = StoreState(roots, max_bytes, sidecars, reuse)
        self._debounce_s = debounce_ms / 1000.0
        self._lock = threading.Lock()  # serialises state changes and publishing
        self._published = threading.Condition()
        self._snapshot = Snapshot.build(0, {}, ())
        self._subscribers: list[Subscriber] = []
        self._watcher: Watcher | None = None
        self._closed = False

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
    ) -> "MemoryStore":
        """Scan ``roots`` into snapshot version 1 and, with ``watch``, keep it current.

        A root is a path or a ``(label, path)`` tuple; the default label is the
        folder's name, made unique with "-2", "-3". A root that does not exist
        raises MemoryStoreError unless ``allow_missing`` (then, when watching,
        it is picked up once it appears).

        ``enrichment``: True reads each root's own sidecar (``.recall-kit/enrichment.jsonl``);
        False reads none; a mapping ``{root label or path: sidecar path}`` reads those
        roots' sidecars from the given files instead (the other roots keep their own).
        Sidecars are watched like the memories.

        ``reuse(abspath, size, mtime_ns)`` is asked before each regular file of the first
        scan is read: a doc it returns stands in for reading and parsing that file (a
        caller's cache of unchanged files). Fresh enrichment is attached to it as to any doc.
        A ``DeferredDoc`` it returns is built only when a reader first looks at it.
        """
        resolved = _resolve_roots(roots)
        sidecars = _resolve_sidecars(resolved, enrichment)
        if not allow_missing:
            for root in resolved:
                if not os.path.isdir(root.path):
                    what = "is not a folder" if os.path.exists(root.path) else "does not exist"
                    raise MemoryStoreError(f"memory root {what}: {root.path}")
        store = cls(resolved, max_bytes=max_bytes, debounce_ms=debounce_ms, sidecars=sidecars, reuse=reuse)
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
                raise TimeoutError(
                    f"memory store: version {version} not reached in {timeout:g} s (at {self._snapshot.version})"
                )
            raise MemoryStoreError(f"memory store is not watching; it stays at version {self._snapshot.version}")

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(snapshot)`` after each new snapshot is swapped in; returns an unsubscribe function.

        Callbacks run on the store's watcher thread, in version order; keep them short.
        """
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

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
                # Watch first, then scan: a file written in between shows up as an event.
                outside = [sidecar.path for sidecar in self._state.sidecars.values() if not sidecar.inside]
                self._watcher = Watcher(
                    [r.path for r in self._roots], self._apply_batch, self._debounce_s, extra_files=outside
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
            snapshot = self._state.publish(self._snapshot.version + 1)
            if snapshot is None:
                return
            self._swap(snapshot)
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(snapshot)
            except Exception:
                _log.exception("memory store subscriber %r failed", callback)

    def _swap(self, snapshot: Snapshot) -> None:
        with self._published:
            self._snapshot = snapshot
            self._published.notify_all()


def _resolve_sidecars(roots: list[Root], spec: EnrichmentSpec) -> dict[str, Sidecar]:
    if spec is False:
        return {}
    sidecars = {root.label: Sidecar(str(sidecar_path(root.path)), inside=True) for root in roots}
    if spec is True:
        return sidecars
    if not isinstance(spec, Mapping):
        raise MemoryStoreError("enrichment must be True, False or a mapping of root label or path to sidecar path")
    for key, path in spec.items():
        key_path = os.path.abspath(os.path.expanduser(os.fspath(key)))
        match = [root for root in roots if key in (root.label, root.path) or key_path == root.path]
        if not match:
            raise MemoryStoreError(f"enrichment given for an unknown root: {os.fspath(key)!r}")
        for root in match:
            sidecars[root.label] = Sidecar(os.path.abspath(os.path.expanduser(os.fspath(path))), inside=False)
    return sidecars


def _resolve_roots(specs: tuple[RootSpec, ...]) -> list[Root]:
    if not specs:
        raise MemoryStoreError("no memory root given")
    roots: list[Root] = []
    taken: set[str] = set()
    for spec in specs:
        label, raw = spec if isinstance(spec, tuple) else (None, spec)
        path = os.path.abspath(os.path.expanduser(os.fspath(raw)))
        if label is None:
            base = os.path.basename(path) or "root"
            label, n = base, 1
            while label in taken:
                n += 1
                label = f"{base}-{n}"
        elif not label or "/" in label:
            raise MemoryStoreError(f"invalid root label {label!r}: it must be non-empty and contain no '/'")
        elif label in taken:
            raise MemoryStoreError(f"two roots share the label {label!r}")
        taken.add(label)
        roots.append(Root(label, path))
    return roots
