"""Observed turns: a turn through a real RecallSession with what each stage decided recorded.

A turn is begin, consume("initial"), then (in a tool-using turn) something between the initial and
tool-result points, consume("tool_result"), finish. What happens in between is an option: a tool
call of fixed duration or a wait until the recall settles, bounded. The `query` command shows a
turn with it, and the benchmark harness measures every query of a dataset with it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memory_store import MemoryDoc, fixup_module_metadata
from recall_kit._protocols import FastStage, Selector
from recall_kit._session import RecallSession
from recall_kit._telemetry import RecallEvent, Telemetry

if TYPE_CHECKING:  # the model stage's module loads the HTTP client: a fast-only turn never needs it
    from recall_kit._heuristic import FastResult
    from recall_kit._recaller import Recaller
    from recall_kit._selector import Selection
    from recall_kit._session import Delivery

__all__ = ["Between", "FastStage", "ObservedTurn", "SETTLE_MARGIN_S", "Selector", "ToolCall", "TurnRunner", "UntilSettled"]

SETTLE_MARGIN_S = 1.0  # beyond the selector's own deadline, before a turn stops waiting


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call of fixed duration between the initial and tool-result points."""

    ms: float


@dataclass(frozen=True, slots=True)
class UntilSettled:
    """Wait until the recall settles, at most ``bound_s``; as if a tool ran exactly that long."""

    bound_s: float


Between = ToolCall | UntilSettled


@dataclass(frozen=True, slots=True)
class ObservedTurn:
    """One turn through a session: the initial delivery, and (tool-using) what came after."""

    query: str
    initial: Delivery | None
    wait_ms: float  # time spent in consume("initial")
    fast: FastResult | None  # the session's own fast stage
    tool_result: Delivery | None = None  # at the first tool-result point
    selection: Selection | None = None  # when a model stage ran and finished by the tool-result point
    settled_ms: float | None = None  # begin -> recall settled, if it did by the tool-result point
    learning: bool = False  # the refinement went on after the turn ended, for the learner alone

    @property
    def initial_refs(self) -> tuple[str, ...]:
        """The refs delivered at the initial point."""
        return self.initial.refs if self.initial is not None else ()

    @property
    def tool_refs(self) -> tuple[str, ...]:
        """The refs delivered at the first tool-result point."""
        return self.tool_result.refs if self.tool_result is not None else ()

    @property
    def fast_ms(self) -> float:
        """How long the fast stage took, 0.0 when it recorded no result."""
        return self.fast.elapsed_ms if self.fast is not None else 0.0

    @property
    def duplicates(self) -> int:
        """Documents delivered more than once in the turn (must be 0)."""
        refs = self.initial_refs + self.tool_refs
        return len(refs) - len(set(refs))


@dataclass(slots=True)
class _Record:
    """What one turn's stages did, written by its recorders and its telemetry."""

    fast: FastResult | None = None
    selection: Selection | None = None
    settled_at: float | None = None
    settled: asyncio.Event = field(default_factory=asyncio.Event)


class _RecordingHeuristic:
    """Delegates to the fast stage and keeps the FastResult (scores included) in the turn's record."""

    def __init__(self, heuristic: FastStage, record: _Record) -> None:
        self.heuristic, self.record = heuristic, record

    def recall(self, query: str, *, exclude: Collection[str] = ()) -> FastResult:
        self.record.fast = self.heuristic.recall(query, exclude=exclude)
        return self.record.fast


class _RecordingSelector:
    """Delegates to the model stage and keeps the Selection (accepted and rejected refs)."""

    def __init__(self, selector: Selector, record: _Record) -> None:
        self.selector, self.record = selector, record
        self.timeout: float = selector.timeout
        self.pace = getattr(selector, "pace", None)  # the selector's own record: the turn feeds and reads it
        self.after_turn = getattr(selector, "after_turn", None)  # and its slots for learning after the turn

    async def select(
        self,
        query: str,
        candidates: Sequence[MemoryDoc],
        *,
        preferred: Sequence[MemoryDoc] = (),
        fallback: Sequence[MemoryDoc] = (),
    ) -> Selection:
        self.record.selection = await self.selector.select(query, candidates, preferred=preferred, fallback=fallback)
        return self.record.selection

    async def aclose(self) -> None:
        """The selector is the turn runner's Recaller's: it closes it."""


class TurnRunner:
    """Runs observed turns over one Recaller's store, heuristic and selector.

    Each turn gets its own session, running the Recaller's stages with its fast and model stages
    recorded (``dataclasses.replace``: the learner, telemetry and delivery settings are the
    Recaller's), so turns may run concurrently and still record their own fast result and
    selection. The runner owns nothing: the Recaller it is given closes what it opened.
    """

    def __init__(self, recaller: Recaller) -> None:
        self.recaller = recaller
        self._turn_ids = itertools.count(1)

    def settle_bound(self) -> UntilSettled:
        """Wait for the recall up to the selector's own deadline plus a margin."""
        selector = self.recaller.selector
        return UntilSettled((selector.timeout if selector else 0.0) + SETTLE_MARGIN_S)

    async def run(
        self,
        query: str,
        *,
        between: Between | None = None,
        on_initial: Callable[[ObservedTurn], None] | None = None,
        after: Callable[[ObservedTurn], Awaitable[None]] | None = None,
    ) -> ObservedTurn:
        """One turn; ``between=None`` is a tool-free turn (no tool-result point). ``after`` runs once the
        turn has ended and before its session closes: a refinement that went on for learning alone
        (``ObservedTurn.learning``) still runs then, as it does while an agent waits for its next prompt."""
        record = _Record()

        def on_event(event: object) -> None:
            if isinstance(event, RecallEvent) and event.settled:
                record.settled_at = time.perf_counter()
                record.settled.set()

        shared = self.recaller.stages
        # the shared stages, each model and fast result recorded: the learner and every setting kept
        stages = dataclasses.replace(
            shared,
            heuristic=_RecordingHeuristic(shared.heuristic, record),
            selector=_RecordingSelector(shared.selector, record) if shared.selector is not None else None,
            telemetry=Telemetry(*shared.telemetry.sinks, on_event),
        )
        session = RecallSession(stages, f"turn{next(self._turn_ids)}")
        try:
            session.begin(query)
            began = time.perf_counter()
            initial = await session.consume("initial")
            turn = ObservedTurn(query, initial, (time.perf_counter() - began) * 1000, record.fast)
            if on_initial is not None:
                on_initial(turn)
            if between is not None:
                await _between(between, record)
                settled_at = record.settled_at  # taken before the tool-result point
                tool_result = await session.consume("tool_result")
                settled_ms = None if settled_at is None else (settled_at - began) * 1000
                turn = ObservedTurn(
                    query, initial, turn.wait_ms, turn.fast, tool_result, record.selection, settled_ms
                )
            session.finish()
            if session.learning:
                turn = dataclasses.replace(turn, learning=True)
            if after is not None:
                await after(turn)
        finally:
            await session.close()
        return turn


async def _between(between: Between, record: _Record) -> None:
    if isinstance(between, ToolCall):
        await asyncio.sleep(between.ms / 1000)  # the agent's tool call
        return
    try:
        async with asyncio.timeout(between.bound_s):
            await record.settled.wait()
    except TimeoutError:
        pass  # not settled in time: the tool-result point takes what there is


fixup_module_metadata(__name__, globals(), __all__)
