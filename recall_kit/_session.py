"""The consumer session: fire recall on the prompt, take what is ready at two safe points."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memory_store import MemoryDoc
from recall_kit._handle import AbortSignal, FastResultBox, PrefetchHandle, wait_for_abort
from recall_kit._pipeline import run_recall
from recall_kit._errors import SessionClosedError, UsageError
from recall_kit._kinds import CANCEL_REASONS, CancelReason, ConsumePoint, DiscardReason, Phase, Placement, Strategy
from recall_kit._render import render_memories
from recall_kit._stages import INITIAL_WAIT_MS as INITIAL_WAIT_MS  # its public name is recall_kit.INITIAL_WAIT_MS
from recall_kit._stages import Stages
from recall_kit._after_turn import NO_SLOTS
from recall_kit.limits import bounded_prompt
from recall_kit._telemetry import DeliveryEvent, RecallEvent

_log = logging.getLogger("recall_kit")

# The discards after which a refinement still in flight may go on for learning only: the turn
# ended, or the user moved on. An abort, a reset or a close cuts it as before.
_LEARN_AFTER: frozenset[DiscardReason] = frozenset({"no_safe_delivery_point", "new_query"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """Memories to hand to the model now, and where to put them."""

    text: str  # the rendered memory block
    docs: tuple[MemoryDoc, ...]
    phase: Phase
    strategy: Strategy
    point: ConsumePoint
    placement: Placement  # lead the system reminders / after tool responses
    latency_ms: float  # since begin()

    @property
    def refs(self) -> tuple[str, ...]:
        """The refs of ``docs``, in order."""
        return tuple(d.ref for d in self.docs)


class RecallSession:
    """Per conversation: at most one pending handle, and the refs surfaced so far; it runs ``stages``."""

    def __init__(self, stages: Stages, session_id: str, *, surfaced: Iterable[str] = ()):
        self.stages = stages
        self.id = session_id
        self._handle: PrefetchHandle | None = None
        self._surfaced: dict[str, None] = dict.fromkeys(surfaced)  # ordered set of refs: delivered already
        self._tasks: set[asyncio.Task[None]] = set()  # everything started; close() awaits it
        self._learning: asyncio.Task[None] | None = None  # a refinement past its turn, for learning only
        self._slots = NO_SLOTS  # the slots it holds one of (the model stage's)
        self._handle_ids = itertools.count(1)
        self._closed = False

    @property
    def surfaced_paths(self) -> frozenset[str]:
        """Refs delivered in this session since the last reset."""
        return frozenset(self._surfaced)

    @property
    def pending(self) -> bool:
        """Whether a recall has begun and is neither delivered in full nor discarded yet."""
        return self._handle is not None

    @property
    def learning(self) -> bool:
        """Whether a refinement whose turn ended still runs, for learning only (never delivered)."""
        return self._learning is not None

    # --- lifecycle -------------------------------------------------------------------------

    def begin(self, query: str, *, abort: AbortSignal | None = None) -> None:
        """Start recall for a new user query and return at once (must run on the loop)."""
        if self._closed:
            raise SessionClosedError("begin() on a closed RecallSession")
        if not isinstance(query, str):
            raise UsageError(f"begin() takes the user's prompt as a str, got {type(query).__name__}")
        if abort is not None and not isinstance(abort, (asyncio.Event, threading.Event)):
            raise UsageError(f"begin() takes abort as an asyncio.Event or a threading.Event, got {type(abort).__name__}")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise UsageError("begin() runs on an event loop: call it from async code, or use recaller.sync_session() "
                             "from a thread") from None
        self.cancel("new_query")
        stages = self.stages
        handle = PrefetchHandle(next(self._handle_ids), bounded_prompt(query), FastResultBox(), query_chars=len(query))
        self._handle = handle
        handle.task = self._spawn(
            run_recall(
                handle,
                stages.heuristic,
                stages.selector,
                stages.candidates,
                frozenset(self._surfaced),
                self._on_settled,
                stages.learner.observe if stages.learner is not None else None,
                stages.skip_certain,
            )
        )
        if abort is not None:
            if abort.is_set():
                self._discard(handle, "abort")
            else:
                handle.abort_watch = self._spawn(self._watch_abort(handle, abort))

    async def consume(self, point: ConsumePoint = "initial") -> Delivery | None:
        """Deliver what is ready. ``initial`` waits up to the ceiling; ``tool_result`` never waits."""
        if point == "initial":
            return await self._consume_initial()
        if point == "tool_result":
            handle = self._handle
            if handle is None or not handle.settled:
                return None
            return self._deliver_settled(handle, "tool_result")
        raise UsageError(f"unknown consume point {point!r}; use 'initial' or 'tool_result'")

    def finish(self) -> None:
        """The turn ended with no further safe point: discard what is still pending."""
        self.cancel("no_safe_delivery_point")

    def cancel(self, reason: CancelReason = "abort") -> None:
        """End the pending handle undelivered, for ``reason`` (one of ``CANCEL_REASONS``)."""
        if reason not in CANCEL_REASONS:
            raise UsageError(f"unknown cancel reason {reason!r}; one of {sorted(CANCEL_REASONS)}")
        if self._handle is not None:
            self._discard(self._handle, reason)
        if reason not in _LEARN_AFTER:
            self._stop_learning()  # an abort, a reset or a close also cuts what goes on for learning

    def reset(self) -> None:
        """Forget the conversation: cancel the pending handle and the surfaced refs."""
        self.cancel("reset")
        self._surfaced.clear()

    async def close(self) -> None:
        """Cancel the pending handle (and a refinement going on for learning only) and wait until no
        task of this session is left; an error a task ended with is logged (cancellation is a normal
        outcome, not an error)."""
        self.cancel("shutdown")
        self._closed = True
        while self._tasks:
            results = await asyncio.gather(*list(self._tasks), return_exceptions=True)
            for result in results:
                if isinstance(result, Exception):
                    _log.error("session %s: a recall task failed", self.id, exc_info=result)

    async def __aenter__(self) -> RecallSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- internals -------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _watch_abort(self, handle: PrefetchHandle, abort: AbortSignal) -> None:
        await wait_for_abort(abort)
        self._discard(handle, "abort")

    async def _consume_initial(self) -> Delivery | None:
        handle = self._handle
        if handle is None:
            return None
        if not handle.settled and not handle.box.has_docs:
            try:
                async with asyncio.timeout(self.stages.initial_wait_ms / 1000):
                    await handle.published.wait()  # the fast stage first: its answer needs no model
                    if not (handle.settled or handle.box.has_docs or handle.ended) and self._wait_pays():
                        await handle.wake.wait()
            except TimeoutError:
                pass
        if handle.ended or handle is not self._handle:
            return None  # cancelled or replaced during the wait: nothing from it
        if handle.settled:
            return self._deliver_settled(handle, "initial")
        return self._deliver_fast(handle)

    def _wait_pays(self) -> bool:
        """Whether the model stage may answer within the initial wait, by its recent answers (``ModelPace``)."""
        pace = self.stages.pace
        return pace is None or pace.should_wait(self.stages.initial_wait_ms)

    def _observe_model(self, handle: PrefetchHandle, *, answered: bool) -> None:
        """One sample of the model's pace for ``handle``'s prompt: answered now, or still silent now
        (kept only past the initial wait: a shorter silence says nothing about it)."""
        pace = self.stages.pace
        if pace is None:
            return
        elapsed_ms = (time.perf_counter() - handle.fired_at) * 1000
        if answered:
            pace.answered(elapsed_ms)
        elif elapsed_ms >= self.stages.initial_wait_ms:
            pace.unanswered(elapsed_ms)

    def _deliver_fast(self, handle: PrefetchHandle) -> Delivery | None:
        fast = handle.box.result
        if fast is None or handle.fast_delivered:
            return None
        docs = tuple(s.doc for s in fast.docs if s.doc.ref not in self._surfaced)
        if not docs:
            return None
        handle.fast_delivered_paths.update(d.ref for d in docs)
        return self._deliver(handle, docs, "fast", fast.strategy, "initial", terminal=False)

    def _deliver_settled(self, handle: PrefetchHandle, point: ConsumePoint) -> Delivery | None:
        outcome = handle.result
        assert outcome is not None
        fresh = tuple(
            d
            for d in outcome.docs
            if d.ref not in handle.fast_delivered_paths and d.ref not in self._surfaced
        )
        if not outcome.docs:
            again = self._asked_again(handle)
            if again:
                self._discard(handle, "already_delivered", again)
            else:
                self._discard(handle, "no_relevant_results")
            return None
        if not fresh:
            self._discard(handle, "already_delivered")
            return None
        self._end(handle)
        return self._deliver(handle, fresh, outcome.phase, outcome.strategy, point, terminal=True)

    def _asked_again(self, handle: PrefetchHandle) -> tuple[str, ...]:
        """For a recall that selected nothing new: the refs the fast stage would have passed without
        this session's delivered refs left out, when the session has had every one of them (a question
        asked again), else (): told apart from nothing passing the gate. One more fast recall, only
        when earlier prompts delivered something."""
        if not self._surfaced or handle.fast_delivered:  # this prompt got its fast answer: the model chose none
            return ()
        try:
            again = tuple(scored.doc.ref for scored in self.stages.heuristic.recall(handle.query).docs)
        except Exception:  # a broken index already cost this prompt its fast result
            return ()
        return again if again and all(ref in self._surfaced for ref in again) else ()

    def _deliver(
        self,
        handle: PrefetchHandle,
        docs: tuple[MemoryDoc, ...],
        phase: Phase,
        strategy: Strategy,
        point: ConsumePoint,
        *,
        terminal: bool,
    ) -> Delivery:
        self._surfaced.update(dict.fromkeys(d.ref for d in docs))
        latency_ms = (time.perf_counter() - handle.fired_at) * 1000
        refs = tuple(d.ref for d in docs)
        self.stages.telemetry.emit(
            DeliveryEvent(
                session_id=self.id,
                handle_id=handle.id,
                phase=phase,
                point=point,
                reason=None,
                strategy=strategy,
                docs=refs,
                latency_ms=latency_ms,
                terminal=terminal,
            )
        )
        return Delivery(
            text=render_memories(docs, body_budget=self.stages.body_budget),
            docs=docs,
            phase=phase,
            strategy=strategy,
            point=point,
            placement="prepend" if point == "initial" else "append",
            latency_ms=latency_ms,
        )

    def _end(self, handle: PrefetchHandle, *, keep_recall: bool = False) -> None:
        handle.end(keep_recall=keep_recall)
        if self._handle is handle:
            self._handle = None

    def _discard(self, handle: PrefetchHandle, reason: DiscardReason, refs: tuple[str, ...] | None = None) -> None:
        """End ``handle`` undelivered for ``reason``; its event names ``refs`` when given, else what
        its outcome held that was not delivered."""
        if handle.ended:
            return
        was_settled = handle.settled
        keep_recall = reason in _LEARN_AFTER and self._learn_after_turn(handle)
        self._end(handle, keep_recall=keep_recall)
        if not was_settled:
            self._emit_recall(handle, settled=False)
            if not keep_recall and self.stages.selector is not None:
                self._observe_model(handle, answered=False)
        outcome = handle.result
        fast = handle.box.result
        strategy: Strategy
        if outcome is not None:
            phase: Phase | None = outcome.phase
            strategy = outcome.strategy
            undelivered = tuple(d.ref for d in outcome.docs if d.ref not in handle.fast_delivered_paths)
            docs = refs if refs is not None else undelivered
        else:
            phase, strategy, docs = None, (fast.strategy if fast else "none"), ()
        latency_ms = (time.perf_counter() - handle.fired_at) * 1000
        self.stages.telemetry.emit(
            DeliveryEvent(
                session_id=self.id,
                handle_id=handle.id,
                phase=phase,
                point="discarded",
                reason=reason,
                strategy=strategy,
                docs=docs,
                latency_ms=latency_ms,
                terminal=True,
            )
        )

    def _learn_after_turn(self, handle: PrefetchHandle) -> bool:
        """Whether ``handle``'s recall, ending undelivered, may go on for learning only: learning is on,
        its model stage has not answered yet, and a slot is free (this session's older one is cancelled)."""
        task = handle.task
        if self.stages.learner is None or self.stages.selector is None or handle.settled:
            return False
        if task is None or task.done():
            return False
        slots = self.stages.after_turn
        if slots is None:
            return False
        self._stop_learning()  # at most one per session: the newer one replaces it
        if not slots.take():
            return False
        self._learning = task
        self._slots = slots
        task.add_done_callback(lambda done: self._learned(done, handle))
        return True

    def _learned(self, task: asyncio.Task[None], handle: PrefetchHandle) -> None:
        self._observe_model(handle, answered=not task.cancelled())
        if self._learning is task:
            self._learning = None
            self._slots.give_back()

    def _stop_learning(self) -> None:
        task, self._learning = self._learning, None
        if task is not None:
            self._slots.give_back()
            task.cancel()

    def _on_settled(self, handle: PrefetchHandle) -> None:
        if handle.result is not None and handle.result.phase == "refined":
            self._observe_model(handle, answered=True)
        self._emit_recall(handle, settled=True)

    def _emit_recall(self, handle: PrefetchHandle, *, settled: bool) -> None:
        fast, outcome = handle.box.result, handle.result
        selected = outcome.docs if outcome is not None else (fast.docs if fast else ())
        self.stages.telemetry.emit(
            RecallEvent(
                session_id=self.id,
                handle_id=handle.id,
                query_chars=handle.query_chars,
                docs_scanned=fast.docs_scanned if fast else 0,
                docs_selected=len(selected),
                strategy=outcome.strategy if outcome else (fast.strategy if fast else "none"),
                fast_ms=fast.elapsed_ms if fast else None,
                model_ms=outcome.model_ms if outcome else None,
                settled=settled,
                fallback=outcome.fallback if outcome else None,
                model_skipped=outcome.model_skipped if outcome else False,
            )
        )
