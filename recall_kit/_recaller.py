"""The Recaller: the shared recall machinery (index, selector, telemetry) sessions are made from."""

from __future__ import annotations

import itertools
import warnings
from typing import TYPE_CHECKING, Any, Callable, Sequence

from memory_store import MemoryDoc, Snapshot
from recall_kit._render import BODY_BUDGET
from recall_kit._session import INITIAL_WAIT_MS, RecallSession
from recall_kit._sync_session import SyncRecallSession
from recall_kit._telemetry import Telemetry

if TYPE_CHECKING:
    from recall_kit._background_enrichment import BackgroundEnrichment
    from recall_kit._enricher import Enricher
    from recall_kit._heuristic import FastHeuristic
    from recall_kit._selector import ModelSelector


class Recaller:
    """Shared recall machinery (index, selector, telemetry) from which sessions are made.

    With ``enrich``, a watched store's new and changed memories are enriched in the background
    (at most ``enrich_calls_per_minute`` model calls, one at a time, on a thread of their own).
    """

    def __init__(
        self,
        store: Any,
        selector: ModelSelector | None = None,
        *,
        telemetry: Telemetry | Callable[[Any], object] | None = None,
        heuristic: FastHeuristic | None = None,
        initial_wait_ms: float = INITIAL_WAIT_MS,
        body_budget: int = BODY_BUDGET,
        enrich: Enricher | None = None,
        enrich_calls_per_minute: float | None = None,
    ):
        self.enrichment: BackgroundEnrichment | None = None
        if heuristic is None:
            from recall_kit._heuristic import FastHeuristic

            heuristic = FastHeuristic(store)
            self._owns_heuristic = True
        else:
            self._owns_heuristic = False
        self.store = store
        self.selector = selector
        self.heuristic = heuristic
        if telemetry is None or isinstance(telemetry, Telemetry):
            self.telemetry = telemetry or Telemetry()
        else:
            self.telemetry = Telemetry(telemetry)
        self.initial_wait_ms = initial_wait_ms
        self.body_budget = body_budget
        self._session_ids = itertools.count(1)
        self._closed = False
        if enrich is not None:
            from recall_kit._background_enrichment import DEFAULT_CALLS_PER_MINUTE, BackgroundEnrichment

            rate = DEFAULT_CALLS_PER_MINUTE if enrich_calls_per_minute is None else enrich_calls_per_minute
            try:
                self.enrichment = BackgroundEnrichment(
                    store, enrich, telemetry=self.telemetry, calls_per_minute=rate
                ).start()
            except BaseException:
                self.close()
                raise

    def snapshot_docs(self) -> Sequence[MemoryDoc]:
        snapshot: Snapshot = self.store.snapshot() if hasattr(self.store, "snapshot") else self.store
        return list(snapshot.docs.values())

    def session(self) -> RecallSession:
        return RecallSession(self, f"s{next(self._session_ids)}")

    def sync_session(self) -> SyncRecallSession:
        """A session for threaded code, on its own background loop thread."""
        return SyncRecallSession(self)

    def close(self) -> None:
        """Stop background enrichment and release the heuristic this Recaller made (the selector,
        enricher and store stay the caller's)."""
        self._closed = True
        if self.enrichment is not None:
            self.enrichment.close()
        close = getattr(self.heuristic, "close", None)
        if self._owns_heuristic and close is not None:
            close()

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # Like an unclosed asyncio transport: say so, and release what we hold all the same.
        if (self._owns_heuristic or getattr(self, "enrichment", None)) and not getattr(self, "_closed", True):
            _warn(f"unclosed Recaller {self!r}; use 'with Recaller(...)' or close()", ResourceWarning, source=self)
            self.close()

    def __enter__(self) -> Recaller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
