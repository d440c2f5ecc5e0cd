"""`recall-kit hook claude-code|qwen-code`: one agent hook event in on stdin, hook JSON out on stdout.

Runs once per prompt and per tool call, so it imports only the standard library and talks to the
warm daemon. It never breaks the agent: on any failure it prints nothing, exits 0 and logs why.

The roots of a prompt are the ``--root`` folders when any are given (they replace the agent's
folders), else the agent's own memory folders for the event's project (``agents``), those that
exist now: a folder that appears later is opened by the first prompt after it does.

Once per session the agent is also handed the daemon's writing note (what to write into each
memory it saves, with the store's keyword vocabulary): at SessionStart where that reaches the
agent's memory writer and the daemon already listens, else with the session's first prompt.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import sys
import time
from typing import IO, Any

from memory_store import RecallKitError, parse_json  # its errors and JSON modules alone: cheap
from recall_kit.limits import (
    HOOK_CONTEXT_MAX_CHARS,
    HOOK_LOG_MAX_BYTES,
    HOOK_MAX_STDIN_BYTES,
    WRITING_NOTE_MAX_CHARS,
    bounded_prompt,
)
from recall_kit_cli.integrations._runtime import RuntimePaths, append_log, log_text, open_log, runtime_paths
from recall_kit_cli.integrations.agents import AGENTS, Agent, event_context, existing_folders
from recall_kit_cli.integrations.protocol import DaemonError, UntrustedSocket, check_socket_folder, listening, request

HOOK_BUDGET_S = 0.9  # the whole hook, daemon start included: the agent must never wait on recall
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


def run_hook(
    agent_name: str,
    args: list[str],
    stdin: IO[bytes] | None = None,
    stdout: IO[str] | None = None,
    environ: dict[str, str] | None = None,
) -> int:
    """The hook's whole life for the agent ``agent_name`` (a key of ``AGENTS``); always returns 0."""
    deadline = time.monotonic() + HOOK_BUDGET_S
    env = dict(os.environ) if environ is None else environ
    paths = runtime_paths(env)
    event = "?"
    try:
        raw = _read_input(stdin or sys.stdin.buffer, deadline)
        if len(raw) > HOOK_MAX_STDIN_BYTES:
            raise _HookFailure(f"hook input over {HOOK_MAX_STDIN_BYTES} bytes")
        try:
            payload = parse_json(raw)
        except ValueError as exc:
            raise _HookFailure(f"hook input is not JSON ({exc})") from None
        if not isinstance(payload, dict):
            raise _HookFailure("hook input is not a JSON object")
        event = str(payload.get("hook_event_name") or "?")
        answer = _handle(AGENTS[agent_name], event, payload, parse_roots(args), paths, deadline, env)
        if answer is not None:
            out = stdout or sys.stdout
            out.write(json.dumps(answer, ensure_ascii=False))
            out.flush()
    except (_HookFailure, RecallKitError, OSError) as exc:  # RecallKitError: DaemonError, an unsafe state folder
        _log(paths, f"{event}: {exc}")
    except Exception as exc:  # recall must never break the agent
        _log(paths, f"{event}: unexpected {type(exc).__name__}: {exc}")
    return 0


