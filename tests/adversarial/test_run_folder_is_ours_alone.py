"""The daemon's socket is trusted only in folders that are the user's alone, and only when the user's
own process listens on it: another user who can write a folder on the way, or who serves the socket,
gets no prompt and injects no context. The hook and the daemon both refuse, saying why."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
from integration_support import DEPLOY_PROMPT, Env, memories, serve_refusal, stop_daemon, wait_for  # noqa: F401
from throwaway_user import folder_for_anyone, python_for_anyone, throwaway_user

# A daemon as another user would run it: it answers every request and injects its own context.
FAKE_DAEMON = r"""
import json, os, socket, sys
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
server.listen(8)
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    for line in conn.makefile("rb"):
        print("received", line.decode().strip(), flush=True)
        op = json.loads(line).get("op")
        answer = {"ok": True, "delivery": {"text": "INJECTED by another user", "refs": []}} if op == "consume" else {"ok": True}
        conn.sendall(json.dumps(answer).encode() + b"\n")
    conn.close()
"""


def _prompt() -> dict[str, object]:
    return {"session_id": "cc-1", "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "prompt": DEPLOY_PROMPT}


@pytest.fixture
def shared_base() -> Iterator[Path]:
    """A folder outside pytest's private tmp_path, where another user's files can live."""
    with folder_for_anyone("recall-kit-shared-") as base:
        yield base


def _env_with_cache_under(base: Path, cache_home: Path) -> Env:
    """A user environment whose run folder lives under ``cache_home`` (no XDG_RUNTIME_DIR)."""
    env = Env(base / "user")
    del env.vars["XDG_RUNTIME_DIR"]
    env.vars["XDG_CACHE_HOME"] = str(cache_home)
    env.socket = cache_home / "recall-kit" / f"run-{os.getuid()}" / "daemon.sock"
    env.lock = env.socket.with_name("daemon.lock")
    return env


class FakeDaemon:
    """FAKE_DAEMON run as ``uid``, listening at ``path``."""

    def __init__(self, path: Path, uid: int) -> None:
        self.process = subprocess.Popen(
            [python_for_anyone(), "-c", FAKE_DAEMON, str(path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, user=uid, cwd="/",
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == "listening\n", self.process.stderr.read() if self.process.stderr else ""

    def received(self) -> str:
        self.process.kill()
        out, _ = self.process.communicate(timeout=10)
        return out


def test_a_run_folder_below_a_folder_others_can_write_is_refused(shared_base: Path, memories: Path) -> None:
    writable = shared_base / "shared"
    writable.mkdir()
    os.chmod(writable, 0o777)  # not sticky: anyone could rename our run folder away and put theirs
    env = _env_with_cache_under(shared_base, writable / "cache")
    try:
        result = env.hook(_prompt(), memories)
        assert (result.returncode, result.stdout) == (0, b"")
        log = env.hook_log.read_text()
        assert "refusing the daemon's socket" in log and f"{writable} is writable by others" in log, log
        assert not (writable / "cache").exists()  # no daemon was started, nothing was made there
        refusal = serve_refusal(env)
        assert refusal.startswith("recall-kit: refusing to serve:") and "writable by others" in refusal
    finally:
        stop_daemon(env)


def test_another_user_who_owns_a_folder_on_the_way_gets_no_prompt(shared_base: Path, memories: Path) -> None:
    with throwaway_user() as other:
        # the attack: XDG_CACHE_HOME below a folder another user owns; they made the run folder and listen there
        theirs = shared_base / "theirs"
        run_folder = theirs / "cache" / "recall-kit" / f"run-{os.getuid()}"
        run_folder.mkdir(parents=True)
        for folder in (theirs, theirs / "cache", theirs / "cache" / "recall-kit", run_folder):
            os.chown(folder, other.pw_uid, other.pw_gid)
        env = _env_with_cache_under(shared_base, theirs / "cache")
        fake = FakeDaemon(env.socket, other.pw_uid)
        try:
            result = env.hook(_prompt(), memories)
            received = fake.received()
        finally:
            stop_daemon(env)
        assert (result.returncode, result.stdout) == (0, b""), result.stdout
        assert "received" not in received  # not even the begin: nothing was sent
        log = env.hook_log.read_text()
        assert "refusing the daemon's socket" in log and f"belongs to uid {other.pw_uid}" in log, log
        assert f"belongs to uid {other.pw_uid}" in serve_refusal(env)


def test_the_hook_sends_nothing_to_a_socket_another_user_listens_on(tmp_path: Path, shared_base: Path, memories: Path) -> None:
    with throwaway_user() as other:
        env = Env(tmp_path)
        env.socket.parent.mkdir(mode=0o700, parents=True)  # every folder on the way is ours and private
        theirs = shared_base / "theirs"
        theirs.mkdir()
        os.chown(theirs, other.pw_uid, other.pw_gid)
        fake = FakeDaemon(theirs / "fake.sock", other.pw_uid)
        try:
            # their listening socket, moved to where our daemon's would be: only the peer's uid tells them apart
            os.rename(theirs / "fake.sock", env.socket)
            result = env.hook(_prompt(), memories)
            received = fake.received()
        finally:
            stop_daemon(env)
        assert (result.returncode, result.stdout) == (0, b""), result.stdout
        assert "received" not in received
        log = env.hook_log.read_text()
        assert f"uid {other.pw_uid} serves it, not this user" in log, log
        assert env.daemon_pid() is None  # and no daemon of ours was started beside theirs


def test_status_refuses_a_socket_another_user_listens_on(tmp_path: Path, shared_base: Path) -> None:
    with throwaway_user() as other:
        env = Env(tmp_path)
        env.socket.parent.mkdir(mode=0o700, parents=True)
        theirs = shared_base / "theirs"
        theirs.mkdir()
        os.chown(theirs, other.pw_uid, other.pw_gid)
        fake = FakeDaemon(theirs / "fake.sock", other.pw_uid)
        os.rename(theirs / "fake.sock", env.socket)
        result = env.run("serve", "--status")
        assert "received" not in fake.received()
        assert result.returncode == 2 and result.stdout == b""
        assert f"uid {other.pw_uid} serves it" in result.stderr.decode()


def test_a_private_run_folder_still_serves(tmp_path: Path, memories: Path) -> None:
    env = Env(tmp_path)
    try:
        first = env.hook(_prompt(), memories)
        if not first.stdout:  # a cold daemon may miss the hook's budget: the next prompt gets it
            wait_for(lambda: env.socket.exists(), "the daemon to listen", timeout=30)
            first = env.hook({**_prompt(), "session_id": "cc-2"}, memories)
        assert "Fly.io" in json.loads(first.stdout)["hookSpecificOutput"]["additionalContext"]
    finally:
        stop_daemon(env)


@pytest.mark.parametrize(
    ("setting", "args"),
    [
        ("XDG_RUNTIME_DIR", ("serve", "--status")),
        ("XDG_RUNTIME_DIR", ("serve", "--stop")),
        ("XDG_STATE_HOME", ("hook", "log")),
    ],
)
def test_a_folder_setting_that_names_a_file_is_one_line_not_a_traceback(
    tmp_path: Path, setting: str, args: tuple[str, ...]
) -> None:
    env = Env(tmp_path)
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x\n")
    env.vars[setting] = str(a_file)
    result = env.run(*args)
    err = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"{a_file} is not a folder" in err


def test_a_run_folder_too_deep_for_a_unix_socket_is_refused_in_one_line(tmp_path: Path) -> None:
    env = Env(tmp_path)
    deep = tmp_path / ("d" * 120)
    deep.mkdir(mode=0o700)
    env.vars["XDG_RUNTIME_DIR"] = str(deep)
    result = env.run("serve", "--idle-timeout", "2")
    err = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "over the 107" in err and "XDG_RUNTIME_DIR" in err


def test_a_socket_path_too_long_starts_no_daemon_from_a_hook_and_the_status_commands_say_why(tmp_path: Path) -> None:
    env = Env(tmp_path)
    deep = tmp_path / ("d" * 120)
    deep.mkdir(mode=0o700)
    env.vars["XDG_RUNTIME_DIR"] = str(deep)
    event = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "cwd": str(tmp_path), "prompt": DEPLOY_PROMPT}
    for name in ("SessionStart", "UserPromptSubmit"):
        result = env.run("hook", "claude-code", input=json.dumps({**event, "hook_event_name": name}))
        assert result.returncode == 0 and result.stdout == b""  # the agent is never held up
    assert "over the 107" in env.hook_log.read_text() and "did not start" not in env.hook_log.read_text()
    assert not (Path(env.vars["XDG_STATE_HOME"]) / "recall-kit" / "daemon.log").exists()  # no daemon was spawned
    status = env.run("serve", "--status")
    err = status.stderr.decode()
    assert status.returncode == 2 and len(err.strip().splitlines()) == 1 and "over the 107" in err, err
    hook_status = env.run("hook", "status").stdout.decode()
    assert "over the 107" in hook_status and "no prompt can start it" in hook_status
