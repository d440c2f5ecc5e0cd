"""The Recaller: the shared recall machinery (index, selector, telemetry) sessions are made from."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_store import MemoryDoc, Snapshot
from recall_kit._errors import SessionClosedError, UsageError
from recall_kit._session import RecallSession
from recall_kit._stages import INITIAL_WAIT_MS, SKIP_MODEL_WHEN_CERTAIN, Stages, check_clients, check_delivery
from recall_kit._sync_session import SyncRecallSession
from recall_kit._telemetry import Telemetry
from recall_kit.limits import BODY_BUDGET

if TYPE_CHECKING:
    from recall_kit._background_enrichment import BackgroundEnrichment
    from recall_kit._learn import Learner
    from recall_kit._enricher import Enricher
    from recall_kit._heuristic import FastHeuristic, SnapshotSource
    from recall_kit._protocols import Selector


@dataclass(frozen=True, slots=True)
class Opened:
    """What ``open_recaller`` opened for a Recaller, which closes it, and how the index was obtained."""

    closers: tuple[Callable[[], object], ...] = ()  # called in order by close(), after the Recaller's own parts
    selector: Selector | None = None  # a client made for it: its connections are closed by aclose()
    reused_from_cache: int = 0  # documents taken from the index cache
    cache_file: Path | None = None  # the index cache used, if any


class Recaller:
    """Shared recall machinery (index, selector, telemetry) from which sessions are made.

    ``store`` is what the heuristic follows: a watched ``MemoryStore`` (or any ``SnapshotSource``),
    or a fixed ``Snapshot``. Without ``heuristic`` the Recaller builds a ``FastHeuristic`` over it.
    With ``enrich``, a watched store's new and changed memories are enriched in the background, on
    a thread of their own: through the Enricher's lane when it has one (shared with a selector, so
    a prompt's call goes first), else one call at a time, at most ``enrich_calls_per_minute``.
    With ``learn``, each validated model answer is fed back to the store's learned sidecars on a
    thread of its own (``learner``); it never keeps the selector's key or URL credentials.

    What every session runs is one frozen value, ``stages``. A Recaller closes what it made (its
    heuristic, learner, background enrichment) and what ``opened`` lists; what it is handed stays
    the caller's. ``open_recaller`` opens the store, the heuristic and the model clients, and the
    Recaller it returns closes all of them: ``close()`` from threaded code, ``await aclose()`` (or
    ``async with``) on the event loop that used the selector, whose connections belong to it.
    """

    def __init__(
        self,
        store: SnapshotSource | Snapshot,
        selector: Selector | None = None,
        *,
        telemetry: Telemetry | Callable[[Any], object] | None = None,
        heuristic: FastHeuristic | None = None,
        initial_wait_ms: float = INITIAL_WAIT_MS,
        body_budget: int = BODY_BUDGET,
        enrich: Enricher | None = None,
        enrich_calls_per_minute: float | None = None,
        learn: bool = False,
        opened: Opened = Opened(),
        skip_certain: bool = SKIP_MODEL_WHEN_CERTAIN,
    ):
        check_delivery(initial_wait_ms, body_budget)  # before anything is built
        check_clients(selector, enrich, telemetry)
        self.enrichment: BackgroundEnrichment | None = None
        self._closers: list[Callable[[], object]] = []  # what this Recaller made, closed last first
        self._owned_selector: Selector | None = None
        self._closed = False
        if heuristic is None:
            from recall_kit._heuristic import FastHeuristic

            heuristic = FastHeuristic(store)
            self._closers.append(heuristic.close)
        self.store = store
        self.heuristic: FastHeuristic = heuristic
        if telemetry is not None and not isinstance(telemetry, Telemetry):
            telemetry = Telemetry(telemetry)
        telemetry = telemetry or Telemetry()
        learner = None
        if learn:
            from memory_store import MemoryStore

            from recall_kit._learn import Learner
            from recall_kit._selector import ModelSelector

            if not isinstance(store, MemoryStore):
                self.close()
                raise UsageError("learning needs a MemoryStore to keep what it learns: open the roots as a store")
            learner = Learner(store, telemetry, selector.redactor if isinstance(selector, ModelSelector) else None)
            self._closers.append(learner.close)  # closed first: what is queued is written before the store closes
        self.stages = Stages(
            source=store, heuristic=heuristic, selector=selector, learner=learner, telemetry=telemetry,
            initial_wait_ms=initial_wait_ms, body_budget=body_budget, skip_certain=skip_certain,
        )
        self.reused_from_cache = opened.reused_from_cache
        self.cache_file = opened.cache_file
        self._session_ids = itertools.count(1)
        if enrich is not None:
            from recall_kit._background_enrichment import DEFAULT_CALLS_PER_MINUTE, BackgroundEnrichment

            rate = DEFAULT_CALLS_PER_MINUTE if enrich_calls_per_minute is None else enrich_calls_per_minute
            try:
                self.enrichment = BackgroundEnrichment(
                    store, enrich, telemetry=telemetry, calls_per_minute=rate  # type: ignore[arg-type]  # it refuses any other source
                ).start()
            except BaseException:
                self.close()
                raise
        # what open_recaller opened is the caller's to close until here, where nothing can fail any more
        self._closers[:0] = reversed(opened.closers)
        self._owned_selector = opened.selector

    @property
    def selector(self) -> Selector | None:
        """The model stage sessions run, if any."""
        return self.stages.selector

    @property
    def telemetry(self) -> Telemetry:
        """Where the sessions' events go."""
        return self.stages.telemetry

    @property
    def learner(self) -> Learner | None:
        """What feeds validated model answers back to the store, when learning is on."""
        return self.stages.learner

    @property
    def initial_wait_ms(self) -> float:
        """The initial point's ceiling."""
        return self.stages.initial_wait_ms

    @property
    def body_budget(self) -> int:
        """Characters of memory bodies in one rendered block."""
        return self.stages.body_budget

    def snapshot(self) -> Snapshot:
        """The snapshot sessions recall from now."""
        return self.store if isinstance(self.store, Snapshot) else self.store.snapshot()

    def snapshot_docs(self) -> Sequence[MemoryDoc]:
        """Every document of the current snapshot: the model stage's candidates."""
        return self.stages.candidates()

    def session(self) -> RecallSession:
        """A new conversation (asyncio): its own pending handle and surfaced refs. SessionClosedError
        once the Recaller is closed (its store no longer follows the files)."""
        self._check_open()
        return RecallSession(self.stages, f"s{next(self._session_ids)}")

    def sync_session(self) -> SyncRecallSession:
        """A session for threaded code, on its own background loop thread; SessionClosedError once closed."""
        self._check_open()
        return SyncRecallSession(self)

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError("the Recaller is closed: open another to start a session")

    @property
    def closed(self) -> bool:
        """Whether ``close()`` or ``aclose()`` ran."""
        return self._closed

    def close(self) -> None:
        """Stop background enrichment and close what this Recaller made (its learner first, so what
        is queued is written; its heuristic) and then what ``opened`` lists (from ``open_recaller``:
        the heuristic, then the store). An owned selector's connections are closed on their own
        loop: by the sync sessions that used it, or by ``aclose()``. No new session starts after it;
        one made before recalls from the last snapshot until it is closed itself."""
        if self._closed:
            return
        self._closed = True
        if self.enrichment is not None:
            self.enrichment.close()
        while self._closers:
            self._closers.pop()()

    async def aclose(self) -> None:
        """``close()``, then close the connections an owned selector opened on the running loop."""
        self.close()
        selector, self._owned_selector = self._owned_selector, None
        if selector is not None:
            await selector.aclose()

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