def _read_input(stream: IO[bytes], deadline: float) -> bytes:
    """The event's JSON, at most one byte over HOOK_MAX_STDIN_BYTES, read within the hook's budget: an
    agent that keeps stdin open without finishing its event gets nothing (_HookFailure), never a wait."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's BytesIO): read it whole
        return stream.read(HOOK_MAX_STDIN_BYTES + 1)
    chunks: list[bytes] = []
    size = 0
    while size <= HOOK_MAX_STDIN_BYTES:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise _HookFailure(f"hook input not finished within {HOOK_BUDGET_S} s")
        chunk = os.read(fd, min(1 << 20, HOOK_MAX_STDIN_BYTES + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _log(paths: RuntimePaths, message: str) -> None:
    """To the hook log; when that cannot be written (an unsafe state folder, a symlink), one line on stderr."""
    if append_log(paths.hook_log, message):
        return
    try:
        sys.stderr.write(f"recall-kit hook: {log_text(message)} (and {paths.hook_log} cannot be written)\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _handle(
    agent: Agent,
    event: str,
    payload: dict[str, Any],
    roots: list[str],
    paths: RuntimePaths,
    deadline: float,
    env: dict[str, str],
) -> dict[str, Any] | None:
    session = payload.get("session_id")
    if not isinstance(session, str) or not session:
        raise _HookFailure("hook input has no session_id")
    if event == "SessionStart":
        check_socket_folder(paths.socket)  # never talk to, or start, a daemon where another user could listen
        if not listening(paths.socket):
            _start_daemon(paths, env)  # the imports alone take about a second: begin them before the first prompt
            return None  # the session's first prompt brings the note
        if not agent.writing_note_at_start:
            return None
        start = {"op": "writing_note", "session": session, "roots": prompt_roots(agent, payload, roots, env)}
        return _note_context(event, _call(paths, [start], deadline, env, autostart=False)[-1].get("text"))
    if event == "UserPromptSubmit":
        prompt = payload.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return None
        absolute = prompt_roots(agent, payload, roots, env)
        if not absolute:  # none of the agent's folders exists yet: nothing to recall; the note, if it is due
            if not listening(paths.socket):
                return None
            note: dict[str, Any] = {"op": "writing_note", "session": session, "roots": [], "unless_given": True}
            return _note_context(event, _call(paths, [note], deadline, env, autostart=False)[-1].get("text"))
        # cut to what recall reads before the protocol's line limit can refuse it; the note comes
        # along when this session has had none yet (the daemon keeps count)
        begin = {"op": "begin", "session": session, "roots": absolute, "query": bounded_prompt(prompt), "writing_note": True}
        consume = {"op": "consume", "session": session, "point": "initial"}
        responses = _call(paths, [begin, consume], deadline, env, autostart=True)
        return _context(agent, event, responses[-1], responses[0].get("writing_note"))
    if event == "PostToolUse":
        consume = {"op": "consume", "session": session, "point": "tool_result"}
        return _context(agent, event, _call(paths, [consume], deadline, env, autostart=False)[-1])
    if event == "Stop":
        _call(paths, [{"op": "finish", "session": session}], deadline, env, autostart=False)
        return None
    if event == "SessionEnd":
        _call(paths, [{"op": "close_session", "session": session}], deadline, env, autostart=False)
        return None
    raise _HookFailure(f"event {event!r} is not one recall handles")


def prompt_roots(agent: Agent, payload: dict[str, Any], roots: list[str], env: dict[str, str]) -> list[str]:
    """The folders a prompt recalls from: ``roots`` made absolute against the event's ``cwd`` when
    any are given, else the agent's folders for the event's project that exist now."""
    context = event_context(payload, env)
    if roots:
        return [os.path.abspath(os.path.join(context.cwd or os.getcwd(), os.path.expanduser(r))) for r in roots]
    return existing_folders(agent.folders(context))


def _context(agent: Agent, event: str, response: dict[str, Any], note: object = None) -> dict[str, Any] | None:
    """The hook's answer: the writing note (when one came) and the delivered block, within the agent's cap."""
    delivery = response.get("delivery")
    text = delivery.get("text") if isinstance(delivery, dict) else None
    if not isinstance(text, str) or not text:
        return _note_context(event, note)
    if isinstance(note, str) and note and len(note) <= WRITING_NOTE_MAX_CHARS:
        text = f"{note}\n\n{text}"
    if len(text) > HOOK_CONTEXT_MAX_CHARS:
        # the agent would cut it mid-memory (or file it away): the daemon renders within its budget, so this is not ours
        raise _HookFailure(f"the delivery is {len(text)} characters, over {agent.title}'s {HOOK_CONTEXT_MAX_CHARS}; dropped")
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _note_context(event: str, note: object) -> dict[str, Any] | None:
    """The writing note alone as the hook's answer; None without one (off, or given already)."""
    if not isinstance(note, str) or not note or len(note) > WRITING_NOTE_MAX_CHARS:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": note}}


def _call(
    paths: RuntimePaths, messages: list[dict[str, Any]], deadline: float, env: dict[str, str], *, autostart: bool
) -> list[dict[str, Any]]:
    try:
        return request(paths.socket, messages, deadline=deadline)
    except UntrustedSocket:
        raise  # never start a daemon where another user could be listening
    except DaemonError:
        if not autostart or listening(paths.socket):
            raise
    # nobody listens: start the daemon, unless one holds the lock or another hook starts one (wait for it)
    spawned = _spawn_once(paths, env)
    holder = _lock_holder(paths) if spawned is None else None
    for pause in _backoff():
        if time.monotonic() + pause >= deadline:
            raise DaemonError(_not_started(paths, holder, spawned))
        time.sleep(pause)
        if listening(paths.socket):
            return request(paths.socket, messages, deadline=deadline)
        if spawned is not None and spawned.process.poll() is not None:
            if spawned.process.returncode != 0:
                raise DaemonError(f"the daemon refused to start: {spawned.last_words()}")
            holder, spawned = _lock_holder(paths), None  # exit 0: another daemon took the lock first
    raise AssertionError("unreachable")


