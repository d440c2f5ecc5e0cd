"""`recall-kit hook install claude-code`: merged into settings JSON under a tmp HOME, idempotently."""

from __future__ import annotations

import json
from pathlib import Path

from integration_support import Env


def _settings(env: Env) -> Path:
    return Path(env.vars["HOME"]) / ".claude" / "settings.json"


def _ours(settings: dict, event: str) -> list[str]:
    return [
        h["command"] for g in settings["hooks"][event] for h in g["hooks"] if " hook claude-code" in h["command"]
    ]


def test_install_merges_keeps_everything_else_and_is_idempotent(env: Env, memories: Path) -> None:
    path = _settings(env)
    path.parent.mkdir(parents=True)
    original = {
        "model": "opus",
        "hooks": {"PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "prettier -w"}]}]},
    }
    path.write_text(json.dumps(original))
    first = env.run("hook", "install", "claude-code", "--user", "--root", str(memories))
    assert first.returncode == 0, first.stderr
    settings = json.loads(path.read_text())
    assert settings["model"] == "opus"
    assert settings["hooks"]["PostToolUse"][0] == original["hooks"]["PostToolUse"][0]
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"):
        commands = _ours(settings, event)
        assert len(commands) == 1 and commands[0].endswith(f"hook claude-code --root {memories}")
    assert json.loads((path.parent / "settings.json.recall-kit-backup").read_text()) == original
    assert json.loads((path.parent / "settings.json.recall-kit-original").read_text()) == original
    text = path.read_text()
    second = env.run("hook", "install", "claude-code", "--root", str(memories))
    assert b"already up to date" in second.stdout
    assert path.read_text() == text
    # a new root replaces our entries rather than adding more
    env.run("hook", "install", "claude-code", "--root", str(memories / "projects"))
    assert _ours(json.loads(path.read_text()), "Stop")[0].endswith(f"--root {memories / 'projects'}")
    assert len(_ours(json.loads(path.read_text()), "Stop")) == 1


def test_dry_run_prints_a_diff_and_writes_nothing(env: Env, memories: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    result = env.run("hook", "install", "claude-code", "--project", "--root", str(memories), "--dry-run", cwd=project)
    assert result.returncode == 0
    assert b"+++ " in result.stdout and b'"UserPromptSubmit"' in result.stdout
    assert not (project / ".claude").exists()
    real = env.run("hook", "install", "claude-code", "--project", "--root", str(memories), cwd=project)
    assert real.returncode == 0 and (project / ".claude" / "settings.json").is_file()


def test_invalid_settings_are_refused_untouched(env: Env, memories: Path) -> None:
    path = _settings(env)
    path.parent.mkdir(parents=True)
    path.write_text("{ broken")
    result = env.run("hook", "install", "claude-code", "--root", str(memories))
    assert result.returncode == 2
    assert b"not valid JSON" in result.stderr and len(result.stderr.splitlines()) == 1
    assert path.read_text() == "{ broken"


def test_qwen_code_installs_into_its_own_settings_and_says_what_to_set(env: Env, tmp_path: Path) -> None:
    result = env.run("hook", "install", "qwen-code", "--user")

    assert result.returncode == 0, result.stderr
    settings = json.loads((Path(env.vars["HOME"]) / ".qwen" / "settings.json").read_text())
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"):
        (entry,) = [h for g in settings["hooks"][event] for h in g["hooks"]]
        assert entry["command"].endswith("/recall-kit hook qwen-code") and entry["timeout"] == 5  # seconds
    assert settings["hooks"]["PostToolUse"][0]["matcher"] == "*"
    out = result.stdout.decode()
    assert "Qwen Code's own memory folders" in out and "recall-kit hook status" in out
    assert '"enableManagedAutoMemory": false' in out and "stops it writing new memories" in out
    assert not (Path(env.vars["HOME"]) / ".claude").exists()

    project = tmp_path / "project"
    project.mkdir()
    assert env.run("hook", "install", "qwen-code", "--project", cwd=project).returncode == 0
    assert (project / ".qwen" / "settings.json").is_file()
