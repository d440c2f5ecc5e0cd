"""The real recall path, observed: turns through a RecallSession with each stage recorded."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memory_store import MemoryDoc
from recall_kit._evaluation import EvalQuery, QueryOutcome, percentiles
from recall_kit._heuristic import FastHeuristic, FastResult
from recall_kit._session import Recaller
from recall_kit._telemetry import RecallEvent, Telemetry

if TYPE_CHECKING:
    from recall_kit._selector import ModelSelector, Selection
    from recall_kit._session import Delivery


class RecordingHeuristic:
    """Delegates to a FastHeuristic and keeps its last FastResult (scores included), so a
    caller can show what the session's own fast stage decided without a second recall."""

    def __init__(self, heuristic: FastHeuristic) -> None:
        self.heuristic = heuristic
        self.last: FastResult | None = None

    def recall(self, query: str, *, exclude: Iterable[str] = ()) -> FastResult:
        self.last = self.heuristic.recall(query, exclude=exclude)
        return self.last


class RecordingSelector:
    """Delegates to a ModelSelector and keeps its last Selection (accepted and rejected refs)."""

    def __init__(self, selector: ModelSelector) -> None:
        self.selector = selector
        self.timeout: float = selector.timeout
        self.last: Selection | None = None

    async def select(self, query: str, candidates: Sequence[MemoryDoc], **options: Any) -> Selection:
        self.last = await self.selector.select(query, candidates, **options)
        return self.last

    async def aclose(self) -> None:
        await self.selector.aclose()


SETTLE_MARGIN_S = 1.0  # beyond the selector's own deadline, before a turn stops waiting


@dataclass(frozen=True, slots=True)
class ProbedTurn:
    """One turn through a session: the initial delivery, and (tool-using) what settled after."""

    query: str
    initial: Delivery | None
    wait_ms: float  # time spent in consume("initial")
    fast: FastResult | None  # the session's own fast stage
    tool_result: Delivery | None = None  # at the first tool-result point
    selection: Selection | None = None  # when a model stage ran and finished
    settled_ms: float | None = None  # begin -> recall settled; None if it did not in time

    @property
    def initial_refs(self) -> tuple[str, ...]:
        return self.initial.refs if self.initial is not None else ()

    @property
    def tool_refs(self) -> tuple[str, ...]:
        return self.tool_result.refs if self.tool_result is not None else ()


class RecallProbe:
    """A Recaller whose heuristic and selector are observed; runs turns one at a time."""

    def __init__(
        self, store: Any, selector: ModelSelector | None = None, *, heuristic: FastHeuristic | None = None
    ) -> None:
        self._owned = heuristic is None
        self.heuristic = RecordingHeuristic(heuristic if heuristic is not None else FastHeuristic(store))
        self.selector = RecordingSelector(selector) if selector is not None else None
        self._settled: dict[str, Any] = {}  # session id -> asyncio.Event
        self.recaller = Recaller(
            store, self.selector, telemetry=Telemetry(self._on_event), heuristic=self.heuristic  # type: ignore[arg-type]
        )

    def _on_event(self, event: object) -> None:
        if isinstance(event, RecallEvent) and event.settled and event.session_id in self._settled:
            self._settled[event.session_id].set()

    async def turn(
        self, query: str, *, tool_turn: bool = False, on_initial: Callable[[ProbedTurn], None] | None = None
    ) -> ProbedTurn:
        """begin, consume("initial"); tool-using: wait for the recall to settle (bounded by the
        selector's deadline) as if a tool ran, consume("tool_result"); then finish."""
        session = self.recaller.session()
        settled = self._settled[session.id] = asyncio.Event()
        self.heuristic.last = None
        if self.selector is not None:
            self.selector.last = None
        try:
            session.begin(query)
            began = time.perf_counter()
            initial = await session.consume("initial")
            turn = ProbedTurn(query, initial, (time.perf_counter() - began) * 1000, self.heuristic.last)
            if on_initial is not None:
                on_initial(turn)
            if tool_turn:
                bound = (self.selector.timeout if self.selector else 0.0) + SETTLE_MARGIN_S
                try:
                    async with asyncio.timeout(bound):
                        await settled.wait()
                    settled_ms: float | None = (time.perf_counter() - began) * 1000
                except TimeoutError:
                    settled_ms = None
                tool_result = await session.consume("tool_result")
                selection = self.selector.last if self.selector else None
                turn = ProbedTurn(query, initial, turn.wait_ms, turn.fast, tool_result, selection, settled_ms)
            session.finish()
        finally:
            await session.close()
            del self._settled[session.id]
        return turn

    async def aclose(self) -> None:
        if self.selector is not None:
            await self.selector.aclose()
        close = getattr(self.heuristic.heuristic, "close", None)
        if self._owned and close is not None:
            close()


def run_turns(
    queries: Sequence[str],
    probe_factory: Callable[[], RecallProbe],
    *,
    tool_turn: bool = False,
    on_turn: Callable[[ProbedTurn], None] | None = None,
) -> list[ProbedTurn]:
    """Every query through the probe's sessions in order, on one event loop."""
    async def all_turns() -> list[ProbedTurn]:
        probe = probe_factory()  # made on the loop: the selector's client belongs to it
        turns = []
        try:
            for query in queries:
                turns.append(await probe.turn(query, tool_turn=tool_turn))
                if on_turn is not None:
                    on_turn(turns[-1])
        finally:
            await probe.aclose()
        return turns

    return asyncio.run(all_turns())


def turn_outcomes(queries: Sequence[EvalQuery], turns: Sequence[ProbedTurn], part: str) -> list[QueryOutcome]:
    """QueryOutcomes for one part of each turn: ``initial`` (the no-tool turn), ``tool_result``,
    ``refined`` (the settled selection in full) or ``turn`` (everything by the first tool result)."""

    def refs(turn: ProbedTurn) -> tuple[str, ...]:
        if part == "initial":
            return turn.initial_refs
        if part == "tool_result":
            return turn.tool_refs
        if part == "refined":
            return tuple(d.ref for d in turn.selection.docs) if turn.selection is not None else ()
        if part == "turn":
            return turn.initial_refs + turn.tool_refs
        raise ValueError(f"unknown turn part {part!r}")

    fast_ms = [t.fast.elapsed_ms if t.fast is not None else 0.0 for t in turns]
    return [QueryOutcome(q, refs(t), t.wait_ms, f) for q, t, f in zip(queries, turns, fast_ms)]


def refinement_summary(turns: Sequence[ProbedTurn]) -> dict[str, Any]:
    """Model latency, validation rejections and fallbacks (by reason) over tool-using turns."""
    selections = [t.selection for t in turns if t.selection is not None]
    rejected: Counter[str] = Counter(reason for s in selections for _, reason in s.rejected)
    fallbacks: Counter[str] = Counter(s.fallback_reason for s in selections if s.fallback_reason)
    modes: Counter[str] = Counter(s.response_mode or "none" for s in selections)
    return {
        "model_ms": percentiles([s.latency_ms for s in selections]),
        "settled_ms": percentiles([t.settled_ms for t in turns if t.settled_ms is not None]),
        "unsettled": sum(t.settled_ms is None for t in turns),
        "strategy": dict(Counter(s.strategy for s in selections)),
        "response_mode": dict(modes),
        "queries_with_rejected_refs": sum(bool(s.rejected) for s in selections),
        "rejected_refs": dict(rejected),
        "fallback": dict(fallbacks),
        "initial_phase": dict(Counter(t.initial.phase if t.initial else "none" for t in turns)),
    }
