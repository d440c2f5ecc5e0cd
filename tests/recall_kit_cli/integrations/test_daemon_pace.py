"""The hook's initial point, through the daemon, stops waiting for a model that never answers within
the wait, and keeps waiting for one that does (the daemon's selector keeps the record, ``ModelPace``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from integration_support import DEPLOY_REF, SILENT_PROMPT, Daemon, Env, deploy_selecting_server, wait_for  # noqa: F401
from recall_kit._pace import PACE_MIN_SAMPLES
from recall_kit.testing import Reply, ScriptedChatServer

PROMPT, DEPLOY = SILENT_PROMPT, DEPLOY_REF


def _event(session: str, name: str, **fields: object) -> dict[str, object]:
    return {"session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": name, **fields}


def _pace(env: Env) -> dict[str, Any]:
    return env.request({"op": "status"})[0]["model_pace"]


def test_the_hooks_initial_point_stops_waiting_for_a_slow_model(env: Env, memories: Path, server: ScriptedChatServer) -> None:
    env.vars.update(RECALL_KIT_BASE_URL=server.base_url, RECALL_KIT_MODEL="scripted")
    daemon = Daemon(env)
    try:
        server.script(*[Reply.select(DEPLOY).after(30_000)] * (PACE_MIN_SAMPLES + 1))  # never within a turn
        for turn in range(PACE_MIN_SAMPLES):  # each: the initial point waits its 100 ms, Stop ends the turn
            prompt = env.hook(_event(f"cc-{turn}", "UserPromptSubmit", prompt=PROMPT), memories)
            assert prompt.returncode == 0 and b"recalled-memories" not in prompt.stdout
            assert env.hook(_event(f"cc-{turn}", "Stop", stop_hook_active=False)).returncode == 0
        assert _pace(env) == {"samples": PACE_MIN_SAMPLES, "answered_p50_ms": None, "waited": PACE_MIN_SAMPLES,
                              "let_go": 0, "probes": 0}
        prompt = env.hook(_event("cc-next", "UserPromptSubmit", prompt=PROMPT), memories)
        assert prompt.returncode == 0 and b"recalled-memories" not in prompt.stdout
        assert _pace(env)["let_go"] == 1 and _pace(env)["waited"] == PACE_MIN_SAMPLES
        human = env.run("serve", "--status")
        assert f"initial wait: spent {PACE_MIN_SAMPLES} times (0 probes), let go 1 times" in human.stdout.decode()
    finally:
        daemon.stop()


def test_the_hooks_initial_point_keeps_waiting_for_a_fast_model(env: Env, memories: Path, server: ScriptedChatServer) -> None:
    env.vars.update(RECALL_KIT_BASE_URL=server.base_url, RECALL_KIT_MODEL="scripted")
    daemon = Daemon(env)
    try:
        for turn in range(PACE_MIN_SAMPLES + 2):
            session = f"fast-{turn}"
            begin = {"op": "begin", "session": session, "roots": [str(memories)], "query": PROMPT}
            initial = env.request(begin, {"op": "consume", "session": session, "point": "initial"})[1]["delivery"]
            # the answer ends the wait; on a loaded machine the first ones (a store opening, a new
            # HTTP client) may still come after it, at the next point
            assert initial is None or (initial["refs"], initial["phase"]) == ([DEPLOY], "refined")
            wait_for(lambda: _pace(env)["samples"] == turn + 1, "the model's answer")
            env.request({"op": "close_session", "session": session})
        pace = _pace(env)
        assert (pace["waited"], pace["let_go"]) == (PACE_MIN_SAMPLES + 2, 0)
    finally:
        daemon.stop()