def _start_daemon(paths: RuntimePaths, env: dict[str, str]) -> None:
    """Start the daemon when nobody listens, nobody holds its lock and no other hook starts one; never wait for it."""
    check_socket_folder(paths.socket)  # never start one where another user could be listening
    if not listening(paths.socket):
        _spawn_once(paths, env)


def _spawn_once(paths: RuntimePaths, env: dict[str, str]) -> _SpawnedDaemon | None:
    """Start the daemon unless one holds its lock or another hook is starting one (None then). The spawn
    lock is taken without waiting and handed to the daemon started, which holds it for its life: a
    daemon takes its own lock only once its imports are done (about a second), and 20 hooks at once
    must not each start one meanwhile."""
    from memory_store import open_private, private_folder  # the private-path helpers alone: cheap

    private_folder(paths.folder)
    fd = open_private(paths.spawn_lock, os.O_RDWR, create=True)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # another hook starts one, or the daemon one started still lives
        if listening(paths.socket) or _lock_holder(paths) is not None:
            return None
        return _SpawnedDaemon(paths, env, spawn_lock=fd)
    finally:
        os.close(fd)  # the daemon's copy keeps the lock


def _not_started(paths: RuntimePaths, holder: int | None, spawned: _SpawnedDaemon | None) -> str:
    """Why no daemon answered within the hook's budget, as far as the hook can tell."""
    if spawned is not None:
        return f"the daemon did not start in time (pid {spawned.process.pid} is still starting; the next prompt will use it)"
    if holder is not None:
        return (
            f"the daemon did not start in time: pid {holder} holds the daemon's lock {paths.lock} "
            f"but nothing answers on {paths.socket} (still starting, or stuck)"
        )
    return (f"the daemon did not start in time: another hook started it (it holds {paths.spawn_lock}), "
            f"and nothing answered on {paths.socket} yet")


def _lock_holder(paths: RuntimePaths) -> int | None:
    """The pid holding the daemon's lock, None when nobody does; UnsafePathError when the lock
    file is a symlink, not a regular file or another user's (the daemon would refuse it too).
    Read from /proc/locks: taking the lock to test it could make a starting daemon give up."""
    from memory_store import open_private  # the private-path helpers alone: cheap

    try:
        fd = open_private(paths.lock)
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    file_id = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            for line in locks:  # "1: FLOCK  ADVISORY  WRITE 9804 fe:00:2146410 0 EOF"
                fields = line.split()
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == file_id and fields[4].isdigit():
                    return int(fields[4])
    except OSError:
        pass  # no /proc: the spare daemon finds out on the lock itself
    return None


def _backoff() -> Any:
    yield from _CONNECT_POLL_S
    while True:
        yield _CONNECT_POLL_S[-1]


class _SpawnedDaemon:
    """A `recall-kit serve` this hook started, its stderr appended to the daemon log."""

    def __init__(self, paths: RuntimePaths, env: dict[str, str], *, spawn_lock: int) -> None:
        self.log_path = paths.daemon_log
        log = open_log(paths.daemon_log, rotate_at=HOOK_LOG_MAX_BYTES)  # as the hook log: one old file kept
        try:
            self.log_start = os.fstat(log).st_size  # its own words start here
            self.process = subprocess.Popen(
                [sys.executable, "-m", "recall_kit_cli", "serve"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=env,
                cwd="/",
                start_new_session=True,  # outlives the hook and is not killed with the agent's process group
                close_fds=True,
                pass_fds=(spawn_lock,),  # inherited, never used: the lock is held while the daemon lives
            )
        finally:
            os.close(log)
        append_log(paths.hook_log, f"started a daemon (pid {self.process.pid}) for {paths.socket}")

    def last_words(self) -> str:
        """The last line it wrote to the daemon log (why it exited), without the command's prefix."""
        from memory_store import open_private  # the private-path helpers alone: cheap

        try:
            fd = open_private(self.log_path)
            try:
                tail = os.pread(fd, 65536, self.log_start)
            finally:
                os.close(fd)
        except (OSError, RecallKitError):
            return f"it exited with status {self.process.returncode}"
        lines = [line.strip() for line in tail.decode("utf-8", "replace").splitlines() if line.strip()]
        if not lines:
            return f"it exited with status {self.process.returncode} and said nothing"
        return lines[-1].removeprefix("recall-kit: ")
