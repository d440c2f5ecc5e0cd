"""Integration tests: the installed `recall-kit` as real processes, with HOME and the XDG folders in
tmp_path so nothing touches the real user's; every daemon a test starts is stopped in teardown."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from recall_kit.testing import Reply, ScriptedChatServer

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "memories"
RECALL_KIT = str(Path(sys.executable).parent / "recall-kit")
DEPLOY_PROMPT = "how do I deploy ledgerline to production?"
SILENT_PROMPT = "push the bookkeeping thing live on friday"  # the fast stage finds nothing for it
DEPLOY_REF = "memories/projects/ledgerline/deploy.md"


class Env:
    """A private user environment: HOME, XDG folders, and the daemon's socket inside them."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.vars = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(base / "home"),
            "XDG_RUNTIME_DIR": str(base / "run"),
            "XDG_STATE_HOME": str(base / "state"),
            "XDG_CACHE_HOME": str(base / "cache"),
            "LANG": "C.UTF-8",
        }
        for key in ("HOME", "XDG_RUNTIME_DIR"):
            Path(self.vars[key]).mkdir(mode=0o700, parents=True)
        self.socket = base / "run" / "recall-kit" / "daemon.sock"
        self.lock = base / "run" / "recall-kit" / "daemon.lock"
        self.hook_log = base / "state" / "recall-kit" / "hook.log"

    def run(self, *args: str, input: bytes | str | None = None, timeout: float = 30, cwd: Path | None = None) -> subprocess.CompletedProcess[Any]:
        data = input.encode() if isinstance(input, str) else input
        return subprocess.run(
            [RECALL_KIT, *args], input=data, capture_output=True, env=self.vars, timeout=timeout, cwd=cwd or self.base
        )

    def hook(self, payload: dict[str, Any] | str, *roots: Path, timeout: float = 30) -> subprocess.CompletedProcess[Any]:
        args = ["hook", "claude-code"]
        for root in roots:
            args += ["--root", str(root)]
        data = payload if isinstance(payload, str) else json.dumps(payload)
        return self.run(*args, input=data, timeout=timeout)

    def request(self, *messages: dict[str, Any]) -> list[dict[str, Any]]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(self.socket))
            sock.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
            reader = sock.makefile("rb")
            return [json.loads(reader.readline()) for _ in messages]

    def daemon_pid(self) -> int | None:
        """The pid in the daemon's lock file; None without one (or when a test put something else there)."""
        try:
            if not stat.S_ISREG(os.lstat(self.lock).st_mode):
                return None
            text = self.lock.read_text().strip()
        except (FileNotFoundError, NotADirectoryError):  # NotADirectoryError: the runtime folder is a file
            return None
        return int(text) if text.isdigit() else None

    def listener_in_the_daemons_place(self, backlog: int) -> socket.socket:
        """A socket listening where the daemon's would, with nothing behind it (a test plays the daemon)."""
        self.socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket))
        listener.listen(backlog)
        return listener


def wait_for(predicate: Any, what: str, timeout: float = 10.0) -> None:
    """Poll an observable condition with a bound (not a sleep standing in for an event)."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def stop_daemon(env: Env) -> None:
    """SIGTERM every daemon of this environment (the lock's holder, and any the hook started that
    had not taken the lock yet), and wait until each is gone."""
    pids = {pid for pid in (env.daemon_pid(), *_started_by_the_hook(env)) if pid is not None and _serves(env, pid)}
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    for pid in pids:
        try:
            wait_for(lambda: not pid_alive(pid), f"daemon {pid} to exit")
        except AssertionError:  # never leave a stuck daemon behind
            os.kill(pid, signal.SIGKILL)
            raise


def _started_by_the_hook(env: Env) -> list[int]:
    """The pids the hook log says it started daemons as."""
    try:
        log = env.hook_log.read_text(errors="replace") if stat.S_ISREG(os.lstat(env.hook_log).st_mode) else ""
    except OSError:
        return []
    return [int(pid) for pid in re.findall(r"started a daemon \(pid (\d+)\)", log)]


def _serves(env: Env, pid: int) -> bool:
    """Whether ``pid`` is alive and a process of this environment (its HOME): a logged pid may be reused."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"HOME={env.vars['HOME']}".encode() in f.read().split(b"\0")
    except OSError:
        return False


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    environment = Env(tmp_path)
    yield environment
    stop_daemon(environment)


@pytest.fixture
def memories(tmp_path: Path) -> Path:
    root = tmp_path / "memories"
    shutil.copytree(EXAMPLES, root)
    return root


class Daemon:
    """A `recall-kit serve` process started by a test, ready once it printed its ready line."""

    def __init__(self, env: Env, *args: str, cwd: Path | None = None) -> None:
        self.process = subprocess.Popen(
            [RECALL_KIT, "serve", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.vars, cwd=cwd
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until the daemon listens (or dies)
        if not line:
            raise AssertionError(f"daemon died: {self.process.stderr.read().decode() if self.process.stderr else ''}")
        self.ready = json.loads(line)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # never leave a stuck daemon behind
            self.process.kill()
            self.process.wait()
            raise AssertionError("the daemon did not exit within 10 s of SIGTERM") from None
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return code


def serve_refusal(env: Env, *args: str) -> str:
    """The one-line error of a `recall-kit serve` that must refuse to start (exit 2); fails, after
    stopping it, when it serves instead."""
    process = subprocess.Popen([RECALL_KIT, "serve", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.vars)
    assert process.stdout is not None
    ready = process.stdout.readline()  # a line once it listens; EOF when it exits
    if ready:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=10)
        raise AssertionError(f"the daemon served instead of refusing: {ready!r}")
    _, err = process.communicate(timeout=30)
    assert process.returncode == 2, err
    lines = err.decode().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def daemon(env: Env) -> Iterator[Daemon]:
    started = Daemon(env)
    yield started
    started.stop()


@pytest.fixture(name="server")
def deploy_selecting_server() -> Iterator[ScriptedChatServer]:
    """A scripted model that picks the deploy memory for every prompt (import it to use it as ``server``)."""
    with ScriptedChatServer(default=Reply.select(DEPLOY_REF)) as started:
        yield started
