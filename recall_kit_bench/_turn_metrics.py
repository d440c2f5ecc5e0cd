"""Turns over a dataset, and what they add up to."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from recall_kit import Recaller, UsageError
from recall_kit.turns import ObservedTurn, TurnRunner
from recall_kit_bench._datasets import EvalQuery
from recall_kit_bench._evaluation import Percentiles, QueryOutcome, percentiles


def run_turns(
    queries: Sequence[str],
    recaller_factory: Callable[[], Recaller],
    *,
    tool_turn: bool = False,
    on_turn: Callable[[ObservedTurn], None] | None = None,
) -> list[ObservedTurn]:
    """Every query in order on one event loop; tool-using turns wait for the recall to settle."""

    async def all_turns() -> list[ObservedTurn]:
        async with recaller_factory() as recaller:  # on the loop: the selector's connections belong to it
            runner = TurnRunner(recaller)
            turns = []
            for query in queries:
                turns.append(await runner.run(query, between=runner.settle_bound() if tool_turn else None))
                if on_turn is not None:
                    on_turn(turns[-1])
        return turns

    return asyncio.run(all_turns())


def turn_outcomes(queries: Sequence[EvalQuery], turns: Sequence[ObservedTurn], part: str) -> list[QueryOutcome]:
    """QueryOutcomes for one part of each turn: ``initial`` (the no-tool turn), ``tool_result``,
    ``refined`` (the settled selection in full) or ``turn`` (everything by the first tool result)."""

    def refs(turn: ObservedTurn) -> tuple[str, ...]:
        if part == "initial":
            return turn.initial_refs
        if part == "tool_result":
            return turn.tool_refs
        if part == "refined":
            return tuple(d.ref for d in turn.selection.docs) if turn.selection is not None else ()
        if part == "turn":
            return turn.initial_refs + turn.tool_refs
        raise UsageError(f"unknown turn part {part!r}")

    return [QueryOutcome(q, refs(t), t.wait_ms, t.fast_ms) for q, t in zip(queries, turns)]


@dataclass(frozen=True, slots=True)
class RefinementSummary:
    """Model latency, validation rejections and fallbacks (by reason) over tool-using turns."""

    model_ms: Percentiles
    settled_ms: Percentiles
    unsettled: int
    strategy: dict[str, int]
    response_mode: dict[str, int]
    queries_with_rejected_refs: int
    rejected_refs: dict[str, int]
    fallback: dict[str, int]
    initial_phase: dict[str, int]

    @classmethod
    def of(cls, turns: Sequence[ObservedTurn]) -> RefinementSummary:
        """The summary of ``turns``: their selections, settle times and initial phases."""
        selections = [t.selection for t in turns if t.selection is not None]
        return cls(
            model_ms=percentiles([s.latency_ms for s in selections]),
            settled_ms=percentiles([t.settled_ms for t in turns if t.settled_ms is not None]),
            unsettled=sum(t.settled_ms is None for t in turns),
            strategy=dict(Counter(s.strategy for s in selections)),
            response_mode=dict(Counter(s.response_mode or "none" for s in selections)),
            queries_with_rejected_refs=sum(bool(s.rejected) for s in selections),
            rejected_refs=dict(Counter(reason for s in selections for _, reason in s.rejected)),
            fallback=dict(Counter(s.fallback_reason for s in selections if s.fallback_reason)),
            initial_phase=dict(Counter(t.initial.phase if t.initial else "none" for t in turns)),
        )

    def as_dict(self) -> dict[str, Any]:
        """The summary as a JSON object, one key per field."""
        return {
            "model_ms": self.model_ms.as_dict(),
            "settled_ms": self.settled_ms.as_dict(),
            "unsettled": self.unsettled,
            "strategy": self.strategy,
            "response_mode": self.response_mode,
            "queries_with_rejected_refs": self.queries_with_rejected_refs,
            "rejected_refs": self.rejected_refs,
            "fallback": self.fallback,
            "initial_phase": self.initial_phase,
        }
