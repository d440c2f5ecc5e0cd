"""The prefetch lifecycle (docs/lifecycle.md), one behaviour a test, over real store, heuristic and HTTP."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from session_support import (
    DB, DEPLOY, FAST_DB_QUERY, NO_FAST_QUERY, TEA, make_recaller, run, warm_up,
)
from recall_kit import RecallKitError
from recall_kit.testing import Reply

HANG = Reply.hang()


def ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def test_begin_returns_at_once_while_the_model_hangs(store, log, chat_server):
    server = chat_server(default=HANG)

    async def scenario() -> float:
        session = make_recaller(store, log, server).session()
        started = time.perf_counter()
        session.begin(FAST_DB_QUERY)
        elapsed = ms_since(started)
        await session.close()
        await session.stages.selector.aclose()
        return elapsed

    assert run(scenario()) < 5


def test_fast_result_delivered_while_model_pending(store, log, chat_server):
    server = chat_server(default=Reply.select(DB, DEPLOY).after(2000))

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        started = time.perf_counter()
        delivery = await session.consume("initial")
        waited = ms_since(started)
        assert delivery is not None
        assert (delivery.refs, delivery.phase, delivery.strategy) == ((DB,), "fast", "heuristic")
        assert (delivery.point, delivery.placement) == ("initial", "prepend")
        assert waited < 95, f"waited {waited:.1f} ms for a published fast result"  # not the ceiling
        assert "Postgres conventions" in delivery.text
        assert session.pending  # the refined result can still arrive
        assert log.recalls == []  # the model stage has not settled
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())


def test_empty_fast_result_keeps_waiting_so_a_fast_model_gets_its_chance(store, log, chat_server):
    server = chat_server(default=Reply.select(TEA).after(30))

    async def scenario() -> None:
        recaller = make_recaller(store, log, server)
        await warm_up(recaller, server)
        session = recaller.session()
        session.begin(NO_FAST_QUERY)
        started = time.perf_counter()
        delivery = await session.consume("initial")
        waited = ms_since(started)
        assert delivery is not None
        assert (delivery.refs, delivery.phase, delivery.strategy) == ((TEA,), "refined", "model")
        assert waited >= 25, f"waited {waited:.1f} ms"  # the refined phase shows it beat the ceiling
        assert not session.pending
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())


def test_no_fast_result_and_model_never_answers_returns_nothing_after_the_ceiling(store, log, chat_server):
    server = chat_server(default=HANG)

    async def scenario() -> None:
        recaller = make_recaller(store, log, server)
        await warm_up(recaller, server)
        session = recaller.session()
        session.begin(NO_FAST_QUERY)
        started = time.perf_counter()
        delivery = await session.consume("initial")
        waited = ms_since(started)
        assert delivery is None
        assert 99 <= waited < 1000, f"waited {waited:.1f} ms"  # the ceiling ended it: the model hangs
        assert session.pending
        session.finish()
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    assert log.discard_reasons() == ["no_safe_delivery_point"]


def test_initial_ceiling_is_configurable(store, log, chat_server):
    server = chat_server(default=HANG)

    async def scenario() -> float:
        recaller = make_recaller(store, log, server, initial_wait_ms=20)
        await warm_up(recaller, server)
        session = recaller.session()
        session.begin(NO_FAST_QUERY)
        started = time.perf_counter()
        assert await session.consume("initial") is None
        waited = ms_since(started)
        await session.close()
        await session.stages.selector.aclose()
        return waited

    assert 19 <= run(scenario()) < 60


def test_recall_settled_before_initial_point_delivers_settled_result(store, log, chat_server):
    server = chat_server(default=Reply.select(DB, DEPLOY))

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        await log.wait_settled(handle_id=1)
        delivery = await session.consume("initial")
        assert delivery is not None
        assert (delivery.refs, delivery.phase, delivery.strategy) == ((DB, DEPLOY), "refined", "model")
        assert delivery.placement == "prepend"
        assert not session.pending
        assert await session.consume("tool_result") is None
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())


def test_refined_after_initial_is_delivered_at_next_tool_result_minus_fast_docs(store, log, chat_server):
    server = chat_server(default=Reply.select(DB, DEPLOY).after(150))

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        fast = await session.consume("initial")
        assert fast is not None and fast.refs == (DB,) and fast.phase == "fast"
        started = time.perf_counter()
        assert await session.consume("tool_result") is None  # not settled yet: never waits
        assert ms_since(started) < 5
        await log.wait_settled(handle_id=1)
        refined = await session.consume("tool_result")
        assert refined is not None
        assert (refined.refs, refined.phase, refined.strategy) == ((DEPLOY,), "refined", "model")
        assert (refined.point, refined.placement) == ("tool_result", "append")
        assert refined.latency_ms >= 140
        assert await session.consume("tool_result") is None
        assert session.surfaced_paths == {DB, DEPLOY}
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())


def test_refined_result_already_delivered_in_fast_phase_is_discarded(store, log, chat_server):
    server = chat_server(default=Reply.select(DB).after(60))

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        assert (await session.consume("initial")).refs == (DB,)
        await log.wait_settled(handle_id=1)
        assert await session.consume("tool_result") is None
        assert not session.pending
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    assert log.discard_reasons() == ["already_delivered"]


def test_model_selecting_nothing_is_discarded_as_no_relevant_results(store, log, chat_server):
    server = chat_server(default=Reply.empty().after(60))

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        assert (await session.consume("initial")).refs == (DB,)
        await log.wait_settled(handle_id=1)
        assert await session.consume("tool_result") is None
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    assert log.discard_reasons() == ["no_relevant_results"]


def test_turn_without_tool_calls_discards_the_pending_handle_and_its_request(store, log, chat_server):
    server = chat_server(default=HANG)

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        assert (await session.consume("initial")).phase == "fast"
        request = (await asyncio.to_thread(server.wait_for_requests, 1))[0]
        session.finish()
        assert not session.pending
        assert await asyncio.to_thread(request.connection_closed.wait, 2.0)
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    assert log.discard_reasons() == ["no_safe_delivery_point"]


def test_new_begin_cancels_previous_handle_and_its_http_request(store, log, chat_server):
    server = chat_server(default=HANG)

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        first = (await asyncio.to_thread(server.wait_for_requests, 1))[0]
        session.begin(NO_FAST_QUERY)
        assert await asyncio.to_thread(first.connection_closed.wait, 2.0)
        assert log.terminal(1)[0].reason == "new_query"
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    assert log.discard_reasons() == ["new_query", "shutdown"]


def test_abort_signal_ends_a_pending_initial_wait_at_once(store, log, chat_server):
    server = chat_server(default=HANG)

    async def scenario() -> float:
        recaller = make_recaller(store, log, server)
        await warm_up(recaller, server)
        session = recaller.session()
        abort = asyncio.Event()
        session.begin(NO_FAST_QUERY, abort=abort)
        asyncio.get_running_loop().call_later(0.02, abort.set)
        started = time.perf_counter()
        assert await session.consume("initial") is None
        waited = ms_since(started)
        assert not session.pending
        await session.close()
        await session.stages.selector.aclose()
        return waited

    waited = run(scenario())
    assert 15 <= waited < 95, f"waited {waited:.1f} ms"  # the abort ended it, before the ceiling
    assert log.discard_reasons() == ["abort"]


def test_abort_while_the_model_runs_cancels_its_request(store, log, chat_server):
    server = chat_server(default=HANG)

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        abort = asyncio.Event()
        session.begin(FAST_DB_QUERY, abort=abort)
        assert (await session.consume("initial")).phase == "fast"
        request = (await asyncio.to_thread(server.wait_for_requests, 1))[0]
        abort.set()
        assert await asyncio.to_thread(request.connection_closed.wait, 2.0)
        assert not session.pending
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    assert log.discard_reasons() == ["abort"]


def test_abort_already_set_at_begin_delivers_nothing(store, log, chat_server):
    server = chat_server(default=Reply.select(DB))

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        abort = asyncio.Event()
        abort.set()
        session.begin(FAST_DB_QUERY, abort=abort)
        assert await session.consume("initial") is None
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    assert log.discard_reasons() == ["abort"]
    assert server.requests == []


def test_turn_cancelled_after_the_fast_result_was_published_gets_nothing(store, log, chat_server):
    server = chat_server(default=HANG)

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        await asyncio.to_thread(server.wait_for_requests, 1)  # fast stage done, model in flight
        session.cancel("abort")
        assert await session.consume("initial") is None
        assert await session.consume("tool_result") is None
        assert session.surfaced_paths == frozenset()
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    assert [e.point for e in log.deliveries] == ["discarded"]


def test_fast_result_never_leaks_into_the_next_querys_turn(store, log, chat_server):
    server = chat_server(default=HANG)

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        await asyncio.to_thread(server.wait_for_requests, 1)  # first fast result is published
        session.begin(NO_FAST_QUERY)
        assert await session.consume("initial") is None
        assert await session.consume("tool_result") is None
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    assert all(e.point == "discarded" for e in log.deliveries)


def test_surfaced_docs_are_excluded_from_later_recalls_until_reset(store, log, chat_server):
    server = chat_server(default=Reply.select(DEPLOY))

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        # turn 1: the model picks deploy.md, settled before the initial point
        session.begin(FAST_DB_QUERY)
        await log.wait_settled(handle_id=1)
        assert (await session.consume("initial")).refs == (DEPLOY,)
        # turn 2: the fast phase delivers db.md; deploy.md is kept from the selector's manifest
        server.script(Reply.select(DB).after(300))
        session.begin(FAST_DB_QUERY)
        assert (await session.consume("initial")).refs == (DB,)
        manifest = (await asyncio.to_thread(server.wait_for_requests, 2))[1].manifest_refs
        assert DEPLOY not in manifest and DB in manifest
        # turn 3: both surfaced; neither the heuristic nor the selector may offer them again
        session.begin(FAST_DB_QUERY)
        assert await session.consume("initial") is None
        manifest = (await asyncio.to_thread(server.wait_for_requests, 3))[2].manifest_refs
        assert DB not in manifest and DEPLOY not in manifest and manifest
        assert session.surfaced_paths == {DB, DEPLOY}
        # after reset everything may surface again
        session.reset()
        assert session.surfaced_paths == frozenset()
        server.script(HANG)
        session.begin(FAST_DB_QUERY)
        assert (await session.consume("initial")).refs == (DB,)
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())


def test_one_terminal_event_per_handle_and_fast_and_refined_are_separate(store, log, chat_server):
    server = chat_server(default=Reply.select(DB, DEPLOY).after(60))

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        await session.consume("initial")
        await log.wait_settled(handle_id=1)
        await session.consume("tool_result")
        session.finish()  # nothing pending any more: no second terminal event
        session.begin(NO_FAST_QUERY)
        session.cancel("abort")
        session.cancel("abort")
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    first = [e for e in log.deliveries if e.handle_id == 1]
    assert [(e.phase, e.point, e.terminal) for e in first] == [
        ("fast", "initial", False), ("refined", "tool_result", True)]
    assert [(e.point, e.reason) for e in log.terminal(2)] == [("discarded", "abort")]
    assert sorted(r.handle_id for r in log.recalls) == [1, 2]  # one recall event per handle
    assert [r.settled for r in sorted(log.recalls, key=lambda r: r.handle_id)] == [True, False]


def test_refined_delivery_can_carry_heuristic_strategy_when_the_model_fails(store, log, chat_server):
    server = chat_server(default=Reply.error(401, "invalid api key"))

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        await log.wait_settled(handle_id=1)
        delivery = await session.consume("initial")
        assert delivery is not None
        assert (delivery.refs, delivery.phase, delivery.strategy) == ((DB,), "refined", "heuristic")
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    recall = log.recalls[0]
    assert recall.strategy == "heuristic" and recall.fallback_reason


def test_recall_event_reports_stage_costs(store, log, chat_server):
    server = chat_server(default=Reply.select(DB).after(40))

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY)
        await log.wait_settled(handle_id=1)
        await session.close()
        await session.stages.selector.aclose()

    run(scenario())
    recall = log.recalls[0]
    assert recall.query_chars == len(FAST_DB_QUERY)
    assert recall.docs_scanned >= 1 and recall.docs_selected == 1 and recall.strategy == "model"
    assert recall.fast_ms is not None and recall.fast_ms < 50
    assert recall.model_ms is not None and recall.model_ms >= 35


def test_without_a_selector_the_fast_result_is_the_settled_result(store, log):
    async def scenario() -> None:
        session = make_recaller(store, log).session()
        session.begin(FAST_DB_QUERY)
        delivery = await session.consume("initial")
        assert delivery is not None
        assert (delivery.refs, delivery.phase, delivery.strategy) == ((DB,), "fast", "heuristic")
        assert not session.pending
        session.begin(NO_FAST_QUERY)
        started = time.perf_counter()
        assert await session.consume("initial") is None
        assert ms_since(started) < 20  # settled empty: no reason to wait for the ceiling
        await session.close()

    run(scenario())
    assert log.discard_reasons() == ["no_relevant_results"]


def test_close_cancels_the_request_and_leaves_no_task(store, log, chat_server):
    server = chat_server(default=HANG)

    async def scenario() -> None:
        session = make_recaller(store, log, server).session()
        session.begin(FAST_DB_QUERY, abort=asyncio.Event())
        request = (await asyncio.to_thread(server.wait_for_requests, 1))[0]
        await session.close()
        assert request.connection_closed.is_set() or await asyncio.to_thread(request.connection_closed.wait, 2.0)
        with pytest.raises(RecallKitError):
            session.begin(FAST_DB_QUERY)
        await session.stages.selector.aclose()

    run(scenario())  # run() asserts no task is left
    assert log.discard_reasons() == ["shutdown"]


def test_consume_without_a_handle_returns_none_and_bad_arguments_raise(store, log):
    async def scenario() -> None:
        session = make_recaller(store, log).session()
        assert await session.consume("initial") is None
        assert await session.consume("tool_result") is None
        with pytest.raises(ValueError):
            await session.consume("later")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            session.cancel("bored")
        session.finish()  # nothing pending: a no-op
        await session.close()

    run(scenario())
    assert log.events == []


def test_a_memory_written_while_the_session_lives_is_recalled_next_turn(memory_root, log):
    from memory_store import MemoryStore
    from recall_kit_bench import write_memory

    with MemoryStore.open(memory_root, debounce_ms=20) as store:
        recaller = make_recaller(store, log)
        indexed = threading.Event()
        # subscribers run in order: this one runs after the heuristic has applied the snapshot
        unsubscribe = store.subscribe(lambda snapshot: indexed.set())

        async def scenario() -> None:
            session = recaller.session()
            session.begin("flamingo feeding schedule")
            assert await session.consume("initial") is None
            write_memory(memory_root, "zoo/flamingo.md", "Flamingo feeding", "The flamingo feeding schedule at the zoo", "")
            assert await asyncio.to_thread(indexed.wait, 5.0)
            session.begin("flamingo feeding schedule")
            delivery = await session.consume("initial")
            assert delivery is not None and delivery.refs == ("mem/zoo/flamingo.md",)
            await session.close()

        run(scenario())
        unsubscribe()
        recaller.close()


def test_a_prompt_asked_again_is_discarded_as_already_delivered_with_what_it_had(store, log):
    async def scenario() -> None:
        session = make_recaller(store, log).session()
        session.begin(FAST_DB_QUERY)
        assert (await session.consume("initial")).refs == (DB,)
        session.begin(FAST_DB_QUERY)  # the same question: nothing new to hand over
        assert await session.consume("initial") is None
        session.begin(NO_FAST_QUERY)  # a silence of its own: nothing passed the gate
        assert await session.consume("initial") is None
        await session.close()

    run(scenario())
    discarded = [(e.reason, e.docs) for e in log.deliveries if e.point == "discarded"]
    assert discarded == [("already_delivered", (DB,)), ("no_relevant_results", ())]
