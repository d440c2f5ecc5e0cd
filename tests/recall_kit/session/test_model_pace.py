"""The initial point waits only for a model that can answer within the wait (docs/lifecycle.md,
"Waiting for the model"): real store, heuristic and selector over loopback HTTP to a scripted
model that answers slowly or at once. Nothing here measures a speed: whether the initial point
waited is whether ``consume`` suspended at all."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine
from typing import Any

import pytest

from session_support import DB, FAST_DB_QUERY, NO_FAST_QUERY, TEA, make_recaller, run, warm_up
from recall_kit import RecallSession
from recall_kit._pace import PACE_MIN_SAMPLES, PACE_PROBE_AFTER, PACE_SAMPLES, ModelPace
from recall_kit.testing import Reply

SLOW_MS = 300  # the scripted model's slow answers, far past the test's 40 ms wait


class _FastStageDone:
    """The recaller's fast stage, setting ``done`` once it has answered (the session publishes it then)."""

    def __init__(self, heuristic: Any) -> None:
        self.heuristic, self.done = heuristic, asyncio.Event()

    def recall(self, query: str, *, exclude: Any = ()) -> Any:
        try:
            return self.heuristic.recall(query, exclude=exclude)
        finally:
            self.done.set()


async def silent_prompt(recaller: Any) -> RecallSession:
    """A session begun on a prompt the fast stage hands nothing to, once its fast stage has answered."""
    fast = _FastStageDone(recaller.stages.heuristic)
    session = RecallSession(dataclasses.replace(recaller.stages, heuristic=fast), "silent")
    session.begin(NO_FAST_QUERY)
    await fast.done.wait()
    return session


def without_waiting(consume: Coroutine[Any, Any, Any]) -> Any:
    """What ``consume`` returns when it runs to its end in one step; AssertionError when it suspends
    (it waited for the recall)."""
    try:
        consume.send(None)
    except StopIteration as returned:
        return returned.value
    consume.close()
    raise AssertionError("the initial point waited")


def settled(log: Any) -> int:
    return sum(1 for r in log.recalls if r.settled)


async def slow_answers(recaller: Any, log: Any, count: int) -> None:
    """``count`` silent prompts whose model answers after the initial wait: the initial point waits
    and misses, the answer comes at the tool-result point."""
    for _ in range(count):
        session = recaller.session()
        session.begin(NO_FAST_QUERY)
        assert await session.consume("initial") is None
        before = settled(log)
        await log.wait_for(lambda: settled(log) > before)
        refined = await session.consume("tool_result")
        assert refined is not None and refined.refs == (TEA,)  # it answered, just late
        await session.close()


def test_after_slow_answers_the_silent_initial_point_no_longer_waits(store, log, chat_server):
    server = chat_server(default=Reply.select(TEA).after(SLOW_MS))

    async def scenario() -> None:
        recaller = make_recaller(store, log, server, initial_wait_ms=40)
        await warm_up(recaller, server)
        await slow_answers(recaller, log, PACE_MIN_SAMPLES)
        pace = recaller.selector.pace
        assert (pace.stats().waited, pace.stats().let_go) == (PACE_MIN_SAMPLES, 0)
        session = await silent_prompt(recaller)
        assert without_waiting(session.consume("initial")) is None
        assert pace.stats().let_go == 1 and session.pending  # the model still runs, for the tool-result point
        await log.wait_for(lambda: settled(log) > PACE_MIN_SAMPLES)
        refined = await session.consume("tool_result")
        assert refined is not None and (refined.refs, refined.phase) == ((TEA,), "refined")
        await session.close()
        await recaller.selector.aclose()

    run(scenario())


