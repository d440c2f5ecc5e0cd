"""The hook with no --root: each prompt recalls from the agent's own folders for the event's project,
through the daemon's usual checks, and a folder that appears later is opened by the next prompt."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from integration_support import DEPLOY_PROMPT, EXAMPLES, Daemon, Env

import pytest

from recall_kit._vocabulary import WRITING_NOTE


def _key(path: Path | str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in str(path))


def _prompt(env: Env, agent: str, cwd: Path | str, prompt: str = DEPLOY_PROMPT, session: str = "s-1", **extra: object) -> bytes:
    event = {"session_id": session, "hook_event_name": "UserPromptSubmit", "cwd": str(cwd), "prompt": prompt, **extra}
    result = env.run("hook", agent, input=json.dumps(event))
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    return bytes(result.stdout)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "work" / "ledgerline"
    path.mkdir(parents=True)
    return path


def _claude_folder(env: Env, project: Path) -> Path:
    return Path(env.vars["HOME"]) / ".claude" / "projects" / _key(project) / "memory"


def test_claude_code_recalls_from_its_own_folder_for_the_prompts_project(env: Env, daemon: Daemon, project: Path) -> None:
    shutil.copytree(EXAMPLES, _claude_folder(env, project))

    answer = json.loads(_prompt(env, "claude-code", project))

    context = answer["hookSpecificOutput"]["additionalContext"]
    assert "Deploying ledgerline to Fly.io" in context
    assert "MEMORY.md" not in context  # the folder's index is never a memory
    stores = env.request({"op": "status"})[0]["stores"]
    assert [s["roots"] for s in stores] == [[str(_claude_folder(env, project))]]


def test_a_folder_that_does_not_exist_yet_is_opened_by_the_first_prompt_after_it_appears(
    env: Env, daemon: Daemon, project: Path
) -> None:
    # no folder yet: nothing to recall, nothing logged; the session's note still comes, once
    assert json.loads(_prompt(env, "claude-code", project))["hookSpecificOutput"]["additionalContext"] == WRITING_NOTE
    assert _prompt(env, "claude-code", project) == b""
    assert not env.hook_log.exists()
    shutil.copytree(EXAMPLES, _claude_folder(env, project))

    assert b"Fly.io" in _prompt(env, "claude-code", project, session="s-2")


def test_qwen_code_recalls_from_its_project_and_user_folders_together(env: Env, daemon: Daemon, project: Path) -> None:
    base = Path(env.vars["HOME"]) / ".qwen"
    shutil.copytree(EXAMPLES / "projects", base / "projects" / _key(project) / "memory")
    shutil.copytree(EXAMPLES / "user", base / "memories")

    assert b"Fly.io" in _prompt(env, "qwen-code", project)

    (store,) = env.request({"op": "status"})[0]["stores"]
    assert store["roots"] == [str(base / "projects" / _key(project) / "memory"), str(base / "memories")]


def test_a_given_root_replaces_the_agents_folders(env: Env, daemon: Daemon, project: Path, memories: Path) -> None:
    shutil.copytree(EXAMPLES, _claude_folder(env, project))
    event = {"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "cwd": str(project), "prompt": DEPLOY_PROMPT}

    assert env.run("hook", "claude-code", "--root", str(memories), input=json.dumps(event)).returncode == 0

    assert [s["roots"] for s in env.request({"op": "status"})[0]["stores"]] == [[str(memories)]]


def test_a_project_folder_linked_to_the_home_is_refused_by_the_daemon(env: Env, daemon: Daemon, project: Path) -> None:
    folder = _claude_folder(env, project)
    folder.parent.mkdir(parents=True)
    folder.symlink_to(env.vars["HOME"])

    assert _prompt(env, "claude-code", project) == b""

    assert "is the home folder, not a folder of memories" in env.hook_log.read_text()
    assert env.request({"op": "status"})[0]["stores"] == []


def test_a_cwd_of_the_file_system_root_walks_nothing_and_starts_nothing(env: Env) -> None:
    assert _prompt(env, "claude-code", "/") == b""
    assert _prompt(env, "claude-code", "/" + "x" * (10 << 20)) == b""  # 10 MB: no path at all
    assert env.daemon_pid() is None  # no folder of the agent's exists: no daemon was started
