"""Background enrichment on a real watched store: new memories get terms without a restart, paced,
never in a recall's way, and close() leaves nothing running."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
from enrich_support import GOOD_ANSWER, Events, answer, file_bytes, memory_text, wait_for_snapshot, write_memories

from memory_store import MemoryStore, RecallKitError, Snapshot, read_enrichment, sidecar_path
from recall_kit import EnrichEvent, Enricher, Event, Recaller, RecallEvent, open_recaller
from recall_kit.testing import Reply, ScriptedChatServer

WAIT_S = 10.0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "mem"
    root.mkdir()
    return root


@pytest.fixture
def store(root: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(root, debounce_ms=20) as store:
        yield store


def enrich_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "recall-kit-enrich"]


def test_new_memory_is_enriched_and_reaches_the_snapshot_without_restart(
    root: Path, store: MemoryStore, server: ScriptedChatServer
) -> None:
    server.default = answer()
    events = Events()
    with Recaller(store, telemetry=events, enrich=Enricher(server.base_url, "m", timeout=5),
                  enrich_calls_per_minute=600) as recaller:
        (root / "tea.md").write_text(memory_text("Tea", "green tea at four", "Sencha."), encoding="utf-8")
        before = file_bytes(root)
        event = events.next_enrich()
        assert (event.ref, event.outcome, event.reason) == ("mem/tea.md", "enriched", None)
        assert (event.keywords, event.usage_scenarios) == (4, 1) and event.duration_ms > 0
        snapshot = wait_for_snapshot(store, lambda s: s.docs.get("mem/tea.md") is not None
                                     and s.docs["mem/tea.md"].enrichment is not None)
        enrichment = snapshot.docs["mem/tea.md"].enrichment
        assert enrichment is not None and enrichment.keywords == tuple(GOOD_ANSWER["keywords"])
        assert event.sha256 == snapshot.docs["mem/tea.md"].content_hash
        assert file_bytes(root) == before
        assert recaller.enrichment is not None and recaller.enrichment.running
    assert len(server.requests) == 1  # the enriched version is not asked for again
    assert enrich_threads() == []


def test_changed_memory_is_enriched_again(root: Path, store: MemoryStore, server: ScriptedChatServer) -> None:
    server.script(answer(), answer({"keywords": ["oolong"], "usage_scenarios": []}))
    events = Events()
    path = root / "tea.md"
    with Recaller(store, telemetry=events, enrich=Enricher(server.base_url, "m"), enrich_calls_per_minute=600):
        path.write_text(memory_text("Tea", "green tea at four", "Sencha."), encoding="utf-8")
        assert events.next_enrich().outcome == "enriched"
        wait_for_snapshot(store, lambda s: "mem/tea.md" in s.docs and s.docs["mem/tea.md"].enrichment is not None)
        path.write_text(memory_text("Tea", "green tea at four", "Oolong on Fridays."), encoding="utf-8")
        assert events.next_enrich().outcome == "enriched"
        snapshot = wait_for_snapshot(store, lambda s: (e := s.docs["mem/tea.md"].enrichment) is not None
                                     and e.keywords == ("oolong",))
    assert "Oolong" in server.requests[1].user_message
    entries, problems = read_enrichment(sidecar_path(root))
    assert problems == [] and entries["tea.md"].sha256 == snapshot.docs["mem/tea.md"].content_hash


def test_a_store_given_a_sidecar_gets_its_terms_written_there_and_sees_them(
    tmp_path: Path, root: Path, server: ScriptedChatServer
) -> None:
    mapped = tmp_path / "dataset" / "enrichment.jsonl"
    mapped.parent.mkdir()
    server.default = answer()
    events = Events()
    with MemoryStore.open(root, debounce_ms=20, enrichment={"mem": mapped}) as store, Recaller(
        store, telemetry=events, enrich=Enricher(server.base_url, "m", timeout=5), enrich_calls_per_minute=600
    ):
        (root / "tea.md").write_text(memory_text("Tea", "green tea at four", "Sencha."), encoding="utf-8")
        assert events.next_enrich().outcome == "enriched"
        snapshot = wait_for_snapshot(store, lambda s: "mem/tea.md" in s.docs and s.docs["mem/tea.md"].enrichment is not None)
    entries, problems = read_enrichment(mapped)
    assert problems == [] and entries["tea.md"].sha256 == snapshot.docs["mem/tea.md"].content_hash
    assert not sidecar_path(root).exists()  # the root's own sidecar is not where this store reads
    with MemoryStore.open(root, watch=False, enrichment={"mem": mapped}) as later:
        enrichment = later.snapshot().docs["mem/tea.md"].enrichment
    assert enrichment is not None and enrichment.keywords == tuple(GOOD_ANSWER["keywords"])


def test_calls_are_paced_and_one_at_a_time(tmp_path: Path, server: ScriptedChatServer) -> None:
    root = write_memories(tmp_path / "mem")
    server.default = answer().after(100)
    events = Events()
    interval_s = 0.4
    with MemoryStore.open(root, debounce_ms=20) as store, Recaller(
        store, telemetry=events, enrich=Enricher(server.base_url, "m"), enrich_calls_per_minute=60 / interval_s
    ):
        done = [events.next_enrich() for _ in range(3)]
    assert {e.ref for e in done} == {"mem/db/postgres.md", "mem/deploy.md", "mem/tea.md"}
    starts = [r.received_at for r in server.requests]
    assert len(starts) == 3
    # each call starts no sooner than the interval after the previous one ended
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:])]
    assert all(gap >= interval_s - 0.02 for gap in gaps), gaps


def test_failure_is_reported_and_not_retried_at_once(root: Path, store: MemoryStore, server: ScriptedChatServer) -> None:
    server.default = Reply.error(401, "invalid api key")
    events = Events()
    with Recaller(store, telemetry=events, enrich=Enricher(server.base_url, "m"), enrich_calls_per_minute=6000):
        (root / "a.md").write_text(memory_text("A", "first", "x"), encoding="utf-8")
        failed = events.next_enrich()
        assert (failed.ref, failed.outcome, failed.reason, failed.keywords) == ("mem/a.md", "failed", "HTTP 401", 0)
        server.default = answer()
        (root / "b.md").write_text(memory_text("B", "second", "y"), encoding="utf-8")
        ok = events.next_enrich()  # b.md's snapshot wakes the worker; a.md's failed version waits its turn
        assert (ok.ref, ok.outcome) == ("mem/b.md", "enriched")
    assert [r.reply for r in server.requests] == ["error", "content"]
    assert not sidecar_path(root).exists() or "a.md" not in read_enrichment(sidecar_path(root))[0]


def test_recall_never_waits_for_enrichment_and_close_cuts_the_call(
    root: Path, server: ScriptedChatServer
) -> None:
    (root / "db.md").write_text(memory_text("Postgres", "atlas postgres pgbouncer settings", "x"), encoding="utf-8")
    server.default = Reply.hang()
    with MemoryStore.open(root, debounce_ms=20) as store:
        recaller = Recaller(store, enrich=Enricher(server.base_url, "m", timeout=60), enrich_calls_per_minute=600)
        try:
            (hanging,) = server.wait_for_requests(1)

            async def turn():  # type: ignore[no-untyped-def]
                async with recaller.session() as session:
                    session.begin("atlas postgres pgbouncer settings")
                    return await session.consume("initial")

            delivery = asyncio.run(turn())
            assert delivery is not None and delivery.refs == ("mem/db.md",)
            assert not hanging.connection_closed.is_set()  # the enrichment call is still in flight
        finally:
            recaller.close()
        assert hanging.connection_closed.wait(5)
        assert enrich_threads() == []


def test_background_enrichment_needs_a_watched_store(root: Path, server: ScriptedChatServer) -> None:
    with MemoryStore.open(root, watch=False) as store:
        snapshot = store.snapshot()
    with pytest.raises(RecallKitError, match="needs a MemoryStore"):
        Recaller(snapshot, enrich=Enricher(server.base_url, "m"))
    assert enrich_threads() == []
    before = set(threading.enumerate())
    with pytest.raises(RecallKitError, match=r"open the roots with watch=True"):  # the one check, from either door
        open_recaller([root], watch=False, use_cache=False, enrich=Enricher(server.base_url, "m"))
    assert enrich_threads() == [] and set(threading.enumerate()) <= before  # nothing left open
