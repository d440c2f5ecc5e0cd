"""One daemon per user, however many hooks start at once, and one delivery of a memory per agent session,
even when the daemon is killed and restarted in the middle of it. Real hooks, a real daemon."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration_support import DEPLOY_PROMPT, RECALL_KIT, Daemon, Env, memories, stop_daemon, wait_for  # noqa: F401

from recall_kit_cli.integrations.protocol import listening

HOOKS_AT_ONCE = 20


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:  # a fixture of its own: every daemon the hooks start is stopped
    environment = Env(tmp_path)
    yield environment
    stop_daemon(environment)


def _started(env: Env) -> list[str]:
    return re.findall(r"started a daemon \(pid (\d+)\)", env.hook_log.read_text()) if env.hook_log.exists() else []


def test_twenty_session_start_hooks_at_once_start_one_daemon(env: Env) -> None:
    event = json.dumps({"session_id": "s", "hook_event_name": "SessionStart", "cwd": "/", "source": "startup"}).encode()
    hooks = [subprocess.Popen([RECALL_KIT, "hook", "claude-code"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env.vars) for _ in range(HOOKS_AT_ONCE)]
    for hook in hooks:  # every hook is up and reading its event before any gets it
        assert hook.stdin is not None
    for hook in hooks:
        assert hook.stdin is not None
        hook.stdin.write(event)
        hook.stdin.close()
    for hook in hooks:  # each says nothing, or hands its agent the writing note alone (no folder at "/")
        assert hook.wait(60) == 0 and hook.stdout is not None
        said = hook.stdout.read()
        assert not said or json.loads(said)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
        for stream in (hook.stdout, hook.stderr):
            if stream is not None:
                stream.close()
    wait_for(lambda: listening(env.socket), "the daemon to listen", timeout=60)
    assert len(_started(env)) == 1, env.hook_log.read_text()
    assert env.daemon_pid() == int(_started(env)[0])


def _prompt(env: Env, root: Path, session: str, prompt: str = DEPLOY_PROMPT) -> bytes:
    event = {"session_id": session, "hook_event_name": "UserPromptSubmit", "cwd": "/", "prompt": prompt}
    result = env.hook(event, root)
    assert result.returncode == 0
    return bytes(result.stdout)


def test_nothing_is_delivered_twice_in_a_session_across_a_daemon_killed_and_restarted(env: Env, memories: Path) -> None:
    daemon = Daemon(env)
    try:
        assert b"Fly.io" in _prompt(env, memories, "cc-1")  # delivered once
        assert _prompt(env, memories, "cc-1") == b""  # and not again, while it runs
    finally:
        daemon.process.kill()  # kill -9 mid-session: nothing is closed or flushed
        daemon.process.wait()
        for stream in (daemon.process.stdout, daemon.process.stderr):
            if stream is not None:
                stream.close()
    again = Daemon(env)
    try:
        assert _prompt(env, memories, "cc-1") == b""  # the new daemon knows what this session got
        assert b"Fly.io" in _prompt(env, memories, "cc-2")  # another session gets it
    finally:
        again.stop()
    kept = (Path(env.vars["XDG_STATE_HOME"]) / "recall-kit" / "surfaced.jsonl")
    assert oct(kept.stat().st_mode & 0o777) == "0o600" and "ledgerline to production" not in kept.read_text()


def test_a_planted_or_cut_line_of_the_delivered_record_is_left_out(env: Env, memories: Path) -> None:
    kept = Path(env.vars["XDG_STATE_HOME"]) / "recall-kit" / "surfaced.jsonl"
    kept.parent.mkdir(parents=True, mode=0o700)
    kept.write_text('{"session": "cc-1", "refs": 5}\n[[[[\n{"session": 7}\n{"session": "cc-1", "refs": ["memories/projects/led')
    kept.chmod(0o600)
    daemon = Daemon(env)
    try:
        assert b"Fly.io" in _prompt(env, memories, "cc-1")
    finally:
        daemon.stop()
