"""Background enrichment: new and changed memories of a watched store get search terms, off the recall path.

One thread with its own event loop makes the model calls, through a ``ModelLane``: at most its
``concurrency`` at once, paced to a rate, and never while a prompt waits on the model (the daemon's
lane is shared by its selector and every store's enrichment; a library Recaller's is its own). It
reacts to the store's snapshots (published after the store's debounce), takes the versions to do
newest first from a bounded queue refilled from each snapshot, records each result through the
store in the sidecar it reads for that root, and the store's watch on the sidecar brings the terms
into the next snapshot. Each request carries the store's keyword vocabulary. A recall never waits
for any of it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from memory_store import MemoryDoc, MemoryStore, MemoryStoreError, Snapshot
from recall_kit._errors import BackgroundError, UsageError
from recall_kit._enricher import Enricher, EnrichmentResult, needs_enrichment
from recall_kit._model_lane import ModelLane, Preempted, Slot
from recall_kit._telemetry import EnrichEvent, Telemetry
from recall_kit._vocabulary import VocabularyCache
from recall_kit.limits import ENRICH_CLOSE_WAIT_S, ENRICH_MAX_QUEUE

_log = logging.getLogger("recall_kit.enrich")

DEFAULT_CALLS_PER_MINUTE = 10.0  # an agent writes a memory now and then; bulk work is `recall-kit enrich`
RETRY_FAILED_AFTER_S = 600.0  # a version that failed (429, timeout, garbage) is asked again after this
_START_TIMEOUT_S = 10.0

Version = tuple[str, str]  # (ref, content hash)


@dataclass(frozen=True, slots=True)
class EnrichmentStats:
    """What a store's background enrichment has done and has left, for a status line."""

    enriched: int  # versions whose terms were written
    failed: int  # calls that gave nothing usable (each version is tried again after a while)
    preempted: int  # calls cancelled because a prompt needed the model (tried again)
    calls: int  # model calls made, preempted ones included
    in_flight: int
    pending: int  # versions of the store's current snapshot waiting for terms
    refused_roots: tuple[str, ...]  # roots whose sidecar cannot be written: no call for their memories


