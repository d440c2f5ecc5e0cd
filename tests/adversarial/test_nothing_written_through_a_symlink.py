"""The daemon's lock and the hook's logs are never written through a symlink, and never opened when
they are a FIFO: whatever sits at those paths, the file it points to is left as it was."""

from __future__ import annotations

import json
import os
from pathlib import Path

from integration_support import DEPLOY_PROMPT, Env, env, memories, serve_refusal, stop_daemon  # noqa: F401

NOT_OURS = "a file of the user's that recall-kit must never write\n"


def _prompt(session: str = "cc-1") -> dict[str, object]:
    return {"session_id": session, "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "prompt": DEPLOY_PROMPT}


def _victim(env: Env) -> Path:
    victim = env.base / "victim.txt"
    victim.write_text(NOT_OURS)
    return victim


def test_the_daemon_never_truncates_a_symlinked_lock_s_target(env: Env) -> None:
    victim = _victim(env)
    env.lock.parent.mkdir(mode=0o700, parents=True)
    env.lock.symlink_to(victim)
    refusal = serve_refusal(env)
    assert "daemon.lock" in refusal and "symlink" in refusal
    assert victim.read_text() == NOT_OURS
    assert env.lock.is_symlink()


def test_a_fifo_at_the_lock_is_refused_without_opening_it(env: Env) -> None:
    env.lock.parent.mkdir(mode=0o700, parents=True)
    os.mkfifo(env.lock)
    assert "daemon.lock is not a regular file" in serve_refusal(env)


def test_the_hook_never_appends_through_a_symlinked_log(env: Env, memories: Path) -> None:
    victim = _victim(env)
    env.hook_log.parent.mkdir(mode=0o700, parents=True)
    env.hook_log.symlink_to(victim)
    result = env.hook("{not json", memories)
    assert (result.returncode, result.stdout) == (0, b"")
    assert victim.read_text() == NOT_OURS
    # the line it could not log goes to stderr, saying why
    assert b"not JSON" in result.stderr and b"hook.log" in result.stderr


def test_the_hook_never_blocks_on_a_fifo_at_its_log(env: Env, memories: Path) -> None:
    env.hook_log.parent.mkdir(mode=0o700, parents=True)
    os.mkfifo(env.hook_log)
    result = env.hook("{not json", memories, timeout=20)  # an open of a FIFO for writing would wait for a reader forever
    assert (result.returncode, result.stdout) == (0, b"")


def test_the_daemon_log_is_never_written_through_a_symlink(env: Env, memories: Path) -> None:
    victim = _victim(env)
    daemon_log = env.hook_log.with_name("daemon.log")
    daemon_log.parent.mkdir(mode=0o700, parents=True)
    daemon_log.symlink_to(victim)
    result = env.hook(_prompt(), memories)
    assert (result.returncode, result.stdout) == (0, b"")
    stop_daemon(env)  # a daemon started anyway would write its last words to the log when stopped
    assert victim.read_text() == NOT_OURS
    assert "daemon.log is a symlink" in env.hook_log.read_text()
    assert env.daemon_pid() is None  # it was never started: its log could not be opened


def test_hook_and_daemon_work_once_the_paths_are_plain_files_again(env: Env, memories: Path) -> None:
    env.hook_log.parent.mkdir(mode=0o700, parents=True)
    env.hook_log.symlink_to(env.base / "elsewhere.log")
    env.hook("{not json", memories)
    env.hook_log.unlink()
    result = env.hook(_prompt(), memories)
    assert result.returncode == 0
    if not result.stdout:  # a cold daemon may miss the hook's budget: the next prompt gets it
        result = env.hook(_prompt("cc-2"), memories)
    assert "Fly.io" in json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert not env.hook_log.is_symlink()


def test_a_symlinked_state_folder_is_refused_by_its_readers_as_by_its_writers(env: Env, memories: Path) -> None:
    # the hook, the daemon and doctor refuse the folder; `hook log` and `stats` read through it before
    elsewhere = env.base / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (elsewhere / "trail.jsonl").write_text(json.dumps({"t": 1.0, "session": "planted", "kind": "prompt"}) + "\n")
    os.chmod(elsewhere / "trail.jsonl", 0o600)
    env.hook_log.parent.parent.mkdir(mode=0o700, parents=True)
    env.hook_log.parent.symlink_to(elsewhere)
    log = env.run("hook", "log")
    assert log.returncode == 2 and b"symlink" in log.stderr and b"planted" not in log.stdout
    stats = env.run("stats", "--root", str(memories))
    assert stats.returncode == 0 and b"its record cannot be read" in stats.stdout and b"symlink" in stats.stdout
