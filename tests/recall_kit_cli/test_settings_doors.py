"""One settings loader behind every command: each file read once, every value bounded, trust applied
to every key of a project file, and a bad value one line from every door (query, serve, mcp,
config, enrich, bench)."""

from __future__ import annotations

import json

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import EXAMPLES, RECALL_KIT, RunCli, assert_one_line_error, clean_environ, json_out
from mcp_support import needs_mcp
from recall_kit.testing import Reply, ScriptedChatServer

DEPLOY = "how do we deploy ledgerline to production"


def _user_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "user-config" / "recall-kit.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
    return path


def _run(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`recall-kit ARGS` with no input; bounded, as a command that wrongly started serving would never end."""
    return subprocess.run([str(RECALL_KIT), *args], capture_output=True, text=True, timeout=60, cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL)


def _private_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A clean environment whose daemon folders (socket, logs) are inside tmp_path."""
    return clean_environ(XDG_RUNTIME_DIR=str(tmp_path / "run"), XDG_STATE_HOME=str(tmp_path / "state"), **extra)


READ_ONCE = """
import sys
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" and
                 str(args[0]).endswith("recall-kit.toml") else None)
sys.argv = ["recall-kit", *sys.argv[1:]]
from recall_kit_cli import _app
_app.exit_now = lambda code: print("OPENED", sorted(opened), file=sys.stderr)  # the real one ends at once
_app.main()
"""


def test_one_query_reads_the_project_file_and_the_users_file_once_each(tmp_path: Path) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "recall-kit.toml").write_text(f'roots = ["{EXAMPLES}"]\n[selector]\nmodel = "m"\n')
    user = _user_file(tmp_path, 'learn = false\n[selector]\ntimeout = 5\n')
    env = clean_environ(RECALL_KIT_CONFIG=str(user))
    for args in (("query", DEPLOY), ("config", "--json")):
        result = subprocess.run([sys.executable, "-c", READ_ONCE, *args], capture_output=True, text=True,
                                timeout=60, cwd=cwd, env=env)
        opened = result.stderr.strip().splitlines()[-1]
        assert opened == f"OPENED {sorted([str(cwd / 'recall-kit.toml'), str(user)])}", result.stderr


def test_learn_in_an_untrusted_project_file_is_ignored_with_one_warning(run_cli: RunCli, tmp_path: Path) -> None:
    project = tmp_path / "cwd" / "recall-kit.toml"
    project.write_text("learn = true\n")
    result = run_cli("config", "--json")
    data = json_out(result)
    assert data["learn"] == {"value": "off", "source": "default"}
    assert result.stderr.splitlines() == [
        f"recall-kit: warning: {project}: learn ignored: a project file you have not trusted may set only "
        f"roots, base_url, model, timeout (`recall-kit config trust {project}` trusts it)"]
    env = clean_environ(RECALL_KIT_CONFIG=str(tmp_path / "user" / "recall-kit.toml"))
    assert run_cli("config", "trust", env=env).returncode == 0
    trusted = json_out(run_cli("config", "--json", env=env))["learn"]
    assert trusted == {"value": "on", "source": f"project file {project} (trusted) learn"}


def test_config_shows_whether_learning_is_on_and_why_in_text_and_json(run_cli: RunCli, tmp_path: Path) -> None:
    env = clean_environ(RECALL_KIT_LEARN="1")
    assert json_out(run_cli("config", "--json", env=env))["learn"] == {
        "value": "on", "source": "environment variable RECALL_KIT_LEARN"}
    rows = {line.split()[0]: line for line in run_cli("config", env=env).stdout.splitlines()}
    assert rows["learn"] == "learn         on  (environment variable RECALL_KIT_LEARN)"
    user = _user_file(tmp_path, "learn = true\n")
    from_file = json_out(run_cli("config", "--json", env=clean_environ(RECALL_KIT_CONFIG=str(user))))["learn"]
    assert from_file == {"value": "on", "source": f"user file {user} learn"}


@pytest.mark.parametrize("where", ["project", "environment", "argument"])
def test_the_file_system_root_is_refused_as_a_root_from_every_source(run_cli: RunCli, tmp_path: Path, where: str) -> None:
    env, args = clean_environ(), ("query", DEPLOY, "--fast-only")
    if where == "project":
        (tmp_path / "cwd" / "recall-kit.toml").write_text('roots = ["/"]\n')
    elif where == "environment":
        env = clean_environ(RECALL_KIT_ROOTS="/")
    else:
        args += ("--root", "/")
    assert_one_line_error(run_cli(*args, env=env), "root / is the file system root, not a folder of memories")
    listing = ("list", "--root", "/") if where == "argument" else ("list",)
    assert_one_line_error(run_cli(*listing, env=env), "root / is the file system root")


