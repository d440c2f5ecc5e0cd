"""SyncRecallSession: the same lifecycle from plain threads, over a background loop thread."""

from __future__ import annotations

import threading
import time

import pytest

from recall_kit import SyncRecallSession
from recall_kit import RecallKitError
from recall_kit.testing import Reply
from session_support import DB, DEPLOY, FAST_DB_QUERY, NO_FAST_QUERY, make_recaller


def warm_up_sync(session: SyncRecallSession, server, log) -> None:
    """A first turn on the session's loop so the selector's HTTP client exists before we measure."""
    server.script(Reply.empty())
    session.begin(FAST_DB_QUERY)
    log.wait_for_blocking(lambda: any(r.settled for r in log.recalls))
    session.finish()
    session.reset()


def later_discards(log) -> list[str | None]:
    return [e.reason for e in log.deliveries if e.handle_id > 1 and e.point == "discarded"]


def session_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "recall-kit-session"]


def test_sync_session_delivers_fast_then_refined_from_a_plain_thread(store, log, chat_server):
    server = chat_server(default=Reply.select(DB, DEPLOY).after(80))
    recaller = make_recaller(store, log, server)
    with SyncRecallSession(recaller) as session:
        session.begin(FAST_DB_QUERY)
        fast = session.consume("initial")
        assert fast is not None and (fast.refs, fast.phase) == ((DB,), "fast")
        log.wait_for_blocking(lambda: any(r.settled for r in log.recalls))
        refined = session.consume("tool_result")
        assert refined is not None and (refined.refs, refined.placement) == ((DEPLOY,), "append")
        assert session.surfaced_paths == {DB, DEPLOY}
        assert not session.pending
    assert session_threads() == []


def test_sync_session_waits_at_most_the_ceiling_and_finish_discards(store, log, chat_server):
    server = chat_server(default=Reply.hang())
    session = make_recaller(store, log, server).sync_session()
    warm_up_sync(session, server, log)
    session.begin(NO_FAST_QUERY)
    started = time.perf_counter()
    assert session.consume("initial") is None
    waited = (time.perf_counter() - started) * 1000
    assert 99 <= waited < 1000  # the ceiling ended it: the model never answers
    session.finish()
    session.close()
    assert later_discards(log) == ["no_safe_delivery_point"]
    assert server.requests[-1].connection_closed.wait(2.0)
    assert session_threads() == []


def test_threading_event_abort_ends_the_initial_wait(store, log, chat_server):
    server = chat_server(default=Reply.hang())
    session = make_recaller(store, log, server).sync_session()
    warm_up_sync(session, server, log)
    abort = threading.Event()
    session.begin(NO_FAST_QUERY, abort=abort)
    timer = threading.Timer(0.02, abort.set)
    timer.start()
    started = time.perf_counter()
    assert session.consume("initial") is None
    waited = (time.perf_counter() - started) * 1000
    timer.join()
    session.close()
    assert 15 <= waited < 95, f"waited {waited:.1f} ms"  # the abort ended it, before the ceiling
    assert later_discards(log) == ["abort"]


def test_cancel_reset_and_closed_session(store, log, chat_server):
    server = chat_server(default=Reply.hang())
    session = make_recaller(store, log, server).sync_session()
    session.begin(FAST_DB_QUERY)
    assert session.consume("initial").refs == (DB,)
    session.cancel("abort")
    assert session.surfaced_paths == {DB}
    session.reset()
    assert session.surfaced_paths == frozenset()
    session.close()
    session.close()  # idempotent
    with pytest.raises(RecallKitError):
        session.begin(FAST_DB_QUERY)
    with pytest.raises(RecallKitError):
        session.consume("initial")
    assert log.discard_reasons() == ["abort"]
    assert session_threads() == []


def test_closing_a_sync_session_and_its_recaller_leaves_no_connection_to_the_model_open(store, log, chat_server):
    server = chat_server(default=Reply.select(DEPLOY))
    recaller = make_recaller(store, log, server)
    session = recaller.sync_session()
    session.begin(FAST_DB_QUERY)
    session.consume("initial")
    log.wait_for_blocking(lambda: any(r.settled for r in log.recalls))
    (request,) = server.wait_for_requests(1)
    assert not request.connection_closed.is_set()  # keep-alive: the selector's client holds it
    session.close()
    recaller.close()
    assert request.connection_closed.wait(5), "the selector's connection stayed open after close()"


def test_a_sync_session_that_cannot_be_made_leaves_no_thread_running(store, log, chat_server):
    # each failed SyncRecallSession(...) left its loop thread running until the process exited
    recaller = make_recaller(store, log, chat_server(default=Reply.empty()))
    recaller.close()
    before = session_threads()
    for _ in range(3):
        with pytest.raises(RecallKitError, match="closed"):
            SyncRecallSession(recaller)
    with pytest.raises(RecallKitError, match="needs a Recaller"):
        SyncRecallSession(None)  # type: ignore[arg-type]
    assert session_threads() == before
