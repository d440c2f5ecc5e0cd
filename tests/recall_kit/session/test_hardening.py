"""Lifetimes, races and hostile prompts: what an agent can do to a session without breaking it."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings

import pytest

from memory_store import MemoryStore
from recall_kit import FastHeuristic, RecallKitError, Recaller
from recall_kit.testing import Reply
from session_support import DB, FAST_DB_QUERY, NO_FAST_QUERY, make_recaller, run

FILLER = "lorem ipsum dolor sit amet " * 40_000  # about 1 MB of words no memory holds


def test_a_huge_prompt_is_read_by_its_head_and_tail(store: MemoryStore) -> None:
    heuristic = FastHeuristic(store.snapshot())

    def ranked(prompt: str) -> list[str]:
        return [s.doc.ref for s in heuristic.rank(prompt)[0]]

    assert ranked(FAST_DB_QUERY + " " + FILLER)[:1] == [DB]
    assert ranked(FILLER + " " + FAST_DB_QUERY)[:1] == [DB]
    assert ranked(FILLER + " " + FAST_DB_QUERY + " " + FILLER) == []  # the middle is never read


def test_a_huge_prompt_goes_through_a_whole_turn(store: MemoryStore, log, chat_server) -> None:
    server = chat_server(default=Reply.select(DB))
    prompt = FAST_DB_QUERY + "\n" * 10_000_000  # 10 MB: a question, then a pasted wall of blank lines

    async def main() -> tuple[tuple[str, ...], str]:
        with make_recaller(store, log, server) as recaller:
            async with recaller.session() as session:
                session.begin(prompt)
                initial = await session.consume("initial")
                assert initial is not None
                await log.wait_for(lambda: any(r.settled for r in log.recalls))
                session.finish()
            await recaller.selector.aclose()
        return initial.refs, server.requests[-1].query

    refs, sent = run(main())
    assert refs == (DB,)
    assert len(sent) < 10_000 and sent.startswith(FAST_DB_QUERY)


def test_close_wakes_every_thread_waiting_in_the_session(store: MemoryStore, log, chat_server) -> None:
    server = chat_server(default=Reply.hang())
    # a short ceiling keeps every agent cycling through begin and consume (with a long one they all
    # end up waiting on the newest handle together), so close() lands in the middle of calls
    recaller = make_recaller(store, log, server, initial_wait_ms=20)
    session = recaller.sync_session()
    calls = threading.Semaphore(0)
    outcomes: list[str] = []
    lock = threading.Lock()

    def agent() -> None:
        while True:
            try:
                session.begin(NO_FAST_QUERY)
                calls.release()
                session.consume("initial")  # waits for the hanging model, up to the ceiling
                session.consume("tool_result")
            except RecallKitError:
                with lock:
                    outcomes.append("closed")
                return

    threads = [threading.Thread(target=agent, daemon=True) for _ in range(6)]  # a failure must not hang exit
    for thread in threads:
        thread.start()
    for _ in range(60):
        assert calls.acquire(timeout=10)
    session.close()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(t.is_alive() for t in threads), "a thread stayed blocked in the closed session"
    assert outcomes == ["closed"] * len(threads)
    recaller.close()


def test_a_dropped_recaller_warns_and_lets_go_of_the_store(store: MemoryStore) -> None:
    baseline = len(store._subscribers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(50):
            Recaller(store)  # never closed
        gc.collect()
    assert len(store._subscribers) == baseline
    unclosed = [w for w in caught if issubclass(w.category, ResourceWarning) and "unclosed Recaller" in str(w.message)]
    assert len(unclosed) == 50


def test_a_closed_recaller_does_not_warn(store: MemoryStore) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        with Recaller(store):
            pass
        recaller = Recaller(store)
        recaller.close()
        del recaller
        gc.collect()


def test_a_closed_recaller_starts_no_session(store: MemoryStore) -> None:
    from recall_kit import SessionClosedError

    recaller = Recaller(store)
    recaller.close()
    with pytest.raises(SessionClosedError, match="the Recaller is closed"):
        recaller.session()
    with pytest.raises(SessionClosedError, match="the Recaller is closed"):
        recaller.sync_session()


def test_a_heuristic_dropped_unclosed_stops_following_the_store(tmp_path) -> None:
    (tmp_path / "m").mkdir()
    with MemoryStore.open(tmp_path / "m", watch=False) as store:
        baseline = len(store._subscribers)
        for _ in range(20):
            FastHeuristic(store)
        gc.collect()
        assert len(store._subscribers) == baseline


def test_session_close_logs_a_failed_task(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        with Recaller(store) as recaller:
            session = recaller.session()

            async def broken() -> None:
                raise RuntimeError("boom in a recall task")

            session._spawn(broken())
            await session.close()

    asyncio.run(main())
    assert "a recall task failed" in caplog.text and "boom in a recall task" in caplog.text