def test_the_home_folder_is_refused_as_a_root(run_cli: RunCli, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (tmp_path / "cwd" / "recall-kit.toml").write_text(f'roots = ["{home}"]\n')
    assert_one_line_error(run_cli("query", DEPLOY, env=clean_environ(HOME=str(home))), "is the home folder")
    assert_one_line_error(run_cli("list", "--root", str(tmp_path), env=clean_environ(HOME=str(home))),
                          "holds the home folder")


def test_a_project_files_timeout_above_300_seconds_is_one_line(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "cwd" / "recall-kit.toml").write_text("[selector]\ntimeout = 1e9\n")
    args = ("query", DEPLOY, "--root", str(EXAMPLES), "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert_one_line_error(run_cli(*args), "[selector] timeout", "at most 300 seconds", "1000000000.0")
    assert_one_line_error(run_cli(*args, "--model-timeout", "nan"), "--model-timeout", "finite")


def test_a_relative_recall_kit_config_is_one_line(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "cwd" / "recall-kit.toml").write_text('[selector]\nbase_url = "http://127.0.0.1:9/v1"\n')
    env = clean_environ(RECALL_KIT_CONFIG="recall-kit.toml", RECALL_KIT_API_KEY="sk-test-0123456789abcdef")
    assert_one_line_error(run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--model", "m", env=env),
                          "RECALL_KIT_CONFIG", "must be an absolute path", "'recall-kit.toml'")
    shown = json_out(run_cli("config", "--json", env=env))
    assert "absolute path" in shown["user_config"]["problem"]


@pytest.mark.parametrize("door", ["query", "serve", pytest.param("mcp", marks=needs_mcp), "config", "enrich", "bench"])
@pytest.mark.parametrize("bad", ["RECALL_KIT_LEARN=maybe", "user file learn = \"yes\""])
def test_a_learn_that_is_no_boolean_is_one_line_from_every_door(
    tmp_path: Path, dataset: Path, door: str, bad: str
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    if bad.startswith("RECALL_KIT_LEARN"):
        env, words = _private_env(tmp_path, RECALL_KIT_LEARN="maybe"), ("environment variable RECALL_KIT_LEARN",)
    else:
        user = _user_file(tmp_path, 'learn = "yes"\n')
        env, words = _private_env(tmp_path, RECALL_KIT_CONFIG=str(user)), (f"user file {user} learn",)
    words += ("must be", "true or false")
    if door == "config":
        shown = json_out(_run("config", "--json", cwd=cwd, env=env))
        assert all(word in shown["learn"]["problem"] for word in words)
        return
    args = {
        "query": ("query", DEPLOY, "--root", str(EXAMPLES)),
        "serve": ("serve",),
        "mcp": ("mcp", "--root", str(EXAMPLES)),
        "enrich": ("enrich", "--root", str(EXAMPLES), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"),
        "bench": ("bench", "delivery", str(dataset), "--base-url", "http://127.0.0.1:9/v1", "--model", "m"),
    }[door]
    assert_one_line_error(_run(*args, cwd=cwd, env=env), *words)


@pytest.mark.parametrize("given", ["--idle-timeout", "RECALL_KIT_IDLE_TIMEOUT"])
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-5"])
def test_serve_refuses_an_idle_timeout_that_is_not_a_positive_finite_number(
    tmp_path: Path, given: str, value: str
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    if given == "--idle-timeout":
        result = _run("serve", "--idle-timeout", value, cwd=cwd, env=_private_env(tmp_path))
    else:
        result = _run("serve", cwd=cwd, env=_private_env(tmp_path, RECALL_KIT_IDLE_TIMEOUT=value))
    assert_one_line_error(result, given, "idle_timeout must be a positive, finite number of seconds")


@pytest.mark.parametrize("file", ["user", "project"])
def test_a_key_in_the_wrong_table_or_misspelt_is_named_with_what_was_meant(
    run_cli: RunCli, tmp_path: Path, file: str
) -> None:
    text = 'base_url = "http://127.0.0.1:9/v1"\n[selectr]\nmodel = "m"\n[selector]\nmodle = "m"\n'
    if file == "user":
        path = _user_file(tmp_path, text)
        result = run_cli("config", env=clean_environ(RECALL_KIT_CONFIG=str(path)))
    else:
        path = tmp_path / "cwd" / "recall-kit.toml"
        path.write_text(text)
        result = run_cli("config")
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        f"recall-kit: warning: {path}: unknown key 'base_url' at the top level ignored; did you mean [selector] base_url?",
        f"recall-kit: warning: {path}: unknown table [selectr] ignored; did you mean [selector]?",
        f"recall-kit: warning: {path}: unknown key [selector] 'modle' ignored; did you mean [selector] model?",
    ]


def test_query_with_learning_on_writes_nothing_from_its_one_turn(tmp_path: Path) -> None:
    # a word is written once it came in two turns of one learner; a query is one turn in a process of its own
    memories = tmp_path / "memories"
    shutil.copytree(EXAMPLES, memories)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    prompt = "push the bookkeeping thing live on friday"  # the fast stage finds nothing for it
    with ScriptedChatServer(default=Reply.select("memories/projects/ledgerline/deploy.md")) as server:
        env = clean_environ(RECALL_KIT_LEARN="1", RECALL_KIT_BASE_URL=server.base_url, RECALL_KIT_MODEL="scripted")
        for _ in range(2):
            result = _run("query", prompt, "--root", str(memories), "--json", cwd=cwd, env=env)
            assert result.returncode == 0, result.stderr
            assert [d["ref"] for d in json.loads(result.stdout)["refined"]["docs"]] == ["memories/projects/ledgerline/deploy.md"]
        assert len(server.requests) == 2  # the model answered both, and learning saw each
    assert not (memories / ".recall-kit" / "learned.jsonl").exists()
