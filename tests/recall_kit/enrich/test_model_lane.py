"""The model lane: a prompt's selector call always goes first. Background enrichment in the same lane
stops when a prompt needs the model and starts nothing until its call is done; its calls are
bounded in number and paced. Over real HTTP, a real watched store and a Recaller, as in the daemon."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
from enrich_support import Events, answer, memory_text, wait_for_snapshot

from memory_store import MemoryStore
from recall_kit import EnrichEvent, Enricher, ModelSelector, Recaller
from recall_kit._model_lane import ModelLane, Preempted
from recall_kit.testing import Reply, ScriptedChatServer
from recall_kit.testing.scripted_server import is_enrichment



WAIT_S = 10.0


def test_a_foreground_call_preempts_a_background_one_and_holds_the_next_until_it_ends() -> None:
    lane = ModelLane(concurrency=2, calls_per_minute=60_000)
    started, release = threading.Event(), threading.Event()
    outcomes: list[str] = []

    async def background() -> None:
        async with lane.slot() as slot:
            async def call() -> str:
                started.set()
                await asyncio.sleep(30)
                return "finished"
            try:
                outcomes.append(await slot.run(call))
            except Preempted:
                outcomes.append("preempted")
        async with lane.slot() as slot:  # the retry waits for the foreground call to end
            outcomes.append("retried after release" if release.is_set() else "retried too early")

    thread = threading.Thread(target=asyncio.run, args=(background(),))  # a loop of its own, as a store's enrichment
    thread.start()
    assert started.wait(WAIT_S)
    with lane.foreground():
        deadline = time.monotonic() + WAIT_S
        while lane.counts().preempted == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # the preemption crosses to the other thread's loop
        assert lane.counts().preempted == 1 and lane.counts().in_flight == 0
        release.set()
    thread.join(WAIT_S)
    assert outcomes == ["preempted", "retried after release"]
    counts = lane.counts()
    assert (counts.background_calls, counts.foreground_calls, counts.in_flight) == (1, 1, 0)


def test_background_calls_are_bounded_by_the_lanes_concurrency() -> None:
    lane = ModelLane(concurrency=3, calls_per_minute=60_000)
    in_flight, most = 0, 0

    async def one() -> None:
        nonlocal in_flight, most
        async with lane.slot() as slot:
            async def call() -> None:
                nonlocal in_flight, most
                in_flight += 1
                most = max(most, in_flight)
                await asyncio.sleep(0.01)
                in_flight -= 1
            await slot.run(call)

    async def many() -> None:
        await asyncio.gather(*(one() for _ in range(40)))

    asyncio.run(many())
    assert most == 3 and lane.counts().background_calls == 40


def test_a_prompts_selector_request_goes_first_and_enrichment_resumes_after_it(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    root.mkdir()
    (root / "db.md").write_text(memory_text("Postgres", "atlas postgres pgbouncer settings", "x"), encoding="utf-8")
    lane = ModelLane(concurrency=1, calls_per_minute=6_000)
    with ScriptedChatServer(default=Reply.empty(), enrichment=answer()) as server, \
            MemoryStore.open(root, debounce_ms=20) as store:
        server.hold()  # nothing is answered until the test says so
        events = Events()
        recaller = Recaller(store, ModelSelector(server.base_url, "m", lane=lane), telemetry=events,
                            enrich=Enricher(server.base_url, "m", lane=lane))
        try:
            (enrichment,) = server.wait_for_requests(1)
            assert is_enrichment(enrichment)

            async def turn() -> None:
                async with recaller.session() as session:
                    session.begin("atlas postgres pgbouncer settings")
                    await session.consume("initial")
                    requests = await asyncio.to_thread(server.wait_for_requests, 2)
                    assert not is_enrichment(requests[1])
                    # the enrichment call was cut before the selector's was answered
                    assert await asyncio.to_thread(enrichment.connection_closed.wait, WAIT_S)
                    server.release()  # the selector's answer
                    await asyncio.to_thread(events.next_settled_recall)

            asyncio.run(turn())
            retry = server.wait_for_requests(3)[2]
            assert is_enrichment(retry) and retry.received_at > server.requests[1].received_at
            server.release()
            event = events.next_enrich()
            while event.outcome == "preempted":
                event = events.next_enrich()
            assert (event.ref, event.outcome) == ("mem/db.md", "enriched")
            wait_for_snapshot(store, lambda s: s.docs["mem/db.md"].enrichment is not None)
        finally:
            recaller.close()
    kinds = ["enrich" if is_enrichment(r) else "select" for r in server.requests]
    assert kinds == ["enrich", "select", "enrich"]
    assert recaller.enrichment is None or recaller.enrichment.stats().preempted == 1


def test_the_newest_memory_is_enriched_before_the_backlog(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    root.mkdir()
    for i in range(5):
        old = root / f"old{i}.md"
        old.write_text(memory_text(f"Old {i}", "an old note", "x"), encoding="utf-8")
        os.utime(old, (time.time() - 86_400, time.time() - 86_400))
    (root / "new.md").write_text(memory_text("New", "written just now", "x"), encoding="utf-8")
    with ScriptedChatServer(enrichment=answer()) as server, MemoryStore.open(root, debounce_ms=20) as store:
        server.hold()
        with Recaller(store, enrich=Enricher(server.base_url, "m", lane=ModelLane(calls_per_minute=60_000))):
            (first,) = server.wait_for_requests(1)
    assert "Title: New" in first.user_message


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_thousand_memories_written_at_once_wait_in_a_bounded_queue(tmp_path: Path, concurrency: int) -> None:
    root = tmp_path / "mem"
    root.mkdir()
    lane = ModelLane(concurrency=concurrency, calls_per_minute=60_000)
    with ScriptedChatServer(enrichment=answer()) as server, MemoryStore.open(root, debounce_ms=50) as store:
        server.hold()
        recaller = Recaller(store, enrich=Enricher(server.base_url, "m", lane=lane))
        try:
            for i in range(1000):
                (root / f"m{i:04d}.md").write_text(memory_text(f"Memory {i}", f"note number {i}", "x"), encoding="utf-8")
            wait_for_snapshot(store, lambda s: len(s.docs) == 1000, timeout=60)
            server.wait_for_requests(concurrency, timeout=WAIT_S)
            enrichment = recaller.enrichment
            assert enrichment is not None
            stats = enrichment.stats()
            assert (stats.in_flight, stats.pending, stats.calls, stats.enriched) == (concurrency, 1000 - concurrency, concurrency, 0)
            assert len(enrichment._queue) <= enrichment.max_queue  # what is held in memory, whatever is pending
            assert len(server.requests) == concurrency  # held answers: no call beyond the bound
            server.release(2 * concurrency)
            server.wait_for_requests(3 * concurrency, timeout=WAIT_S)
        finally:
            recaller.close()
    assert all(is_enrichment(r) for r in server.requests)
