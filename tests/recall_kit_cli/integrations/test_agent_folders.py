"""Each agent's memory folders, worked out from a hook event the way the agent itself works them out
(rules read from Claude Code 2.1.197 and Qwen Code 0.24.4; the worktree case checked against both)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from recall_kit_cli.integrations.agents import CLAUDE_CODE, QWEN_CODE, Agent, event_context


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    (path / "src" / "deep").mkdir(parents=True)
    _git("init", "-q", cwd=path)
    _git("commit", "-q", "--allow-empty", "-m", "start", cwd=path)
    return path


def _key(path: Path | str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in str(path))


def _folders(agent: Agent, home: Path, cwd: Path | str | None, transcript: str | None = None, **env: str) -> list[tuple[str, str]]:
    payload = {"cwd": str(cwd) if cwd is not None else None, "transcript_path": transcript}
    return [(f.kind, f.path) for f in agent.folders(event_context(payload, {"HOME": str(home), **env}))]


def test_claude_code_keeps_a_repositorys_memory_under_its_top_folder_from_any_subfolder(home: Path, repo: Path) -> None:
    expected = [("project", str(home / ".claude" / "projects" / _key(repo) / "memory"))]
    assert _folders(CLAUDE_CODE, home, repo / "src" / "deep") == expected
    assert _folders(CLAUDE_CODE, home, repo) == expected


def test_claude_code_gives_a_git_worktree_its_main_repositorys_folder(home: Path, repo: Path, tmp_path: Path) -> None:
    _git("worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature", cwd=repo)
    (tmp_path / "wt" / "sub").mkdir()
    assert _folders(CLAUDE_CODE, home, tmp_path / "wt" / "sub") == [
        ("project", str(home / ".claude" / "projects" / _key(repo) / "memory"))
    ]


def test_outside_git_claude_code_uses_the_session_folder_from_the_transcript(home: Path, tmp_path: Path) -> None:
    start = tmp_path / "notes"
    (start / "later").mkdir(parents=True)
    transcript = str(home / ".claude" / "projects" / _key(start) / "abc.jsonl")
    # a command moved the cwd into a subfolder: the transcript still names the folder the session began in
    assert _folders(CLAUDE_CODE, home, start / "later", transcript) == [
        ("project", str(home / ".claude" / "projects" / _key(start) / "memory"))
    ]
    # a transcript outside Claude Code's projects folder is ignored: the cwd decides
    elsewhere = str(tmp_path / "x" / _key(start) / "abc.jsonl")
    assert _folders(CLAUDE_CODE, home, start / "later", elsewhere) == [
        ("project", str(home / ".claude" / "projects" / _key(start / "later") / "memory"))
    ]


def test_claude_code_takes_auto_memory_directory_from_the_users_settings_only(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryDirectory": "/etc"}))
    assert _folders(CLAUDE_CODE, home, project) == [("project", str(home / ".claude" / "projects" / _key(project) / "memory"))]
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryDirectory": "~/notes/memory/"}))
    assert _folders(CLAUDE_CODE, home, project) == [("project", str(home / "notes" / "memory"))]
    (home / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryDirectory": "~/../../etc"}))
    assert _folders(CLAUDE_CODE, home, project)[0][1].startswith(str(home / ".claude" / "projects"))  # refused, as Claude does
    (home / ".claude" / "settings.json").write_text('{"a":' + "[" * 5000 + "]" * 5000 + "}")  # past the parser's depth
    assert _folders(CLAUDE_CODE, home, project) == [("project", str(home / ".claude" / "projects" / _key(project) / "memory"))]


def test_claude_code_config_dir_moves_the_projects_folder(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "claude-config"
    assert _folders(CLAUDE_CODE, home, tmp_path, CLAUDE_CONFIG_DIR=str(config)) == [
        ("project", str(config / "projects" / _key(tmp_path) / "memory"))
    ]


def test_a_long_project_path_gets_claude_codes_cut_name_and_hash(home: Path) -> None:
    long_path = "/" + "a" * 300  # Claude Code names it '-' + 199 'a's, '-', and the path's hash in base 36
    ((kind, path),) = _folders(CLAUDE_CODE, home, long_path)
    assert Path(path).parent.name == "-" + "a" * 199 + "-vtkmfl"


def test_a_character_beyond_the_bmp_counts_twice_as_in_javascript(home: Path) -> None:
    # Claude Code's regex runs over UTF-16 code units: an emoji is two '-', and the 200 are code units
    # (the expected names were printed by node running Claude Code's own two functions)
    assert Path(_folders(CLAUDE_CODE, home, "/x/\U0001f600\u00e9")[0][1]).parent.name == "-x----"
    assert Path(_folders(CLAUDE_CODE, home, "/" + "\U0001f600" * 150)[0][1]).parent.name == "-" * 201 + "cmv0xd"


def test_the_session_folder_is_found_above_a_long_cwd_by_its_hashed_name(home: Path, tmp_path: Path) -> None:
    start = tmp_path / ("n" * 230)
    (start / "sub" / "deeper").mkdir(parents=True)
    named = Path(_folders(CLAUDE_CODE, home, start)[0][1]).parent.name
    assert len(named) > 200  # cut, and followed by the hash of the whole path
    transcript = str(home / ".claude" / "projects" / named / "abc.jsonl")
    assert _folders(CLAUDE_CODE, home, start / "sub" / "deeper", transcript) == [
        ("project", str(home / ".claude" / "projects" / named / "memory"))
    ]


def test_qwen_code_has_a_project_folder_a_user_folder_and_an_opt_in_team_folder(home: Path, repo: Path) -> None:
    base = home / ".qwen"
    project, user = ("project", str(base / "projects" / _key(repo) / "memory")), ("user", str(base / "memories"))
    assert _folders(QWEN_CODE, home, repo / "src") == [project, user]
    team = ("team", str(repo / ".qwen" / "team-memory"))
    (repo / ".qwen").mkdir()
    (repo / ".qwen" / "settings.json").write_text(json.dumps({"memory": {"enableTeamMemory": True}}))
    assert _folders(QWEN_CODE, home, repo / "src") == [project, user]  # a checked-in file cannot turn it on
    base.mkdir()
    (base / "settings.json").write_text(json.dumps({"memory": {"enableTeamMemory": True}}))
    assert _folders(QWEN_CODE, home, repo / "src") == [project, user, team]
    assert _folders(QWEN_CODE, home, repo / "src", QWEN_CODE_MEMORY_TEAM="0") == [project, user]


def test_qwen_code_gives_a_worktree_a_project_folder_of_its_own(home: Path, repo: Path, tmp_path: Path) -> None:
    _git("worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature", cwd=repo)
    assert _folders(QWEN_CODE, home, tmp_path / "wt")[0] == ("project", str(home / ".qwen" / "projects" / _key(tmp_path / "wt") / "memory"))


def test_qwen_code_memory_base_dir_moves_both_folders(home: Path, tmp_path: Path) -> None:
    base = tmp_path / "qbase"
    assert _folders(QWEN_CODE, home, tmp_path / "p", QWEN_CODE_MEMORY_BASE_DIR=str(base)) == [
        ("project", str(base / "projects" / _key(tmp_path / "p") / "memory")), ("user", str(base / "memories"))
    ]


@pytest.mark.parametrize("cwd", ["relative/dir", "/x" * 2049 + "/", "/tmp/a\0b", None, 12])
def test_a_cwd_that_is_no_usable_path_names_no_project_folder(home: Path, cwd: object) -> None:
    context = event_context({"cwd": cwd, "transcript_path": "/" + "t" * (10 << 20)}, {"HOME": str(home)})
    assert context.cwd is None and context.transcript_path is None
    assert CLAUDE_CODE.folders(context) == ()
    assert [f.kind for f in QWEN_CODE.folders(context)] == ["user"]


def test_dot_dot_in_the_cwd_is_resolved_before_any_rule_sees_it(home: Path, repo: Path) -> None:
    sneaky = f"{repo}/src/../../../../../../../etc"
    ((_, path),) = _folders(CLAUDE_CODE, home, sneaky)
    assert path == str(home / ".claude" / "projects" / "-etc" / "memory")


def test_the_file_system_root_as_cwd_names_one_small_folder_under_the_agents_own(home: Path) -> None:
    assert _folders(CLAUDE_CODE, home, "/") == [("project", str(home / ".claude" / "projects" / "-" / "memory"))]


def test_a_fifo_in_a_worktree_pointer_never_blocks_the_rule(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "odd"
    gitdir = tmp_path / "main" / ".git" / "worktrees" / "odd"
    gitdir.mkdir(parents=True)
    project.mkdir()
    (project / ".git").write_text(f"gitdir: {gitdir}\n")
    os.mkfifo(gitdir / "commondir")
    os.mkfifo(gitdir / "gitdir")
    assert _folders(CLAUDE_CODE, home, project) == [("project", str(home / ".claude" / "projects" / _key(project) / "memory"))]


@pytest.mark.parametrize("variable", ["QWEN_HOME", "QWEN_CODE_MEMORY_BASE_DIR", "QWEN_RUNTIME_DIR"])
def test_a_relative_qwen_folder_variable_is_ignored_as_claude_config_dir_is(
    home: Path, repo: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # a clone's .qwen/settings.json turned team memory on, and its .qwen/memories was read, when a relative
    # variable was resolved against the folder the hook runs in (the project)
    (repo / ".qwen" / "memories").mkdir(parents=True)
    (repo / ".qwen" / "settings.json").write_text(json.dumps({"memory": {"enableTeamMemory": True}}))
    monkeypatch.chdir(repo)
    base = home / ".qwen"
    expected = [("project", str(base / "projects" / _key(repo) / "memory")), ("user", str(base / "memories"))]
    assert _folders(QWEN_CODE, home, repo, **{variable: ".qwen"}) == expected
    assert _folders(QWEN_CODE, home, repo, **{variable: "~/elsewhere"})[1] == ("user", str(home / "elsewhere" / "memories"))
    assert _folders(CLAUDE_CODE, home, repo, CLAUDE_CONFIG_DIR=".claude")[0][1].startswith(str(home / ".claude"))
