"""Opening memory roots through the persistent index cache, so a cold process does not parse and
index every memory again.

One cache file per root set in the per-user cache folder (``RECALL_KIT_CACHE_DIR``, else
platformdirs' user cache dir; see ``_cache_file``). It holds each file's abspath and identity (size,
mtime_ns, inode, device) with the doc parsed from it, and the FieldIndex built from those docs. A
cold start re-reads and re-analyses only the files whose identity changed, and drops the ones that
are gone. A cache folder or file that is not this user's alone is not used: one warning, and the
roots are read as without a cache.

A cold query needs the table, the index and the few docs it shows, so each cached doc goes to the
store as a DeferredDoc, built only when something looks at it; nothing in the sections is used
before their checksum has passed.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
from collections.abc import Callable, Iterator, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_store import DeferredDoc, MemoryStore, MemoryStoreError, Snapshot, UnsafePathError
from recall_kit._config import SelectorConfig
from recall_kit._errors import UsageError
from recall_kit._recaller import Opened, Recaller
from recall_kit._settings import environment_setting
from recall_kit._stages import INITIAL_WAIT_MS, SKIP_MODEL_WHEN_CERTAIN, check_clients, check_delivery
from recall_kit._telemetry import Telemetry
from recall_kit.limits import BODY_BUDGET
from recall_kit._cache_file import (
    BLOB,
    CONTENT_HASH,
    SIDECARS,
    IDENTITY,
    REF,
    Cached,
    DocBuilder,
    Kept,
    sidecars_key,
    identity,
    load,
    mark_used,
    save,
    usable_cache,
)
from recall_kit._fields import FIELD_B, FIELD_WEIGHTS, build_index, doc_fields
from recall_kit._frozen_index import FROZEN_MAX_POSTINGS, FrozenIndex
from recall_kit._heuristic import FastHeuristic

if TYPE_CHECKING:  # imported when needed: a fast-only process loads no HTTP client, a cached small store no numpy
    from recall_kit._enricher import Enricher
    from recall_kit._index import FieldIndex
    from recall_kit._selector import ModelSelector

_log = logging.getLogger(__name__)


def _root_list(roots: object) -> Sequence[str | os.PathLike[str]]:
    """``roots`` when it is a list of folders; UsageError for one path given alone (a str is a
    sequence of one-letter folders to Python, and so it would be opened)."""
    if isinstance(roots, (str, bytes, os.PathLike)):
        raise UsageError(f"roots must be a list of folders, got the single path {os.fsdecode(roots)!r}: "
                         f"pass [{os.fsdecode(roots)!r}]")
    if not isinstance(roots, Sequence):
        raise UsageError(f"roots must be a list of folder paths, got {type(roots).__name__}")
    for n, root in enumerate(roots):
        if not isinstance(root, (str, os.PathLike)):  # a (label, path) pair too: labels are the store's own
            raise UsageError(f"roots must be a list of folder paths; roots[{n}] is a {type(root).__name__}")
    return roots


@dataclass(frozen=True, slots=True)
class IndexedStore:
    """A one-shot snapshot of memory roots with a FastHeuristic over it, and how it was obtained."""

    snapshot: Snapshot
    heuristic: FastHeuristic
    reused: int  # documents taken from the cache without reading their file
    cache_file: Path | None  # None when the cache was bypassed


def open_indexed(
    roots: Sequence[str | os.PathLike[str]], *, use_cache: bool = True, cache_dir: str | os.PathLike[str] | None = None
) -> IndexedStore:
    """Scan ``roots`` once and index them, through the persistent cache unless ``use_cache`` is False.

    Raises MemoryStoreError for a missing root, as ``MemoryStore.open`` does. A cache that cannot
    be read or written never fails the call: it is logged and the index is built from the files.
    """
    roots = _root_list(roots)
    opened = _open_cache(roots, cache_dir) if use_cache else None
    if opened is None:
        with MemoryStore.open(*roots, watch=False) as store:
            snapshot = store.snapshot()
        return IndexedStore(snapshot, FastHeuristic(snapshot), 0, None)
    path, cached = opened
    with _collector_paused():
        store, snapshot, index, reused = _open_cached(roots, path, cached, {"watch": False}, read_only=True)
    store.close()
    return IndexedStore(snapshot, FastHeuristic._from_index(snapshot, index), reused, path)


@dataclass(frozen=True, slots=True)
class WatchedStore:
    """A watched store and a FastHeuristic that follows it, started from the persistent cache."""

    store: MemoryStore
    heuristic: FastHeuristic
    reused: int  # documents taken from the cache without reading their file
    cache_file: Path | None  # None when the cache was bypassed

    def close(self) -> None:
        """Stop following the store, then close it."""
        self.heuristic.close()
        self.store.close()

    def __enter__(self) -> WatchedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_watched(
    roots: Sequence[str | os.PathLike[str]],
    *,
    use_cache: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    watch: bool = True,
    **store_options: Any,
) -> WatchedStore:
    """Open ``roots`` as a watched ``MemoryStore`` (``store_options`` go to ``MemoryStore.open``) with a
    FastHeuristic that follows it, both started from the persistent cache unless ``use_cache`` is False.

    What a long-lived process (the daemon, the MCP server) wants: at 10,000 memories a warm cache
    opens in a tenth of a second instead of seconds of parsing and indexing. Changes after the
    open reach the heuristic through the watcher as usual. Errors as for ``open_indexed``. With
    ``watch=False`` the store only publishes what it writes itself (what learning needs).
    """
    roots = _root_list(roots)
    opened = _open_cache(roots, cache_dir) if use_cache else None
    if opened is None:
        store = MemoryStore.open(*roots, watch=watch, **store_options)
        return WatchedStore(store, FastHeuristic(store), 0, None)
    path, cached = opened
    with _collector_paused():
        store, snapshot, index, reused = _open_cached(roots, path, cached, {**store_options, "watch": watch})
    try:
        heuristic = FastHeuristic._from_index(snapshot, index, follow=store)
    except BaseException:
        store.close()
        raise
    return WatchedStore(store, heuristic, reused, path)


def _open_cache(
    roots: Sequence[str | os.PathLike[str]], cache_dir: str | os.PathLike[str] | None
) -> tuple[Path, Cached | None] | None:
    """The cache file of ``roots`` and what it holds, or None (with one warning) when it is not ours alone."""
    path = usable_cache(roots, cache_dir)
    if path is None:
        return None
    try:
        return path, load(path)
    except UnsafePathError as exc:
        _log.warning("recall-kit: index cache off: %s", exc)
        return None


def _open_cached(
    roots: Sequence[str | os.PathLike[str]], path: Path, cached: Cached | None, store_options: dict[str, Any],
    *, read_only: bool = False,
) -> tuple[MemoryStore, Snapshot, FieldIndex | FrozenIndex, int]:
    """The store opened through the cache, its first snapshot, the index for it and how many docs
    were reused; ``read_only``: the index will never change (a one-shot snapshot)."""
    files: dict[str, Any] = cached.table["files"] if cached else {}
    raw = cached.sections if cached else memoryview(b"")
    returned: dict[str, Kept] = {}  # ref -> each doc handed to the store
    build = DocBuilder(path)

    def reuse(abspath: str, info: os.stat_result) -> DeferredDoc[memoryview] | None:
        entry = files.get(abspath)
        if entry is None:
            return None
        try:
            ref, content_hash, (offset, length) = entry[REF], entry[CONTENT_HASH], entry[BLOB]
            if (
                entry[IDENTITY] != identity(info) or not 0 <= offset <= offset + length <= len(raw)
                or not isinstance(ref, str) or not isinstance(content_hash, str)
            ):
                return None
        except (TypeError, ValueError, IndexError):
            return None  # an entry of a shape we never write: read the file
        blob = raw[offset : offset + length]
        returned[ref] = (abspath, entry, blob)
        return DeferredDoc(content_hash, build, blob)

    store = MemoryStore.open(*roots, reuse=reuse, **store_options)
    try:
        snapshot = store.snapshot()  # the first scan's: a watcher's later ones reach the heuristic itself
        if cached is not None and not cached.check.passed():  # nothing from the sections has been looked at yet
            _log.warning("recall-kit: index cache failed its checksum, rebuilding: %s", path)
            store.close()
            return _open_cached(roots, path, None, store_options, read_only=read_only)
        # a sidecar can change while the memory file does not: such a doc is re-analysed
        enriched, learned = snapshot.enrichments(), snapshot.learned()
        kept = {
            ref: found for ref, found in returned.items()
            if sidecars_key(enriched.get(ref), learned.get(ref)) == found[1][SIDECARS]
        }
        reused = kept.keys() & snapshot.docs.keys()
        index, changed = _index_for(snapshot, cached, reused, read_only=read_only)
        if changed is not None:
            try:
                save(path, roots, snapshot, changed, kept)
            except (OSError, MemoryStoreError) as exc:
                _log.warning("recall-kit: index cache not written (%s): %s", path, exc)
        else:
            mark_used(path, roots)
    except BaseException:
        store.close()
        raise
    return store, snapshot, index, len(reused)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    # A load allocates ~10 long-lived objects per memory; collections meanwhile free nothing
    # and cost 4-6% of a cold 10,000-memory query (bench/cold_start.py).
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _index_for(
    snapshot: Snapshot, cached: Cached | None, reused: Set[str], *, read_only: bool
) -> tuple[FieldIndex | FrozenIndex, FieldIndex | None]:
    # The cached index brought to the snapshot (unchanged docs kept, changed and new ones re-analysed),
    # and that index again when it changed (to save). Read-only, unchanged and small, it is read
    # without numpy (FrozenIndex); else as a FieldIndex.
    index: FieldIndex | FrozenIndex | None = None
    if cached is not None:
        table, raw = cached.table, cached.sections
        try:
            arrays = {key: raw[offset : offset + length] for key, (offset, length) in table["arrays"].items()}
            state = {**table["index"], **arrays}
            refs = state["refs"]
            held = set(refs) if isinstance(refs, list) and set(map(type, refs)) <= {str} else set()
            as_is = read_only and held == reused == snapshot.docs.keys()
            if as_is and FrozenIndex.postings_in(state) <= FROZEN_MAX_POSTINGS:
                index = FrozenIndex(state)
            else:
                from recall_kit._index import FieldIndex

                index = FieldIndex.from_state(state)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            _log.warning("recall-kit: index cache ignored: %s", exc)
    if index is None or index.field_weights != FIELD_WEIGHTS or index.b != FIELD_B:
        built = build_index(snapshot.docs)
        return built, built
    if isinstance(index, FrozenIndex):
        return index, None
    unchanged = index.ids.keys() & reused  # reused: refs of the snapshot whose cached entry still holds
    stale = sorted(index.ids.keys() - unchanged)
    fresh = sorted(snapshot.docs.keys() - unchanged)
    if len(fresh) > max(64, len(snapshot.docs) // 4):  # mostly changed: a packed build is faster
        built = build_index(snapshot.docs)
        return built, built
    for ref in stale:
        index.remove(ref)
    for ref in fresh:
        terms, surfaces = doc_fields(snapshot.docs[ref])
        index.add(ref, terms, surfaces)
    return index, index if stale or fresh else None


def open_recaller(
    roots: Sequence[str | os.PathLike[str]] | Snapshot,
    *,
    watch: bool = True,
    use_cache: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    selector: SelectorConfig | ModelSelector | None = None,
    enrich: SelectorConfig | Enricher | None = None,
    enrich_calls_per_minute: float | None = None,
    telemetry: Telemetry | Callable[[Any], object] | None = None,
    initial_wait_ms: float = INITIAL_WAIT_MS,
    body_budget: int = BODY_BUDGET,
    learn: bool | None = None,
    skip_certain: bool = SKIP_MODEL_WHEN_CERTAIN,
    **store_options: Any,
) -> Recaller:
    """Open memory roots and everything recall needs over them; the Recaller closes all it opened.

    ``roots`` are memory folders, opened watched (``watch``, the default: a long-lived agent) or as
    one snapshot (a one-shot command), through the per-user index cache unless ``use_cache`` is
    False; ``store_options`` go to ``MemoryStore.open``. A ``Snapshot`` instead of roots is recalled
    from as it is. ``selector`` and ``enrich`` are a ``SelectorConfig`` (a client is made for it and
    closed with the Recaller) or a client made by the caller (it stays the caller's). Background
    enrichment needs a watched store. ``learn`` feeds each validated model answer back to the roots'
    learned sidecars; a store opened with ``watch=False`` still sees what it learned itself.
    ``skip_certain`` settles a prompt whose fast answer is certain without asking the model
    (``RecallEvent.model_skipped`` says so).

    Every argument is a plain value. The environment is read in one way only, for what is not
    given: ``recall_kit.settings.environment_setting`` (``RECALL_KIT_LEARN`` when ``learn`` is None,
    off when unset; ``RECALL_KIT_CACHE_DIR`` when ``cache_dir`` is None). No file is read: the CLI
    and its daemon pass what ``recall_kit.settings.load_settings`` loaded.

    Close the result with ``close()`` in threaded code and ``await aclose()`` (or ``async with``)
    on the event loop that used the selector. Raises MemoryStoreError for a missing root,
    ConfigError for an unusable selector setting and UsageError for roots that are not a list of
    folders (one path alone) or a delivery setting out of bounds (``initial_wait_ms`` 0 to 10,000,
    ``body_budget`` 0 or more); nothing is left open when it raises.
    """
    check_delivery(initial_wait_ms, body_budget)  # before anything is opened
    check_clients(selector, enrich, telemetry, configs=True)
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise UsageError(f"cache_dir must be a folder path or None, got {type(cache_dir).__name__}")
    closers: list[Callable[[], object]] = []  # what was opened here, in order
    try:
        store: MemoryStore | Snapshot
        heuristic: FastHeuristic
        reused, cache_file = 0, None
        if not isinstance(roots, Snapshot):
            roots = _root_list(roots)
        if learn is None:
            learn = environment_setting("learn").value and not isinstance(roots, Snapshot)
        if isinstance(roots, Snapshot):
            store, heuristic = roots, FastHeuristic(roots)
        elif watch or learn:  # learning keeps a store, to write what it learns and see it
            watched = open_watched(roots, use_cache=use_cache, cache_dir=cache_dir, watch=watch, **store_options)
            store, heuristic, reused, cache_file = watched.store, watched.heuristic, watched.reused, watched.cache_file
            closers.append(store.close)
        else:
            if store_options:
                raise UsageError(f"store options {sorted(store_options)} apply to a watched store only")
            indexed = open_indexed(roots, use_cache=use_cache, cache_dir=cache_dir)
            store, heuristic, reused, cache_file = indexed.snapshot, indexed.heuristic, indexed.reused, indexed.cache_file
        closers.append(heuristic.close)
        made_selector = None
        enricher = enrich if not isinstance(enrich, SelectorConfig) else None
        if isinstance(selector, SelectorConfig):
            from recall_kit._selector import ModelSelector

            made_selector = ModelSelector.from_config(selector)
        if isinstance(enrich, SelectorConfig):
            from recall_kit._enricher import Enricher

            enricher = Enricher.from_config(enrich)
        return Recaller(
            store,
            made_selector if made_selector is not None else selector if not isinstance(selector, SelectorConfig) else None,
            telemetry=telemetry,
            heuristic=heuristic,
            initial_wait_ms=initial_wait_ms,
            skip_certain=skip_certain,
            body_budget=body_budget,
            enrich=enricher,
            enrich_calls_per_minute=enrich_calls_per_minute,
            learn=learn,
            # closed after the Recaller's own parts, in reverse order of opening: the store last
            opened=Opened(tuple(reversed(closers)), made_selector, reused, cache_file),
        )
    except BaseException:
        for close in reversed(closers):
            close()
        raise
