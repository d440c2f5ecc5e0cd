"""The settings loader: each setting declared once, trust applied to every key of a project file,
every value bounded whatever its source, and open_recaller's plain values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memory_store import Snapshot
from recall_kit import ConfigError, UsageError, load_selector_config, open_recaller
from recall_kit.settings import (
    DECLARATIONS,
    UNTRUSTED_FILE_MAY_SET,
    environment_setting,
    load_settings,
    trust_config_file,
)

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def in_an_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"RECALL_KIT_CONFIG": str(tmp_path / "user" / "recall-kit.toml")}


def _project(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cwd" / "recall-kit.toml"
    path.write_text(text)
    return path


def test_each_setting_is_declared_once_and_the_untrusted_list_is_the_one_in_the_docs() -> None:
    names = [d.name for d in DECLARATIONS]
    assert len(names) == len(set(names))
    assert {"roots", "base_url", "model", "api_key", "timeout", "learn", "cache_dir", "idle_timeout",
            "trail", "trail_prompts", "agent_keywords", "daemon_enrich", "enrich_calls_per_minute"} == set(names)
    assert UNTRUSTED_FILE_MAY_SET == ("roots", "base_url", "model", "timeout")
    security = " ".join((REPO / "docs" / "security.md").read_text().split())
    listed = re.search(r"A project file you have not trusted may set only (.+?)\.", security)
    assert listed is not None and re.findall(r"`(\w+)`", listed.group(1)) == list(UNTRUSTED_FILE_MAY_SET)


@pytest.mark.parametrize("key", ["learn = true", "[selector]\napi_key = \"sk-x\""])
def test_an_untrusted_project_file_sets_only_what_the_list_allows(
    tmp_path: Path, env: dict[str, str], key: str
) -> None:
    project = _project(tmp_path, key + "\n")
    untrusted = load_settings(environ=env)
    name = key.split("=")[0].split()[-1]
    assert untrusted[name].source in ("default", "not set") and not untrusted.problems
    assert [w for w in untrusted.warnings if f"{name} ignored: a project file you have not trusted" in w]
    trust_config_file(project, environ=env)
    trusted = load_settings(environ=env)
    assert trusted[name].source.startswith(f"project file {project} (trusted)") and not trusted.warnings


@pytest.mark.parametrize("source", ["argument", "environment", "user file", "project file"])
@pytest.mark.parametrize("value", ["1e9", "nan", "inf", "0", "-1", "true"])
def test_the_model_timeout_is_positive_finite_and_at_most_300_seconds_from_any_source(
    tmp_path: Path, env: dict[str, str], source: str, value: str
) -> None:
    arguments: dict[str, object] = {}
    if source == "argument":
        arguments["timeout"] = float(value) if value != "true" else True
    elif source == "environment":
        env["RECALL_KIT_TIMEOUT"] = value
    elif source == "user file":
        user = Path(env["RECALL_KIT_CONFIG"])
        user.parent.mkdir()
        user.write_text(f"[selector]\ntimeout = {value}\n")
    else:
        _project(tmp_path, f"[selector]\ntimeout = {value}\n")
    settings = load_settings(arguments, environ=env)
    assert "timeout" in settings.problems and not settings.selector.configured
    with pytest.raises(ConfigError, match="timeout must be"):
        settings.required("timeout")
    assert load_settings({"timeout": 300}, environ=env).selector.timeout == 300


def test_the_file_system_root_and_the_home_folder_are_no_roots(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for roots in (["/"], [str(home)], [str(tmp_path)]):
        problem = load_settings({"roots": roots}, environ=env).problems["roots"]
        assert "not a folder of memories" in problem and problem.startswith("argument roots: root ")


@pytest.mark.parametrize("root", ["../private-notes", "~/notes", "/etc", "notes/link"])
def test_an_untrusted_project_files_roots_stay_inside_its_own_folder(
    tmp_path: Path, env: dict[str, str], root: str
) -> None:
    (tmp_path / "private-notes").mkdir()
    (tmp_path / "cwd" / "notes").mkdir()
    (tmp_path / "cwd" / "notes" / "link").symlink_to(tmp_path / "private-notes")  # a clone can ship one
    project = _project(tmp_path, f"roots = [{root!r}]\n".replace("'", '"'))
    problem = load_settings(environ=env).problems["roots"]
    assert f"root {root!r} is outside {tmp_path / 'cwd'}" in problem and "\n" not in problem
    inside = load_settings(environ=env, project_path=_project(tmp_path, 'roots = ["notes", "."]\n'))
    assert inside.roots.value == (str(tmp_path / "cwd" / "notes"), str(tmp_path / "cwd" / "."))
    _project(tmp_path, f"roots = [{root!r}]\n".replace("'", '"'))
    trust_config_file(project, environ=env)  # a file the user trusts names any folder, as the user does
    assert "roots" not in load_settings(environ=env).problems


def test_a_relative_user_config_path_is_refused_in_one_line(env: dict[str, str]) -> None:
    env["RECALL_KIT_CONFIG"] = "recall-kit.toml"
    with pytest.raises(ConfigError, match=r"^environment variable RECALL_KIT_CONFIG: must be an absolute path"):
        load_selector_config(environ=env)


def test_learn_takes_a_boolean_from_files_and_1_or_0_from_the_environment(tmp_path: Path, env: dict[str, str]) -> None:
    assert environment_setting("learn", {"RECALL_KIT_LEARN": "yes"}).value is True
    with pytest.raises(ConfigError, match="RECALL_KIT_LEARN: learn must be 1 or 0"):
        environment_setting("learn", {"RECALL_KIT_LEARN": "maybe"})
    user = Path(env["RECALL_KIT_CONFIG"])
    user.parent.mkdir()
    user.write_text('learn = "yes"\n')
    assert "true or false (a TOML boolean, unquoted)" in load_settings(environ=env).problems["learn"]


def test_open_recaller_given_one_path_instead_of_a_list_says_so(tmp_path: Path) -> None:
    for alone in ("examples/memories", tmp_path):
        with pytest.raises(UsageError, match=r"roots must be a list of folders, got the single path .*: pass \["):
            open_recaller(alone, watch=False)  # type: ignore[arg-type]


def test_begin_with_a_prompt_that_is_not_text_says_so() -> None:
    import asyncio

    async def begin() -> None:
        async with open_recaller(Snapshot.build(1, {}, ())) as recaller:
            session = recaller.session()
            with pytest.raises(UsageError, match="begin\\(\\) takes the user's prompt as a str, got int"):
                session.begin(123)  # type: ignore[arg-type]
            await session.close()

    asyncio.run(begin())
