"""`recall-kit hook claude-code`: one Claude Code hook event in on stdin, hook JSON out on stdout.

Runs once per prompt and per tool call, so it imports only the standard library and talks to the
warm daemon. It never breaks the agent: on any failure it prints nothing, exits 0 and logs why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import IO, Any

from recall_kit.limits import HOOK_MAX_STDIN_BYTES, bounded_prompt
from recall_kit_cli.integrations._runtime import RuntimePaths, append_log, runtime_paths
from recall_kit_cli.integrations.protocol import DaemonError, request

HOOK_BUDGET_S = 0.9  # the whole hook, daemon start included: Claude Code must never wait on recall
_CONNECT_POLL_S = (0.002, 0.005, 0.01, 0.02)  # back-off while an auto-started daemon binds


class _HookFailure(Exception):
    """Why this hook call printed nothing (logged, never shown to the agent)."""


def parse_roots(args: list[str]) -> list[str]:
    """``--root R`` / ``--root=R`` from the hook's own arguments (no click on this path)."""
    roots, it = [], iter(args)
    for arg in it:
        if arg == "--root":
            roots.append(next(it, ""))
        elif arg.startswith("--root="):
            roots.append(arg.split("=", 1)[1])
        else:
            raise _HookFailure(f"unknown argument {arg!r}")
    return [r for r in roots if r]


def run_claude_code(
    args: list[str],
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    environ: dict[str, str] | None = None,
) -> int:
    """The hook's whole life; always returns 0."""
    deadline = time.monotonic() + HOOK_BUDGET_S
    env = dict(os.environ) if environ is None else environ
    paths = runtime_paths(env)
    event = "?"
    try:
        raw = (stdin or sys.stdin.buffer).read(HOOK_MAX_STDIN_BYTES + 1)
        if len(raw) > HOOK_MAX_STDIN_BYTES:
            raise _HookFailure(f"hook input over {HOOK_MAX_STDIN_BYTES} bytes")
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise _HookFailure(f"hook input is not JSON ({exc})") from None
        if not isinstance(payload, dict):
            raise _HookFailure("hook input is not a JSON object")
        event = str(payload.get("hook_event_name") or "?")
        answer = _handle(event, payload, parse_roots(args), paths, deadline, env)
        if answer is not None:
            out = stdout or sys.stdout
            out.write(json.dumps(answer, ensure_ascii=False))
            out.flush()
    except (_HookFailure, DaemonError, OSError) as exc:
        append_log(paths.hook_log, f"{event}: {exc}")
    except Exception as exc:  # recall must never break the agent
        append_log(paths.hook_log, f"{event}: unexpected {type(exc).__name__}: {exc}")
    return 0


def _handle(
    event: str, payload: dict[str, Any], roots: list[str], paths: RuntimePaths, deadline: float, env: dict[str, str]
) -> dict[str, Any] | None:
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise _HookFailure("hook input has no session_id")
    if event == "UserPromptSubmit":
        prompt = payload.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return None
        if not roots:
            raise _HookFailure("no --root given to `recall-kit hook claude-code`")
        cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
        absolute = [os.path.abspath(os.path.join(cwd or os.getcwd(), os.path.expanduser(r))) for r in roots]
        # cut to what recall reads before the protocol's line limit can refuse it
        begin = {"op": "begin", "session": session, "roots": absolute, "query": bounded_prompt(prompt)}
        consume = {"op": "consume", "session": session, "point": "initial"}
        responses = _call(paths, [begin, consume], deadline, env, autostart=True)
        return _context(event, responses[-1])
    if event == "PostToolUse":
        consume = {"op": "consume", "session": session, "point": "tool_result"}
        return _context(event, _call(paths, [consume], deadline, env, autostart=False)[-1])
    if event == "Stop":
        _call(paths, [{"op": "finish", "session": session}], deadline, env, autostart=False)
        return None
    if event == "SessionEnd":
        _call(paths, [{"op": "close_session", "session": session}], deadline, env, autostart=False)
        return None
    raise _HookFailure(f"event {event!r} is not one recall handles")


def _context(event: str, response: dict[str, Any]) -> dict[str, Any] | None:
    delivery = response.get("delivery")
    if not isinstance(delivery, dict) or not delivery.get("text"):
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": delivery["text"]}}


def _call(
    paths: RuntimePaths, messages: list[dict[str, Any]], deadline: float, env: dict[str, str], *, autostart: bool
) -> list[dict[str, Any]]:
    try:
        return request(paths.socket, messages, deadline=deadline)
    except DaemonError:
        if not autostart or _daemon_listening(paths):
            raise
    # nobody listens: start the daemon (a racing hook's spare copy exits on the lock) and wait for it
    _spawn_daemon(paths, env)
    for pause in _backoff():
        if time.monotonic() + pause >= deadline:
            raise DaemonError("the daemon did not start in time (it keeps starting; the next prompt will use it)")
        time.sleep(pause)
        if _daemon_listening(paths):
            return request(paths.socket, messages, deadline=deadline)
    raise AssertionError("unreachable")


def _backoff() -> Any:
    yield from _CONNECT_POLL_S
    while True:
        yield _CONNECT_POLL_S[-1]


def _daemon_listening(paths: RuntimePaths) -> bool:
    import socket

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(paths.socket))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _spawn_daemon(paths: RuntimePaths, env: dict[str, str]) -> None:
    paths.state.mkdir(parents=True, exist_ok=True)
    with open(paths.daemon_log, "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "recall_kit_cli", "serve"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
            cwd="/",
            start_new_session=True,  # outlives the hook and is not killed with Claude Code's process group
            close_fds=True,
        )
    append_log(paths.hook_log, f"started a daemon for {paths.socket}")
