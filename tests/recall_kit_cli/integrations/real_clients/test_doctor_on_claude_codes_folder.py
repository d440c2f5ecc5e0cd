"""`recall-kit doctor` on a memory folder the real Claude Code wrote, driven offline: its model (a
ScriptedAgentServer) has it save memories with its own Write tool, as its "How to save memories"
prompt asks, then doctor reads what the CLI wrote. The index's truncation is checked against what
Claude Code itself loads into its next request, before and after `doctor --fix`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_clients import git_project, prepare_home, run_agent
from integration_support import Env
from recall_kit.testing import CLAUDE_CODE, ScriptedAgentServer, Turn, agent_memory_folder

RUN_TIMEOUT_S = 120  # a bound on one `-p` run, not a wait anything relies on


def memory_file(name: str, description: str, body: str, type: str = "project") -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {type}\n---\n\n{body}\n"


SAVED = {
    "project_deploy.md": memory_file(
        "Deploy flow", "The app deploys to Fly.io from main through GitHub Actions once CI passes",
        "Deploys run from `src/deploy.py`; the release notes are kept in `notes.txt`."),
    "project_deploy_again.md": memory_file(
        "Deploys from main", "GitHub Actions deploys the app to Fly.io from main after CI passes",
        "Merging to main deploys; nobody deploys by hand."),
    "user_editor.md": memory_file("Editor", "The user edits in Helix with zsh and WezTerm on Arch Linux",
                                  "Give Helix keys, not VS Code shortcuts.", type="user"),
}
INDEX = ("- [Deploy flow](project_deploy.md) — Fly.io from main\n"
         "- [Deploys from main](project_deploy_again.md) — the same, written again\n"
         "- [Old notes](old_notes.md) — deleted since\n")


def doctor(env: Env, project: Path, *args: str) -> dict:  # type: ignore[type-arg]
    done = env.run("doctor", "--json", *args, cwd=project, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return dict(json.loads(done.stdout))


def loaded_context(binary: Path, env: Env, project: Path) -> str:
    """Every text of the first request Claude Code sends for a new prompt: its system prompt and the
    context it loads (MEMORY.md among it)."""
    with ScriptedAgentServer([Turn.say("ok")]) as server:
        run = run_agent(CLAUDE_CODE, binary, env, project, server, "hello", timeout=RUN_TIMEOUT_S)
        assert run.returncode == 0, run.stderr
        return server.main_requests[0].text()


@pytest.fixture
def written(clis: dict[str, Path], tmp_path: Path) -> tuple[Env, Path, Path]:
    """A project whose Claude Code memory folder the real CLI wrote with its Write tool."""
    env = Env(tmp_path)
    home = Path(env.vars["HOME"])
    project = git_project(tmp_path / "project")
    prepare_home(CLAUDE_CODE, home)
    memory = agent_memory_folder(CLAUDE_CODE, home, project)
    script = [Turn.call("Write", file_path=str(memory / name), content=text) for name, text in SAVED.items()]
    script += [Turn.call("Write", file_path=str(memory / "MEMORY.md"), content=INDEX), Turn.say("saved")]
    with ScriptedAgentServer(script) as server:
        run = run_agent(CLAUDE_CODE, clis[CLAUDE_CODE], env, project, server, "remember how we deploy", timeout=RUN_TIMEOUT_S)
        assert run.returncode == 0, run.stderr
        assert str(memory) in server.main_requests[0].text()  # the folder Claude Code itself calls its memory
    for name, text in SAVED.items():
        saved = (memory / name).read_text()
        # Claude Code rewrites a memory as it saves it: the name as a slug, the type under metadata
        assert saved.startswith("---\nname: ") and "\nmetadata: \n  node_type: memory\n  type: " in saved
        assert text.split("description: ")[1].split("\n")[0] in saved and saved.endswith(text.split("---\n\n")[1])
    assert (memory / "MEMORY.md").read_text() == INDEX
    return env, project, memory


def test_doctor_finds_what_is_wrong_in_a_folder_claude_code_wrote(written: tuple[Env, Path, Path]) -> None:
    env, project, memory = written
    report = doctor(env, project)
    by_kind: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for finding in report["findings"]:
        by_kind.setdefault(finding["kind"], []).append(finding)
    assert set(by_kind) == {"near_duplicate", "stale_reference", "index_drift"}, report["findings"]
    assert by_kind["near_duplicate"][0]["refs"] == ["memory/project_deploy.md", "memory/project_deploy_again.md"]
    assert [f["detail"]["reference"] for f in by_kind["stale_reference"]] == ["src/deploy.py"]  # notes.txt exists
    drift = {(f["detail"]["problem"], f["line"], f["fixable"]) for f in by_kind["index_drift"]}
    assert drift == {("dead_link", 3, True), ("unlisted", None, True)}
    assert report["roots"][0]["index_reader"] == "Claude Code" and report["roots"][0]["kind"] == "project"


def test_the_mended_index_is_what_claude_code_loads_next(clis: dict[str, Path], written: tuple[Env, Path, Path]) -> None:
    env, project, memory = written
    before = loaded_context(clis[CLAUDE_CODE], env, project)
    assert "old_notes.md" in before and "user_editor.md" not in before
    done = env.run("doctor", "--fix", "--yes", cwd=project, timeout=120)
    assert "mended" in done.stdout.decode(), done.stdout
    after = loaded_context(clis[CLAUDE_CODE], env, project)
    assert "old_notes.md" not in after and "- [editor](user_editor.md) — The user edits in Helix" in after  # its name as Claude Code saved it


def test_claude_code_loads_exactly_the_lines_doctor_says_it_loads(clis: dict[str, Path], written: tuple[Env, Path, Path]) -> None:
    env, project, memory = written
    filler = [f"- note {n:03d}: kept for the count" for n in range(1, 200)]
    (memory / "MEMORY.md").write_text("\n".join(
        filler + ["- [Deploy flow](project_deploy.md) — line 200", "- [Editor](user_editor.md) — line 201",
                  "- [Deploys from main](project_deploy_again.md) — line 202"]) + "\n")
    context = loaded_context(clis[CLAUDE_CODE], env, project)
    assert "(project_deploy.md) — line 200" in context and "line 201" not in context and "line 202" not in context
    past = [f for f in doctor(env, project)["findings"] if f["detail"].get("problem") == "past_truncation"]
    assert sorted((f["line"], f["refs"][1]) for f in past) == [(201, "memory/user_editor.md"), (202, "memory/project_deploy_again.md")]
