"""The folders the hook works out from an agent's event pass the daemon's own checks: whatever the
event or the folders say, the daemon never opens the file system root, the home folder or a tree
larger than a memory folder, and a hostile event names no folder at all."""

from __future__ import annotations

import json
from pathlib import Path

from integration_support import DEPLOY_PROMPT, Daemon, Env, daemon, env  # noqa: F401  (fixtures)
from recall_kit._vocabulary import WRITING_NOTE


def _key(path: Path | str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in str(path))


def _prompt(env: Env, cwd: str, **extra: object) -> bytes:
    event = {"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "cwd": cwd, "prompt": DEPLOY_PROMPT, **extra}
    result = env.run("hook", "claude-code", input=json.dumps(event))
    assert result.returncode == 0 and result.stderr == b""
    out = bytes(result.stdout)
    if out and json.loads(out)["hookSpecificOutput"]["additionalContext"] == WRITING_NOTE:
        return b""  # the session's writing note alone (no vocabulary): no folder was named or opened
    return out


def test_an_auto_memory_directory_of_the_file_system_root_is_refused(env: Env, daemon: Daemon, tmp_path: Path) -> None:
    settings = Path(env.vars["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    for refused_by_the_rule in ("///", "/usr/.."):  # "/" once resolved: Claude Code refuses both too
        settings.write_text(json.dumps({"autoMemoryDirectory": refused_by_the_rule}))
        assert _prompt(env, str(tmp_path)) == b""
    assert not env.hook_log.exists()  # no folder named: nothing sent, nothing to log
    (Path(env.vars["HOME"]) / "mem").symlink_to("/")
    settings.write_text(json.dumps({"autoMemoryDirectory": "~/mem"}))

    assert _prompt(env, str(tmp_path)) == b""

    assert "is the file system root, not a folder of memories" in env.hook_log.read_text()
    assert env.request({"op": "status"})[0]["stores"] == []


def test_a_project_folder_linked_to_a_large_tree_is_refused_at_the_entry_bound(env: Env, daemon: Daemon, tmp_path: Path) -> None:
    big = tmp_path / "big"
    for i in range(60):
        (big / f"d{i}").mkdir(parents=True)
        for j in range(1000):
            (big / f"d{i}" / f"{j}.txt").touch()
    project = tmp_path / "project"
    project.mkdir()
    folder = Path(env.vars["HOME"]) / ".claude" / "projects" / _key(project) / "memory"
    folder.parent.mkdir(parents=True)
    folder.symlink_to(big)

    assert _prompt(env, str(project)) == b""

    assert "more than 50,000 files and folders" in env.hook_log.read_text()


def test_a_transcript_path_pointing_elsewhere_moves_nothing(env: Env, daemon: Daemon, tmp_path: Path) -> None:
    home = Path(env.vars["HOME"])
    outside = f"{home}/.claude/projects/../../../etc/{_key('/etc')}/x.jsonl"
    assert _prompt(env, str(tmp_path), transcript_path=outside) == b""
    assert _prompt(env, str(tmp_path), transcript_path="/" + "t" * (10 << 20)) == b""
    assert env.request({"op": "status"})[0]["stores"] == []  # no folder of the agent's exists: nothing opened
