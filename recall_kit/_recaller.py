"""The Recaller: the shared recall machinery (index, selector, telemetry) sessions are made from."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_store import MemoryDoc, Snapshot
from recall_kit._errors import UsageError
from recall_kit._session import INITIAL_WAIT_MS, RecallSession
from recall_kit._sync_session import SyncRecallSession
from recall_kit._telemetry import Telemetry
from recall_kit.limits import BODY_BUDGET

if TYPE_CHECKING:
    from recall_kit._background_enrichment import BackgroundEnrichment
    from recall_kit._learn import Learner
    from recall_kit._enricher import Enricher
    from recall_kit._heuristic import SnapshotSource
    from recall_kit._protocols import FastStage, Selector


class Recaller:
    """Shared recall machinery (index, selector, telemetry) from which sessions are made.

    ``store`` is what the heuristic follows: a watched ``MemoryStore`` (or any ``SnapshotSource``),
    or a fixed ``Snapshot``. Without ``heuristic`` the Recaller builds a ``FastHeuristic`` over it.
    With ``enrich``, a watched store's new and changed memories are enriched in the background
    (at most ``enrich_calls_per_minute`` model calls, one at a time, on a thread of their own).
    With ``learn``, each validated model answer is fed back to the store's learned sidecars on a
    thread of its own (``learner``); it never keeps the selector's key or URL credentials.

    A Recaller closes what it made (its heuristic, background enrichment); what it is handed stays
    the caller's. ``open_recaller`` opens the store, the heuristic and the model clients too, and
    the Recaller it returns closes all of them: ``close()`` from threaded code, ``await aclose()``
    (or ``async with``) on the event loop that used the selector, whose connections belong to it.
    """

    def __init__(
        self,
        store: SnapshotSource | Snapshot,
        selector: Selector | None = None,
        *,
        telemetry: Telemetry | Callable[[Any], object] | None = None,
        heuristic: FastStage | None = None,
        initial_wait_ms: float = INITIAL_WAIT_MS,
        body_budget: int = BODY_BUDGET,
        enrich: Enricher | None = None,
        enrich_calls_per_minute: float | None = None,
        learn: bool = False,
    ):
        self.enrichment: BackgroundEnrichment | None = None
        self.learner: Learner | None = None
        self._closers: list[Callable[[], object]] = []  # what this Recaller opened, closed last first
        self._owned_selector: Selector | None = None
        self._closed = False
        if heuristic is None:
            from recall_kit._heuristic import FastHeuristic

            made = FastHeuristic(store)
            self._closers.append(made.close)
            heuristic = made
        self.store = store
        self.selector = selector
        self.heuristic: FastStage = heuristic
        if telemetry is None or isinstance(telemetry, Telemetry):
            self.telemetry = telemetry or Telemetry()
        else:
            self.telemetry = Telemetry(telemetry)
        self.initial_wait_ms = initial_wait_ms
        self.body_budget = body_budget
        self.reused_from_cache = 0  # documents open_recaller took from the index cache
        self.cache_file: Path | None = None  # the index cache open_recaller used, if any
        self._session_ids = itertools.count(1)
        if learn:
            from memory_store import MemoryStore

            from recall_kit._learn import Learner
            from recall_kit._selector import ModelSelector

            if not isinstance(store, MemoryStore):
                self.close()
                raise UsageError("learning needs a MemoryStore to keep what it learns: open the roots as a store")
            self.learner = Learner(store, self.telemetry, selector.redactor if isinstance(selector, ModelSelector) else None)
        if enrich is not None:
            from recall_kit._background_enrichment import DEFAULT_CALLS_PER_MINUTE, BackgroundEnrichment

            rate = DEFAULT_CALLS_PER_MINUTE if enrich_calls_per_minute is None else enrich_calls_per_minute
            try:
                self.enrichment = BackgroundEnrichment(
                    store, enrich, telemetry=self.telemetry, calls_per_minute=rate  # type: ignore[arg-type]  # it refuses any other source
                ).start()
            except BaseException:
                self.close()
                raise

    def snapshot(self) -> Snapshot:
        """The snapshot sessions recall from now."""
        return self.store if isinstance(self.store, Snapshot) else self.store.snapshot()

    def snapshot_docs(self) -> Sequence[MemoryDoc]:
        """Every document of the current snapshot: the model stage's candidates."""
        return list(self.snapshot().docs.values())

    def session(self) -> RecallSession:
        """A new conversation (asyncio): its own pending handle and surfaced refs."""
        return RecallSession(self, f"s{next(self._session_ids)}")

    def sync_session(self) -> SyncRecallSession:
        """A session for threaded code, on its own background loop thread."""
        return SyncRecallSession(self)

    @property
    def closed(self) -> bool:
        """Whether ``close()`` or ``aclose()`` ran."""
        return self._closed

    def close(self) -> None:
        """Stop background enrichment and close what this Recaller opened (its heuristic and, from
        ``open_recaller``, the store). An owned selector's connections are closed on their own
        loop: by the sync sessions that used it, or by ``aclose()``."""
        if self._closed:
            return
        self._closed = True
        if self.enrichment is not None:
            self.enrichment.close()
        if self.learner is not None:
            self.learner.close()  # what is queued is written before the store closes
        while self._closers:
            self._closers.pop()()

    async def aclose(self) -> None:
        """``close()``, then close the connections an owned selector opened on the running loop."""
        self.close()
        selector, self._owned_selector = self._owned_selector, None
        if selector is not None:
            await selector.aclose()

    def _adopt(self, close: Callable[[], object]) -> None:
        """Close ``close`` with this Recaller (for what ``open_recaller`` opened for it)."""
        self._closers.insert(0, close)

    def _adopt_selector(self, selector: Selector) -> None:
        self._owned_selector = selector

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # Like an unclosed asyncio transport: say so, and release what we hold all the same.
        if not getattr(self, "_closed", True) and (getattr(self, "_closers", None) or getattr(self, "enrichment", None)):
            _warn(f"unclosed Recaller {self!r}; use 'with Recaller(...)' or close()", ResourceWarning, source=self)
            self.close()

    def __enter__(self) -> Recaller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Recaller:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
