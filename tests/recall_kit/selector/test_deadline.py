"""The deadline is a timeout scope around the whole call; cancellation closes the request at once."""

from __future__ import annotations

import asyncio
import time

import pytest

from selector_helpers import kwargs_for, make_docs, run_checked, select_with
from recall_kit import ModelSelector
from recall_kit.testing import Reply, ScriptedChatServer

DOCS = make_docs(10)
FALLBACK = DOCS[:2]
# The 50 ms overrun target is a benchmark figure (docs/benchmarks.md, "Deadline overrun and soak");
# here the bound only has to sit far below what the replies would take without the deadline (5 s, never)
# and above what a busy 2-core machine adds to a wake-up.
OVERRUN_S = 1.0


@pytest.mark.parametrize("reply", [Reply.hang(), Reply.drip(interval_ms=50), Reply.empty().after(5_000)],
                         ids=["hang", "drip", "slow"])
def test_deadline_cuts_the_request(server: ScriptedChatServer, reply: Reply) -> None:
    timeout = 0.4
    started = time.perf_counter()
    selection, [request] = select_with(server, reply, candidates=DOCS, fallback=FALLBACK, timeout=timeout)
    elapsed = time.perf_counter() - started
    assert selection.strategy == "heuristic" and selection.docs == tuple(FALLBACK)
    assert selection.fallback_reason == "deadline of 0.4 s exceeded"
    assert timeout <= elapsed < timeout + OVERRUN_S, elapsed
    assert selection.latency_ms < (timeout + OVERRUN_S) * 1000
    assert request.connection_closed.wait(1.0), "server never saw the connection close"


def test_drip_fast_enough_is_read_to_the_end(server: ScriptedChatServer) -> None:
    ref = DOCS[1].ref
    selection, _ = select_with(server, Reply.drip(0.5, ref), candidates=DOCS, timeout=10)
    assert selection.accepted == (ref,)


def test_deadline_covers_the_retry_wait(server: ScriptedChatServer) -> None:
    started = time.perf_counter()
    selection, requests = select_with(server, Reply.rate_limited(0.2), Reply.hang(), candidates=DOCS,
                                      fallback=FALLBACK, timeout=0.5)
    assert len(requests) == 2
    assert selection.fallback_reason == "deadline of 0.5 s exceeded"
    assert time.perf_counter() - started < 0.5 + OVERRUN_S


@pytest.mark.parametrize("reply", [Reply.hang(), Reply.drip(interval_ms=20), Reply.empty().after(5_000)],
                         ids=["hang", "drip", "slow"])
def test_cancellation_propagates_and_closes_the_request_at_once(server: ScriptedChatServer, reply: Reply) -> None:
    server.script(reply)

    async def main() -> float:
        async with ModelSelector(**kwargs_for(server)) as selector:
            task = asyncio.create_task(selector.select("q", DOCS, fallback=FALLBACK))
            await asyncio.to_thread(server.wait_for_requests, 1)
            await asyncio.sleep(0.05)  # let the drip start
            cancelled_at = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return cancelled_at

    cancelled_at = run_checked(main)
    [request] = server.requests
    assert request.connection_closed.wait(1.0), "server never saw the connection close"
    assert request.closed_at is not None and request.closed_at - cancelled_at < 0.1


def test_selector_usable_after_a_cancelled_call(server: ScriptedChatServer) -> None:
    server.script(Reply.hang(), Reply.select(DOCS[0].ref))

    async def main():
        async with ModelSelector(**kwargs_for(server)) as selector:
            task = asyncio.create_task(selector.select("q", DOCS))
            await asyncio.to_thread(server.wait_for_requests, 1)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return await selector.select("q", DOCS)

    assert run_checked(main).accepted == (DOCS[0].ref,)


def test_concurrent_selections_share_one_selector(server: ScriptedChatServer) -> None:
    refs = [d.ref for d in DOCS[:4]]
    server.script(*(Reply.select(r) for r in refs))
    server.hold()  # no answer until all four requests are in: one after another, the second never comes

    async def main():
        async with ModelSelector(**kwargs_for(server)) as selector:
            pending = [asyncio.ensure_future(selector.select("q", DOCS)) for _ in refs]
            await asyncio.to_thread(server.wait_for_requests, len(refs), 20.0)
            server.release(len(refs))
            return await asyncio.gather(*pending)

    selections = run_checked(main)
    assert sorted(s.accepted[0] for s in selections) == sorted(refs)


def test_selector_usable_again_after_aclose_in_another_event_loop(server: ScriptedChatServer) -> None:
    selector = ModelSelector(**kwargs_for(server))
    server.script(Reply.select(DOCS[0].ref), Reply.select(DOCS[1].ref))

    async def select_then_close():
        try:
            return await selector.select("q", DOCS)
        finally:
            await selector.aclose()  # connections belong to this loop: release them before it ends

    first, second = run_checked(select_then_close), run_checked(select_then_close)
    assert (first.accepted, second.accepted) == ((DOCS[0].ref,), (DOCS[1].ref,))
