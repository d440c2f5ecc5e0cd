"""The prefetch handle: owns one recall task, its fast-result box, its settled state and what it settled with."""

from __future__ import annotations

import asyncio
import enum
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Union

from memory_store import MemoryDoc
from recall_kit._kinds import Fallback, Phase, Strategy

if TYPE_CHECKING:
    from recall_kit._heuristic import FastResult

# How often a threading.Event abort signal is polled from the loop (it has no callback hook).
ABORT_POLL_S = 0.005

AbortSignal = Union[asyncio.Event, threading.Event]


class HandleState(enum.Enum):
    """A handle moves pending -> settled -> ended, or pending -> ended when cut short."""

    PENDING = "pending"  # the recall task runs
    SETTLED = "settled"  # the outcome is in; not yet delivered for good or discarded
    ENDED = "ended"  # delivered for good or discarded: its one terminal event is logged


class FastResultBox:
    """Where the heuristic publishes its result. It exists before the handle, so a result
    published early is never lost; a non-empty publish wakes whoever waits on the handle."""

    __slots__ = ("result", "published_at", "_on_docs", "_on_publish")

    def __init__(self) -> None:
        self.result: FastResult | None = None
        self.published_at: float | None = None
        self._on_docs: Callable[[], None] | None = None
        self._on_publish: Callable[[], None] | None = None

    @property
    def has_docs(self) -> bool:
        return self.result is not None and bool(self.result.docs)

    def publish(self, result: FastResult) -> None:
        self.result = result
        self.published_at = time.perf_counter()
        if self._on_publish is not None:
            self._on_publish()
        if result.docs and self._on_docs is not None:
            self._on_docs()


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallOutcome:
    """What a recall settled with. ``phase`` is ``fast`` when no model stage ran."""

    docs: tuple[MemoryDoc, ...]
    strategy: Strategy
    phase: Phase
    fast_ms: float | None
    model_ms: float | None
    fallback: Fallback | None = None  # why the model stage fell back, when it did
    model_skipped: bool = False  # a model stage was there, and the fast answer was certain enough to skip it


@dataclass(eq=False)
class PrefetchHandle:
    """One recall in flight for one user query. The session decides what to deliver from it;
    the handle only owns the tasks and records what happened."""

    id: int
    query: str  # as recall reads it (limits.bounded_prompt)
    box: FastResultBox
    query_chars: int = 0  # of the prompt as given
    fired_at: float = field(default_factory=time.perf_counter)
    task: asyncio.Task[None] | None = None
    abort_watch: asyncio.Task[None] | None = None
    state: HandleState = HandleState.PENDING
    settled_at: float | None = None
    result: RecallOutcome | None = None
    fast_delivered_paths: set[str] = field(default_factory=set)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    published: asyncio.Event = field(default_factory=asyncio.Event)  # the fast stage's result is in, empty or not

    def __post_init__(self) -> None:
        self.box._on_docs = self.wake.set
        self.box._on_publish = self.published.set

    @property
    def settled(self) -> bool:
        """An outcome arrived (the handle may have ended since)."""
        return self.settled_at is not None

    @property
    def ended(self) -> bool:
        return self.state is HandleState.ENDED

    @property
    def fast_delivered(self) -> bool:
        return bool(self.fast_delivered_paths)

    def settle(self, outcome: RecallOutcome) -> bool:
        """Record the outcome; False when the handle already ended (the outcome is dropped)."""
        if self.ended:
            return False
        self.result = outcome
        self.settled_at = time.perf_counter()
        self.state = HandleState.SETTLED
        self.wake.set()
        return True

    def end(self, *, keep_recall: bool = False) -> None:
        """Move to the terminal state and cancel whatever still runs (with ``keep_recall``, all but
        the recall task, whose outcome ``settle`` then drops: it goes on for learning only).
        Idempotent; the owner awaits the tasks on close."""
        self.state = HandleState.ENDED
        self.wake.set()
        self.published.set()  # nothing more to wait for
        current = asyncio.current_task()
        for task in (self.abort_watch,) if keep_recall else (self.task, self.abort_watch):
            if task is not None and task is not current and not task.done():
                task.cancel()


async def wait_for_abort(signal: AbortSignal) -> None:
    """Return when the abort signal is set: at once for asyncio.Event, by polling otherwise."""
    if isinstance(signal, asyncio.Event):
        await signal.wait()
        return
    while not signal.is_set():
        await asyncio.sleep(ABORT_POLL_S)
