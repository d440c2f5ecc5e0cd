"""Skipping the model when the fast answer is certain: no request reaches the model, the recall settles
with the fast result at once and says so in its telemetry; an uncertain prompt is still refined."""

from __future__ import annotations

from pathlib import Path

from recall_kit import SKIP_MODEL_WHEN_CERTAIN, SelectorConfig, open_recaller
from recall_kit.testing import Reply
from session_support import DB, DEPLOY, NO_FAST_QUERY, EventLog, TEA, run

CERTAIN = "atlas postgres pgbouncer"  # every word in db.md's name or description; deploy.md scores far below


def _turn(memory_root: Path, base_url: str, query: str, log: EventLog, *, skip: bool) -> tuple[str, tuple[str, ...]]:
    config = SelectorConfig(base_url=base_url, model="scripted")

    async def turn() -> tuple[str, tuple[str, ...]]:
        async with open_recaller(
            [memory_root], watch=False, use_cache=False, selector=config, telemetry=log, skip_certain=skip
        ) as recaller:
            async with recaller.session() as session:
                session.begin(query)
                delivery = await session.consume("initial")
                await log.wait_for(lambda: any(e.settled for e in log.recalls))
                later = await session.consume("tool_result")
                session.finish()
        got = [d for d in (delivery, later) if d is not None]
        return got[-1].phase if got else "none", tuple(ref for d in got for ref in d.refs)

    return run(turn())


def test_a_certain_fast_answer_settles_without_the_model_and_says_so(memory_root: Path, chat_server) -> None:
    server = chat_server(default=Reply.select(DEPLOY))  # a model that would choose otherwise
    log = EventLog()
    phase, refs = _turn(memory_root, server.base_url, CERTAIN, log, skip=True)
    assert (phase, refs) == ("fast", (DB,)) and server.requests == []
    (recall,) = log.recalls
    assert recall.model_skipped and recall.settled and recall.model_ms is None
    assert recall.to_dict()["model_skipped"] is True


def test_with_skipping_off_the_same_prompt_asks_the_model(memory_root: Path, chat_server) -> None:
    server = chat_server(default=Reply.select(DEPLOY))
    log = EventLog()
    phase, refs = _turn(memory_root, server.base_url, CERTAIN, log, skip=False)
    assert phase == "refined" and DEPLOY in refs and len(server.requests) == 1
    assert [e.model_skipped for e in log.recalls] == [False]
    assert SKIP_MODEL_WHEN_CERTAIN is False  # the default, measured in docs/benchmarks.md


def test_a_prompt_the_fast_stage_is_not_certain_of_is_still_refined(memory_root: Path, chat_server) -> None:
    server = chat_server(default=Reply.select(TEA))
    log = EventLog()
    phase, refs = _turn(memory_root, server.base_url, NO_FAST_QUERY, log, skip=True)
    assert (phase, refs) == ("refined", (TEA,)) and len(server.requests) == 1
    assert [e.model_skipped for e in log.recalls] == [False]