def test_a_prompt_the_fast_stage_answers_is_still_answered_at_the_initial_point_once_the_model_is_let_go(
    store, log, chat_server
):
    server = chat_server(default=Reply.select(TEA).after(SLOW_MS))

    async def scenario() -> None:
        recaller = make_recaller(store, log, server, initial_wait_ms=40)
        await warm_up(recaller, server)
        await slow_answers(recaller, log, PACE_MIN_SAMPLES)
        session = recaller.session()
        session.begin(FAST_DB_QUERY)  # consumed at once: the fast stage has not run yet
        delivery = await session.consume("initial")
        assert delivery is not None and (delivery.refs, delivery.phase) == ((DB,), "fast")
        await session.close()
        await recaller.selector.aclose()

    run(scenario())


def test_a_fast_model_still_gets_its_answer_at_the_initial_point(store, log, chat_server):
    server = chat_server(default=Reply.select(TEA))

    async def scenario() -> None:
        recaller = make_recaller(store, log, server, initial_wait_ms=10_000)  # the answer ends the wait
        await warm_up(recaller, server)
        for _ in range(PACE_SAMPLES + PACE_PROBE_AFTER):
            session = recaller.session()
            session.begin(NO_FAST_QUERY)
            delivery = await session.consume("initial")
            assert delivery is not None and (delivery.refs, delivery.phase, delivery.point) == ((TEA,), "refined", "initial")
            await session.close()
        stats = recaller.selector.pace.stats()
        assert (stats.let_go, stats.samples) == (0, PACE_SAMPLES)
        await recaller.selector.aclose()

    run(scenario())


def test_a_model_that_becomes_fast_wins_the_wait_back(store, log, chat_server):
    server = chat_server(default=Reply.select(TEA))

    async def scenario() -> None:
        recaller = make_recaller(store, log, server, initial_wait_ms=150)
        await warm_up(recaller, server)
        server.script(*[Reply.hang()] * PACE_MIN_SAMPLES)  # silent past the wait, until the turn ends
        for _ in range(PACE_MIN_SAMPLES):
            session = recaller.session()
            session.begin(NO_FAST_QUERY)
            assert await session.consume("initial") is None
            session.finish()
            await session.close()
        for _ in range(PACE_MIN_SAMPLES):  # now it answers at once, while nothing waits for it yet
            session = await silent_prompt(recaller)
            assert without_waiting(session.consume("initial")) is None
            before = settled(log)
            await log.wait_for(lambda: settled(log) > before)
            await session.close()
        session = recaller.session()  # as many answers in time as misses: the median is in time again
        session.begin(NO_FAST_QUERY)
        delivery = await session.consume("initial")
        assert delivery is not None and (delivery.refs, delivery.phase) == ((TEA,), "refined")
        await session.close()
        await recaller.selector.aclose()

    run(scenario())


def test_turns_that_end_before_any_answer_still_probe_now_and_then():
    pace = ModelPace()
    for _ in range(PACE_MIN_SAMPLES):
        pace.unanswered(250.0)
    decisions = [pace.should_wait(100.0) for _ in range(2 * (PACE_PROBE_AFTER + 1))]
    assert decisions == ([False] * PACE_PROBE_AFTER + [True]) * 2  # nothing new came: one in nine waits
    pace.answered(30.0)
    pace.answered(40.0)
    pace.answered(50.0)
    assert pace.should_wait(100.0)  # three of six in time: the median is at the bound


def test_a_silence_shorter_than_the_wait_says_nothing_about_it():
    pace = ModelPace()
    for _ in range(PACE_SAMPLES):
        pace.unanswered(20.0)  # a 20 ms wait missed: says nothing about a 100 ms one
    assert pace.should_wait(100.0) and pace.stats().let_go == 0
    assert not pace.should_wait(10.0)  # but it does about a 10 ms wait


@pytest.mark.parametrize("options", [{"samples": 2, "min_samples": 3}, {"min_samples": 0}, {"probe_after": 0}])
def test_a_pace_that_could_never_decide_is_refused(options):
    with pytest.raises(ValueError, match="ModelPace needs"):
        ModelPace(**options)
