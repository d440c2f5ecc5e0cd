"""One daemon per user, however many hooks start at once, and one delivery of a memory per agent session,
even when the daemon is killed and restarted in the middle of it. Real hooks, a real daemon."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration_support import DEPLOY_PROMPT, RECALL_KIT, Env, memories, stop_daemon, wait_for  # noqa: F401

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
    for hook in hooks:
        assert hook.wait(60) == 0 and hook.stdout is not None and hook.stdout.read() == b""
        for stream in (hook.stdout, hook.stderr):
            if stream is not None:
                stream.close()
    wait_for(lambda: listening(env.socket), "the daemon to listen", timeout=60)
    assert len(_started(env)) == 1, env.hook_log.read_text()
    assert env.daemon_pid() == int(_started(env)[0])
