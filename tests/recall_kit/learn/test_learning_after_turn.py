"""A turn that ends before the model answers still teaches: its refinement goes on, for learning only,
and is never delivered. Bounded: one per session, LEARN_MAX_AFTER_TURN over every session of one model stage
(its own slots: nothing process-wide); close cuts it.

A real store on tmp_path, the real selector over loopback HTTP to the scripted chat server, which
holds its answer until the test releases it (no clock decides who comes first)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from recall_kit import LearnEvent, Recaller, SelectorConfig, learnable_words, open_recaller
from recall_kit._after_turn import AfterTurnSlots
from recall_kit._telemetry import Telemetry
from recall_kit.limits import LEARN_MAX_AFTER_TURN
from recall_kit.testing import Reply, ScriptedChatServer
from session_support import EventLog

ONCALL_PARAPHRASE = "who holds the beeper for the payments folks"  # the fast stage finds nothing for it
TEA_PARAPHRASE = "what does the colleague sip around four o'clock"  # nor for this one
LEARNED = Path(".recall-kit") / "learned.jsonl"


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer(default=Reply.select("mem/oncall.md")) as started:
        started.hold()
        yield started


def _recaller(root: Path, server: ScriptedChatServer, log: EventLog, *, learn: bool = True) -> Recaller:
    recaller = open_recaller(
        [root], watch=False, use_cache=False, learn=learn, telemetry=Telemetry(log),
        selector=SelectorConfig(base_url=server.base_url, model="scripted"),
    )
    if recaller.learner is not None:
        # the prompts' words came in an earlier turn (a word is written only then): what a turn here
        # teaches is written at once, as these tests are about when it teaches, not which words
        for prompt in (ONCALL_PARAPHRASE, TEA_PARAPHRASE):
            recaller.learner._seen.turn(learnable_words(prompt).words)
    return recaller


def _learns(log: EventLog) -> list[LearnEvent]:
    return [event for event in log.events if isinstance(event, LearnEvent)]


def _fast(recaller: Recaller, prompt: str) -> list[str]:
    return [scored.doc.ref for scored in recaller.heuristic.recall(prompt).docs]


def _slots(recaller: Recaller) -> AfterTurnSlots:
    slots = getattr(recaller.selector, "after_turn", None)
    assert isinstance(slots, AfterTurnSlots)
    return slots


def test_a_turn_that_ends_before_the_model_answers_still_teaches(root: Path, server: ScriptedChatServer) -> None:
    log = EventLog()
    with _recaller(root, server, log) as recaller:
        assert _fast(recaller, ONCALL_PARAPHRASE) == []
        with recaller.sync_session() as session:
            session.begin(ONCALL_PARAPHRASE)
            assert session.consume("initial") is None  # the model holds its answer
            session.finish()  # the turn ends (the hook's Stop) before the model answered
            assert session.learning
            server.wait_for_requests(1)
            server.release()
            log.wait_for_blocking(lambda: bool(_learns(log)), 10)
            assert session.consume("tool_result") is None  # never delivered
        assert recaller.learner is not None and recaller.learner.wait_idle(10)
        assert _learns(log)[-1].outcome == "learned" and _learns(log)[-1].taught == ("mem/oncall.md",)
        assert _fast(recaller, ONCALL_PARAPHRASE) == ["mem/oncall.md"]
    assert "oncall.md" in (root / LEARNED).read_text()
    # the handle's one terminal event is the discard at finish(); learning later adds a learn event only
    (discard,) = [e for e in log.deliveries if e.terminal]
    assert discard.reason == "no_safe_delivery_point" and [e for e in log.deliveries if not e.terminal] == []
    assert [r.settled for r in log.recalls] == [False]
    assert _slots(recaller).used == 0


def test_a_new_prompt_lets_the_last_refinement_finish_for_learning(root: Path, server: ScriptedChatServer) -> None:
    log = EventLog()
    server.script(Reply.select("mem/oncall.md"), Reply.select("mem/tea.md"))
    with _recaller(root, server, log) as recaller:
        with recaller.sync_session() as session:
            session.begin(ONCALL_PARAPHRASE)
            server.wait_for_requests(1)
            session.begin(TEA_PARAPHRASE)  # the user moved on before the model answered
            assert session.learning
            server.release()
            log.wait_for_blocking(lambda: bool(_learns(log)), 10)
            assert _learns(log)[0].taught == ("mem/oncall.md",)
            server.release()  # the second turn's own refinement is delivered as usual
            log.wait_for_blocking(lambda: any(r.settled for r in log.recalls), 10)
            got = session.consume("tool_result")
            assert got is not None and got.refs == ("mem/tea.md",)


def test_one_refinement_per_session_goes_on_after_its_turn(root: Path, server: ScriptedChatServer) -> None:
    log = EventLog()
    server.script(Reply.select("mem/oncall.md"), Reply.select("mem/tea.md"))
    with _recaller(root, server, log) as recaller:
        with recaller.sync_session() as session:
            session.begin(ONCALL_PARAPHRASE)
            session.finish()
            server.wait_for_requests(1)
            session.begin(TEA_PARAPHRASE)
            session.finish()  # the newer refinement replaces the older one
            server.wait_for_requests(2)
            assert _slots(recaller).used == 1
            server.release(2)
            log.wait_for_blocking(lambda: bool(_learns(log)), 10)
        assert recaller.learner is not None and recaller.learner.wait_idle(10)
        assert [e.taught for e in _learns(log)] == [("mem/tea.md",)]
        assert _fast(recaller, ONCALL_PARAPHRASE) == []


def test_refinements_after_their_turn_are_capped_over_the_model_stages_sessions(root: Path, server: ScriptedChatServer) -> None:
    log = EventLog()

    async def scenario(recaller: Recaller) -> list[bool]:
        sessions = [recaller.session() for _ in range(LEARN_MAX_AFTER_TURN + 2)]
        learning = []
        for session in sessions:
            session.begin(ONCALL_PARAPHRASE)
            session.finish()
            learning.append(session.learning)
        assert _slots(recaller).used == LEARN_MAX_AFTER_TURN
        for session in sessions:
            await session.close()  # cuts what still waits for the model
        assert _slots(recaller).used == 0
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert others == []
        return learning

    with _recaller(root, server, log) as recaller:
        learning = asyncio.run(scenario(recaller))
    assert learning == [True] * LEARN_MAX_AFTER_TURN + [False, False]
    assert _learns(log) == [] and not (root / LEARNED).exists()


def test_close_cuts_a_refinement_that_went_on_after_its_turn(root: Path, server: ScriptedChatServer) -> None:
    log = EventLog()
    with _recaller(root, server, log) as recaller:
        with recaller.sync_session() as session:
            session.begin(ONCALL_PARAPHRASE)
            session.finish()
            server.wait_for_requests(1)
            assert session.learning
        assert _slots(recaller).used == 0  # closing the session cut it
        server.release()
        assert recaller.learner is not None and recaller.learner.wait_idle(10)
    assert _learns(log) == [] and not (root / LEARNED).exists()


@pytest.mark.parametrize("stop", ["cancel", "reset"])
def test_cancel_and_reset_cut_a_refinement_that_went_on_after_its_turn(
    root: Path, server: ScriptedChatServer, stop: str
) -> None:
    log = EventLog()
    with _recaller(root, server, log) as recaller:
        with recaller.sync_session() as session:
            session.begin(ONCALL_PARAPHRASE)
            session.finish()
            assert session.learning
            session.cancel() if stop == "cancel" else session.reset()
            assert not session.learning and _slots(recaller).used == 0
        server.release()
        assert recaller.learner is not None and recaller.learner.wait_idle(10)
    assert _learns(log) == [] and not (root / LEARNED).exists()


def test_without_learning_finish_cuts_the_refinement_at_once(root: Path, server: ScriptedChatServer) -> None:
    log = EventLog()
    with _recaller(root, server, log, learn=False) as recaller:
        with recaller.sync_session() as session:
            session.begin(ONCALL_PARAPHRASE)
            session.finish()
            assert not session.learning and _slots(recaller).used == 0
    assert not (root / LEARNED).exists()


def test_close_gives_up_on_an_update_another_process_holds_the_lock_of(
    root: Path, server: ScriptedChatServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys
    import threading

    monkeypatch.setattr("recall_kit._learn.LEARN_CLOSE_WAIT_S", 0.5)
    lock = root / ".recall-kit" / "learned.jsonl.lock"
    lock.parent.mkdir(mode=0o700, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys\nf = open(sys.argv[1], 'a')\nfcntl.flock(f, fcntl.LOCK_EX)\n"
         "print('held', flush=True)\nsys.stdin.read()\n", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        log = EventLog()
        recaller = _recaller(root, server, log)
        server.release(1)
        with recaller.sync_session() as session:
            session.begin(ONCALL_PARAPHRASE)
            log.wait_for_blocking(lambda: any(r.settled for r in log.recalls), 10)  # the answer is queued to learn
        closed = threading.Event()
        closer = threading.Thread(target=lambda: (recaller.close(), closed.set()), daemon=True)
        with caplog.at_level("WARNING", logger="recall_kit"):
            closer.start()
            assert closed.wait(30), "Recaller.close() did not return while another process held the lock"
        gave_up = [r.getMessage() for r in caplog.records if "gave up" in r.getMessage()]
        assert len(gave_up) == 1 and "lock" in gave_up[0] and "\n" not in gave_up[0]
    finally:
        holder.kill()
        holder.wait()