class BackgroundEnrichment:
    """Enriches a watched store's unenriched memories on its own thread; ``close()`` stops it."""

    def __init__(
        self,
        store: MemoryStore,
        enricher: Enricher,
        *,
        telemetry: Telemetry | None = None,
        calls_per_minute: float = DEFAULT_CALLS_PER_MINUTE,
        retry_failed_after_s: float = RETRY_FAILED_AFTER_S,
        max_queue: int = ENRICH_MAX_QUEUE,
    ) -> None:
        """The calls go through ``enricher.lane`` when it has one (the daemon's, shared with its
        selector), else through a lane of their own: one at a time, ``calls_per_minute``."""
        if not isinstance(store, MemoryStore):  # a Snapshot, say: nothing to follow or write into
            raise UsageError("background enrichment needs a MemoryStore whose snapshots it follows: open the roots with watch=True")
        if not calls_per_minute > 0:
            raise UsageError(f"calls_per_minute must be positive, got {calls_per_minute!r}")
        self.store = store
        self.enricher = enricher
        self.telemetry = telemetry or Telemetry()
        self.lane = enricher.lane or ModelLane(concurrency=1, calls_per_minute=calls_per_minute)
        self.retry_failed_after_s = retry_failed_after_s
        self.max_queue = max_queue
        self._roots: dict[str, str] = dict(store.roots)  # label -> absolute path
        self._written: set[Version] = set()  # in the sidecar, not yet in a snapshot
        self._failed: dict[Version, float] = {}  # -> monotonic time of the failure
        self._in_flight: set[Version] = set()
        self._queue: list[MemoryDoc] = []  # newest first, at most max_queue: what the workers take next
        self._queued_from: Snapshot | None = None
        self._counts = {"enriched": 0, "failed": 0, "preempted": 0, "calls": 0}
        self._vocabulary = VocabularyCache()
        self._refused: tuple[int, frozenset[str]] = (-1, frozenset())  # (snapshot version, roots it cannot record in)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._closed = False

    def start(self) -> "BackgroundEnrichment":
        """Start the thread and follow the store: what it holds now, then each new snapshot; returns self.
        BackgroundError when the thread does not start."""
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="recall-kit-enrich", daemon=True)
        self._thread.start()
        if not ready.wait(_START_TIMEOUT_S):
            raise BackgroundError("background enrichment did not start")
        self._unsubscribe = self.store.subscribe(self._on_snapshot)
        self._on_snapshot(self.store.snapshot())  # what is already there counts too
        return self

    @property
    def running(self) -> bool:
        """Whether the enrichment thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout: float = ENRICH_CLOSE_WAIT_S) -> None:
        """Stop at once (an in-flight model call is cancelled) and join the thread, waiting at most
        ``timeout`` seconds: a sidecar write waiting on its lock (another process holds it) is left to
        finish on its own, with one log line; nothing else is written after close."""
        if self._closed:
            return
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass  # the loop already finished
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            if self._thread.is_alive():
                _log.warning("background enrichment: its thread is still writing after %g s (another process "
                             "holds the sidecar's lock); left to finish on its own", timeout)

    def __enter__(self) -> "BackgroundEnrichment":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the worker thread -------------------------------------------------------------------

    def _on_snapshot(self, _snapshot: Snapshot) -> None:
        loop, wake = self._loop, self._wake
        if loop is None or wake is None or self._closed:
            return
        try:
            loop.call_soon_threadsafe(wake.set)
        except RuntimeError:
            pass  # closing

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main(loop, ready))
        finally:
            loop.close()

    async def _main(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.current_task()
        self._loop = loop
        ready.set()
        try:
            while True:
                try:
                    async with asyncio.timeout(self._next_retry_in()):
                        await self._wake.wait()
                except TimeoutError:
                    pass  # a failed version is due again
                self._wake.clear()
                await self._drain()
        except asyncio.CancelledError:
            pass  # close(): cancellation is how this thread ends
        finally:
            await self.enricher.aclose()

    def _next_retry_in(self) -> float | None:
        if not self._failed:
            return None
        due = min(self._failed.values()) + self.retry_failed_after_s
        return max(0.0, due - time.monotonic())

    def stats(self) -> EnrichmentStats:
        """What was enriched, what is pending and the model calls spent (read from any thread)."""
        counts = dict(self._counts)
        refused = self._refused[1]
        done, busy = set(self._written), set(self._in_flight)  # copies: the worker thread changes them
        pending = sum(
            1 for doc in self.store.snapshot().docs.values()
            if needs_enrichment(doc) and doc.scope in self._roots and doc.scope not in refused
            and (doc.ref, doc.content_hash) not in done and (doc.ref, doc.content_hash) not in busy
        )
        return EnrichmentStats(
            enriched=counts["enriched"], failed=counts["failed"], preempted=counts["preempted"], calls=counts["calls"],
            in_flight=len(busy), pending=pending, refused_roots=tuple(sorted(refused)),
        )

    def _refill(self, snapshot: Snapshot) -> None:
        """The queue from ``snapshot``: the versions without terms (their own or the sidecar's) that
        are not written, in flight or failed recently, in roots whose sidecar can be written, newest
        first (a memory the agent just wrote goes before a store's backlog), at most ``max_queue``.
        Once per snapshot: its docs' terms do not change under it."""
        current = {(doc.ref, doc.content_hash) for doc in snapshot.docs.values() if needs_enrichment(doc)}
        self._written &= current  # forget versions that are gone or whose entry has arrived
        self._failed = {v: t for v, t in self._failed.items() if v in current}
        refused = self._refused_roots(snapshot)
        now = time.monotonic()
        wanted = []
        for doc in snapshot.docs.values():
            version = (doc.ref, doc.content_hash)
            if version not in current or version in self._written or doc.scope not in self._roots:
                continue
            if doc.scope in refused:
                continue  # its terms could not be kept: no model call for them
            failed_at = self._failed.get(version)
            if failed_at is not None and now - failed_at < self.retry_failed_after_s:
                continue
            wanted.append(doc)
        wanted.sort(key=lambda doc: (-doc.mtime, doc.ref))
        self._queue = wanted[: self.max_queue]
        self._queued_from = snapshot

    def _next_doc(self) -> MemoryDoc | None:
        snapshot: Snapshot = self.store.snapshot()
        if snapshot is not self._queued_from or not self._queue:
            self._refill(snapshot)  # an empty queue is refilled: a store past max_queue is taken in parts
        now = time.monotonic()
        while self._queue:
            doc = self._queue.pop(0)
            version = (doc.ref, doc.content_hash)
            failed_at = self._failed.get(version)
            if failed_at is not None and now - failed_at < self.retry_failed_after_s:
                continue  # failed since the queue was filled
            if version not in self._in_flight and version not in self._written:
                return doc
        return None

    def _refused_roots(self, snapshot: Snapshot) -> frozenset[str]:
        """The roots whose sidecar cannot be written, checked once per snapshot (a fix shows up as one)."""
        version, refused = self._refused
        if version == snapshot.version:
            return refused
        found = set()
        for label in self._roots:
            reason = self.store.root(label).sidecar_refusal()
            if reason is not None:
                found.add(label)
                if label not in refused:
                    _log.warning("background enrichment of %s is off: %s", label, reason)
        self._refused = (snapshot.version, frozenset(found))
        return self._refused[1]

    async def _drain(self) -> None:
        """Enrich what the snapshots ask for, with as many workers as the lane lets call at once."""
        self._queued_from = None  # woken by a snapshot or a retry that is due: fill the queue afresh
        workers = [asyncio.ensure_future(self._worker()) for _ in range(self.lane.concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()

    async def _worker(self) -> None:
        while True:
            async with self.lane.slot() as slot:  # no prompt waits on the model, a place is free, the pace kept
                doc = self._next_doc()  # picked now: what is wanted may have changed while waiting
                if doc is None:
                    return
                version = (doc.ref, doc.content_hash)
                self._in_flight.add(version)
                try:
                    await self._enrich_one(doc, slot)
                finally:
                    self._in_flight.discard(version)

    async def _enrich_one(self, doc: MemoryDoc, slot: Slot) -> None:
        started = time.perf_counter()
        version = (doc.ref, doc.content_hash)
        vocabulary = self._vocabulary.of(self.store.snapshot())

        async def call() -> EnrichmentResult:
            self._counts["calls"] += 1  # spent once it starts, preempted or not
            return await self.enricher.enrich(doc, vocabulary)

        try:
            result = await slot.run(call)
        except Preempted as exc:
            self._counts["preempted"] += 1
            self.telemetry.emit(_preempted(doc, str(exc), (time.perf_counter() - started) * 1000))
            return  # not a failure: the version is taken again once the prompt's call is done
        reason = result.reason
        entry = result.entry
        if entry is not None and self._closed:
            return  # closed during the call: nothing is written after close (the next run asks again)
        if entry is not None:
            try:
                self.store.record_enrichment(doc.scope, [entry])  # the sidecar the store reads for that root
            except MemoryStoreError as exc:
                entry, reason = None, f"cannot write the sidecar: {exc}"
        if entry is not None:
            self._written.add(version)
            self._counts["enriched"] += 1
        else:
            self._failed[version] = time.monotonic()
            self._counts["failed"] += 1
            _log.info("enrichment of %s failed: %s", doc.ref, reason)
        self.telemetry.emit(_event(result, reason, entry is not None, (time.perf_counter() - started) * 1000))


def _preempted(doc: MemoryDoc, reason: str, duration_ms: float) -> EnrichEvent:
    return EnrichEvent(
        ref=doc.ref, sha256=doc.content_hash, outcome="preempted", reason=reason, keywords=0, usage_scenarios=0,
        duration_ms=duration_ms,
    )


def _event(result: EnrichmentResult, reason: str | None, written: bool, duration_ms: float) -> EnrichEvent:
    return EnrichEvent(
        ref=result.ref,
        sha256=result.sha256,
        outcome="enriched" if written else "failed",
        reason=None if written else reason,
        failure=None if written else result.failure,
        keywords=len(result.keywords) if written else 0,
        usage_scenarios=len(result.usage_scenarios) if written else 0,
        duration_ms=duration_ms,
        response_mode=result.response_mode,
    )
