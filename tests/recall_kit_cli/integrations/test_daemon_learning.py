"""`recall-kit serve --learn`: the daemon's sessions feed the model's validated answers back to the
roots' learned files, which the next prompt's fast stage reads; without it nothing is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from integration_support import DEPLOY_REF, SILENT_PROMPT, Daemon, Env, deploy_selecting_server, wait_for  # noqa: F401
from recall_kit.testing import ScriptedChatServer

PROMPT, DEPLOY = SILENT_PROMPT, DEPLOY_REF


def _daemon(env: Env, server: ScriptedChatServer, *args: str) -> Daemon:
    env.vars.update(RECALL_KIT_BASE_URL=server.base_url, RECALL_KIT_MODEL="scripted")
    env.vars.pop("RECALL_KIT_LEARN", None)
    return Daemon(env, *args)


def _turn(env: Env, memories: Path, session: str) -> tuple[Any, Any]:
    """One turn: what the initial point got, and the refined delivery once it arrived."""
    begin = {"op": "begin", "session": session, "roots": [str(memories)], "query": PROMPT}
    initial = env.request(begin, {"op": "consume", "session": session, "point": "initial"})[1]["delivery"]
    later: list[Any] = []

    def refined() -> bool:
        got = env.request({"op": "consume", "session": session, "point": "tool_result"})[0]["delivery"]
        later.append(got)
        return got is not None

    if initial is None or initial["phase"] != "refined":
        wait_for(refined, "the model's refined delivery")
    return initial, (initial if initial is not None and initial["phase"] == "refined" else later[-1])


def test_serve_learn_keeps_the_models_choice_for_the_next_prompt(env: Env, memories: Path, server: ScriptedChatServer) -> None:
    daemon = _daemon(env, server, "--learn")
    try:
        _turn(env, memories, "first")
        learned = memories / ".recall-kit" / "learned.jsonl"
        initial, refined = _turn(env, memories, "a")  # the prompt's words come in a second turn: now they teach
        assert (initial is None or initial["phase"] == "refined") and refined["refs"] == [DEPLOY]
        wait_for(lambda: learned.exists() and "projects/ledgerline/deploy.md" in learned.read_text(), "the learned file")
        keys = {key[0] for key in json.loads(learned.read_text())["keys"]}
        assert {"bookkeeping", "push", "live"} <= keys and PROMPT not in learned.read_text()
        # the watched store takes the daemon's own write in; a new session's fast stage delivers it
        sessions = iter(range(1_000_000))

        def fast_delivers() -> bool:  # a session of its own each try: a session gets a memory once
            session = f"b{next(sessions)}"
            begin = {"op": "begin", "session": session, "roots": [str(memories)], "query": PROMPT}
            got = env.request(begin, {"op": "consume", "session": session, "point": "initial"})[1]["delivery"]
            env.request({"op": "close_session", "session": session})
            return got is not None and got["phase"] == "fast" and got["refs"] == [DEPLOY]

        wait_for(fast_delivers, "the fast stage to deliver what was learned")
    finally:
        daemon.stop()


def test_serve_without_learn_writes_nothing(env: Env, memories: Path, server: ScriptedChatServer) -> None:
    daemon = _daemon(env, server)
    try:
        _, refined = _turn(env, memories, "a")
        assert refined["refs"] == [DEPLOY]
    finally:
        daemon.stop()
    assert not (memories / ".recall-kit" / "learned.jsonl").exists()


def test_serve_learn_learns_from_a_turn_that_stops_before_the_model_answers(
    env: Env, memories: Path, server: ScriptedChatServer
) -> None:
    daemon = _daemon(env, server, "--learn")
    try:
        _turn(env, memories, "first")  # the words come in an earlier turn, so this one's teach
        server.hold()  # the model answers only once the turn is over
        begin = {"op": "begin", "session": "a", "roots": [str(memories)], "query": PROMPT}
        initial = env.request(begin, {"op": "consume", "session": "a", "point": "initial"})[1]["delivery"]
        assert initial is None
        env.request({"op": "finish", "session": "a"})  # the hook's Stop
        server.wait_for_requests(1)
        assert env.request({"op": "status"})[0]["learning_after_turn"] == 1
        server.release()
        learned = memories / ".recall-kit" / "learned.jsonl"
        wait_for(lambda: learned.exists() and "projects/ledgerline/deploy.md" in learned.read_text(), "the learned file")
        status = env.request({"op": "status"})[0]
        assert status["pending"] == 0  # nothing of it is delivered: the turn is over
        wait_for(lambda: env.request({"op": "status"})[0]["learning_after_turn"] == 0, "the refinement to end")
    finally:
        daemon.stop()


def test_the_hooks_stop_before_the_model_answers_still_teaches(env: Env, memories: Path, server: ScriptedChatServer) -> None:
    daemon = _daemon(env, server, "--learn")
    try:
        _turn(env, memories, "first")  # the words come in an earlier turn, so the hook's teach
        server.hold()

        def event(name: str, **fields: object) -> dict[str, object]:
            return {"session_id": "cc-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": name,
                    **fields}

        prompt = env.hook(event("UserPromptSubmit", prompt=PROMPT), memories)
        # nothing fast, the model holds its answer (the session's writing note comes alone)
        assert prompt.returncode == 0 and b"recalled-memories" not in prompt.stdout
        assert env.hook(event("Stop", stop_hook_active=False)).returncode == 0
        server.wait_for_requests(1)
        server.release()
        learned = memories / ".recall-kit" / "learned.jsonl"
        wait_for(lambda: learned.exists() and "projects/ledgerline/deploy.md" in learned.read_text(), "the learned file")
    finally:
        daemon.stop()
