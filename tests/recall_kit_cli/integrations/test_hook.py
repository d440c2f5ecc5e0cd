"""`recall-kit hook claude-code` as Claude Code runs it: a subprocess fed the event JSON on stdin."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

from integration_support import DEPLOY_PROMPT, Daemon, Env, wait_for


def _event(name: str, **fields: object) -> dict[str, object]:
    return {"session_id": "cc-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": name, **fields}


def test_first_prompt_starts_the_daemon_and_returns_additional_context(env: Env, memories: Path) -> None:
    result = env.hook(_event("UserPromptSubmit", prompt=DEPLOY_PROMPT), memories)
    assert result.returncode == 0
    answer = json.loads(result.stdout)
    context = answer["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit"
    assert "Deploying ledgerline to Fly.io" in context["additionalContext"]
    assert env.daemon_pid() is not None  # auto-started, stopped by the fixture


def test_a_turn_never_delivers_a_memory_twice(env: Env, daemon: Daemon, memories: Path) -> None:
    first = env.hook(_event("UserPromptSubmit", prompt=DEPLOY_PROMPT), memories)
    assert b"Fly.io" in first.stdout
    tool = env.hook(_event("PostToolUse", tool_name="Bash", tool_input={}, tool_response={"stdout": "ok"}))
    assert tool.returncode == 0 and tool.stdout == b""  # fast-only: nothing refined arrives
    assert env.hook(_event("Stop", stop_hook_active=False)).stdout == b""
    again = env.hook(_event("UserPromptSubmit", prompt=DEPLOY_PROMPT), memories)
    assert again.returncode == 0 and again.stdout == b""
    assert env.request({"op": "status"})[0]["sessions"] == 1
    assert env.hook(_event("SessionEnd", reason="exit")).stdout == b""
    assert env.request({"op": "status"})[0]["sessions"] == 0


def test_relative_root_is_taken_from_the_event_cwd(env: Env, daemon: Daemon, memories: Path) -> None:
    event = _event("UserPromptSubmit", prompt=DEPLOY_PROMPT, cwd=str(memories.parent))
    result = env.run("hook", "claude-code", "--root", memories.name, input=json.dumps(event))
    assert b"Fly.io" in result.stdout


def test_bad_input_prints_nothing_exits_zero_and_logs(env: Env, memories: Path) -> None:
    for bad in ("{not json", "[1, 2]", json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "x"})):
        result = env.hook(bad, memories)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    log = env.hook_log.read_text()
    assert "not JSON" in log and "not a JSON object" in log and "no session_id" in log
    assert env.daemon_pid() is None  # nothing was started for bad input


def test_no_daemon_for_a_tool_event_is_a_quiet_no_op(env: Env) -> None:
    result = env.hook(_event("PostToolUse", tool_name="Read", tool_response={}))
    assert (result.returncode, result.stdout) == (0, b"")
    assert "cannot reach the daemon" in env.hook_log.read_text()
    assert env.daemon_pid() is None


def test_a_daemon_that_never_answers_costs_under_the_budget(env: Env, memories: Path) -> None:
    env.socket.parent.mkdir(mode=0o700, parents=True)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(str(env.socket))
    silent.listen(8)
    held: list[socket.socket] = []
    accepting = threading.Thread(target=lambda: held.append(silent.accept()[0]), daemon=True)
    accepting.start()
    try:
        started = time.monotonic()
        result = env.hook(_event("UserPromptSubmit", prompt=DEPLOY_PROMPT), memories)
        elapsed = time.monotonic() - started
    finally:
        accepting.join(timeout=5)
        for conn in held:
            conn.close()
        silent.close()
    assert (result.returncode, result.stdout) == (0, b"")
    assert elapsed < 3.0  # the hook gives up by itself (its budget is 0.9 s), it does not hang
    wait_for(lambda: env.hook_log.exists() and "did not answer in time" in env.hook_log.read_text(), "the log line")


def test_a_prompt_of_megabytes_gets_the_recall_its_first_line_asks_for(env: Env, daemon: Daemon, memories: Path) -> None:
    # the output of a failed deploy pasted below the question: 2.4 MB, over the protocol's 1 MiB line
    log = "".join(
        f"2026-12-01T10:{i % 60:02d}:{i % 60:02d}Z app[{i % 9:x}e8] ord [info] fly deploy ledgerline: "
        f"release command alembic upgrade head, machine {i % 5} healthy\n"
        for i in range(20_000)
    )
    prompt = f"{DEPLOY_PROMPT} this is what fly printed last time:\n{log}"
    assert len(prompt.encode()) > 2_300_000
    result = env.hook(_event("UserPromptSubmit", prompt=prompt), memories)
    assert result.returncode == 0
    assert result.stdout, env.hook_log.read_text() if env.hook_log.exists() else "no hook.log"
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Deploying ledgerline to Fly.io" in context
