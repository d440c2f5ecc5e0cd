"""Which endpoint may receive which key (a project file's endpoint gets none of the user's until the
user trusts the file as it is), the user's own file, the trust records, and URLs that cannot work."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from recall_kit import ConfigError, ModelSelector, SelectorConfig, load_selector_config
from recall_kit.settings import trust_config_file, untrust_config_file

USER_KEY = "sk-user-0123456789abcdef"
PROJECT_KEY = "sk-project-0123456789abcdef"
ATTACKER = "http://attacker.example/v1"


@pytest.fixture(autouse=True)
def in_an_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    return tmp_path / "home-config" / "recall-kit.toml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "cloned"
    folder.mkdir()
    path = folder / "recall-kit.toml"
    path.write_text(f'[selector]\nbase_url = "{ATTACKER}"\nmodel = "m"\ntimeout = 5\n')
    return path


def load(project: Path, user_file: Path, **env: str) -> SelectorConfig:
    return load_selector_config(config_path=project, environ={"RECALL_KIT_CONFIG": str(user_file), **env})


@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "RECALL_KIT_API_KEY"])
def test_an_untrusted_project_endpoint_gets_no_key_of_the_users(project: Path, user_file: Path, variable: str) -> None:
    config = load(project, user_file, **{variable: USER_KEY})
    assert config.api_key is None and not config.configured and config.project_trust == "untrusted"
    assert config.refusal and f"environment variable {variable}" in config.refusal and ATTACKER in config.refusal
    assert f"recall-kit config trust {project}" in config.refusal and USER_KEY not in config.refusal
    with pytest.raises(ConfigError, match="is not sent to"):
        ModelSelector.from_config(config)
    # the harmless knobs still apply
    assert (config.base_url, config.model, config.timeout) == (ATTACKER, "m", 5.0)


def test_a_key_given_as_an_argument_or_in_the_users_file_is_withheld_too(project: Path, user_file: Path) -> None:
    assert load_selector_config(config_path=project, api_key=USER_KEY,
                                environ={"RECALL_KIT_CONFIG": str(user_file)}).refusal
    user_file.parent.mkdir()
    user_file.write_text(f'[selector]\napi_key = "{USER_KEY}"\n')
    config = load_selector_config(config_path=project, environ={"RECALL_KIT_CONFIG": str(user_file)})
    assert config.api_key is None and config.refusal and f"user file {user_file}" in config.refusal


def test_an_untrusted_project_endpoint_gets_nothing_even_with_no_key_or_a_key_of_its_own(
    project: Path, user_file: Path
) -> None:
    keyless = load(project, user_file)  # the prompts and memories alone would go to the attacker
    assert not keyless.configured and keyless.refusal and keyless.api_key is None
    assert keyless.refusal.startswith(f"your prompts are not sent to {ATTACKER}, the base_url of {project}")
    project.write_text(f'[selector]\nbase_url = "{ATTACKER}"\nmodel = "m"\napi_key = "{PROJECT_KEY}"\n')
    own_key = load(project, user_file)
    assert not own_key.configured and own_key.refusal and own_key.api_key is None
    with pytest.raises(ConfigError, match="your prompts are not sent to"):
        ModelSelector.from_config(own_key)
    mine = load(project, user_file, RECALL_KIT_BASE_URL="http://mine/v1")
    assert mine.configured and mine.api_key is None  # the project's key never goes to the user's endpoint
    trust_config_file(project, environ={"RECALL_KIT_CONFIG": str(user_file)})
    trusted = load(project, user_file)
    assert trusted.configured and trusted.api_key == PROJECT_KEY and trusted.refusal is None


def test_trusting_the_file_lets_the_users_key_go_until_the_file_changes(project: Path, user_file: Path) -> None:
    env = {"RECALL_KIT_CONFIG": str(user_file), "OPENAI_API_KEY": USER_KEY}
    trusted = trust_config_file(project.parent, environ=env)  # a folder means its recall-kit.toml
    assert trusted.path == project
    config = load_selector_config(config_path=project, environ=env)
    assert config.configured and config.api_key == USER_KEY and config.project_trust == "trusted"
    assert config.sources["base_url"] == f"project file {project} (trusted) [selector] base_url"
    assert os.stat(user_file).st_mode & 0o777 == 0o600 and os.stat(user_file.parent).st_mode & 0o777 == 0o700

    project.write_text(project.read_text().replace('"m"', '"other"'))
    changed = load_selector_config(config_path=project, environ=env)
    assert changed.api_key is None and changed.project_trust == "changed"
    assert changed.refusal and "changed since you trusted it" in changed.refusal

    trust_config_file(project, environ=env)
    assert load_selector_config(config_path=project, environ=env).api_key == USER_KEY
    assert untrust_config_file(project, environ=env) == (project, True)
    assert untrust_config_file(project.parent, environ=env) == (project, False)
    assert load_selector_config(config_path=project, environ=env).project_trust == "untrusted"


def test_trust_records_keep_everything_the_user_wrote(project: Path, user_file: Path, tmp_path: Path) -> None:
    user_file.parent.mkdir()
    user_file.write_text('# mine\n[selector]\nmodel = "mine"\n\n[selector.extra]\nkept = true\n')
    env = {"RECALL_KIT_CONFIG": str(user_file)}
    other = tmp_path / 'a "quoted" \\ folder'
    other.mkdir()
    (other / "recall-kit.toml").write_text("[selector]\n")
    trust_config_file(project, environ=env)
    trust_config_file(other, environ=env)
    text = user_file.read_text()
    assert text.startswith('# mine\n[selector]\nmodel = "mine"\n\n[selector.extra]\nkept = true\n')
    data = tomllib.loads(text)
    assert data["selector"] == {"model": "mine", "extra": {"kept": True}}
    assert {r["path"] for r in data["trusted"]} == {str(project), str(other / "recall-kit.toml")}
    untrust_config_file(project, environ=env)
    untrust_config_file(other, environ=env)
    assert user_file.read_text() == '# mine\n[selector]\nmodel = "mine"\n\n[selector.extra]\nkept = true\n'


def test_trust_entries_written_by_hand_elsewhere_are_not_silently_kept(project: Path, user_file: Path) -> None:
    user_file.parent.mkdir()
    user_file.write_text(f'[[trusted]]\npath = "{project}"\nsha256 = "0"\n\n[selector]\nmodel = "x"\n')
    before = user_file.read_text()
    with pytest.raises(ConfigError, match="outside the block"):
        untrust_config_file(project, environ={"RECALL_KIT_CONFIG": str(user_file)})
    assert user_file.read_text() == before


def test_a_project_file_cannot_trust_itself(project: Path, user_file: Path) -> None:
    project.write_text(project.read_text() + f'[[trusted]]\npath = "{project}"\nsha256 = "anything"\n')
    assert load(project, user_file, OPENAI_API_KEY=USER_KEY).refusal


def test_the_users_file_is_read_only_when_it_is_theirs_and_others_cannot_write_it(user_file: Path, tmp_path: Path) -> None:
    user_file.parent.mkdir()
    user_file.write_text('[selector]\nbase_url = "http://mine/v1"\nmodel = "m"\n')
    env = {"RECALL_KIT_CONFIG": str(user_file)}
    assert load_selector_config(environ=env).base_url == "http://mine/v1"
    user_file.chmod(0o620)
    with pytest.raises(ConfigError, match="others can write to it"):
        load_selector_config(environ=env)
    user_file.chmod(0o600)
    link = tmp_path / "dotfiles-link.toml"
    link.symlink_to(user_file)  # a dotfiles symlink to the user's own file is fine
    assert load_selector_config(environ={"RECALL_KIT_CONFIG": str(link)}).base_url == "http://mine/v1"
    if os.geteuid() != 0:
        pytest.skip("giving the file to another user needs root")
    os.chown(user_file, 65534, -1)
    with pytest.raises(ConfigError, match="belongs to uid 65534"):
        load_selector_config(environ={"RECALL_KIT_CONFIG": str(link)})


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:99999/v1", "port 99999 is out of range (1-65535)"),
        ("http://127.0.0.1:0/v1", "port 0 is out of range (1-65535)"),
        ("ftp://host/v1", "must start with http:// or https://"),
        ("localhost:8080/v1", "must start with http:// or https://"),
        ("http:///v1", "names no host"),
        ("http://host:abc/v1", "does not parse"),
    ],
)
def test_a_base_url_that_cannot_work_is_one_line_naming_it(url: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_selector_config(base_url=url, model="m", environ={})
    assert str(caught.value).startswith(f"argument base_url: {url} is not a usable base URL: ")
    assert problem in str(caught.value)
    with pytest.raises(ConfigError, match=f"^ModelSelector: .* is not a usable base URL: .*{problem[:8]}"):
        ModelSelector(url, "m")


def test_a_bad_base_url_is_named_with_its_credentials_masked() -> None:
    for url in ("http://user:hunter2@127.0.0.1:99999/v1", "http://user:hunter2@host:abc/v1"):
        with pytest.raises(ConfigError) as caught:
            load_selector_config(environ={"RECALL_KIT_BASE_URL": url, "RECALL_KIT_MODEL": "m"})
        message = str(caught.value)
        assert "hunter2" not in message and "***@" in message and "RECALL_KIT_BASE_URL" in message


def test_lenient_loading_reports_a_malformed_key_and_keeps_every_other_setting(tmp_path: Path) -> None:
    env = {"RECALL_KIT_BASE_URL": "http://h/v1", "RECALL_KIT_MODEL": "m", "RECALL_KIT_API_KEY": "sk-abc\u200bdef",
           "RECALL_KIT_TIMEOUT": "9"}
    with pytest.raises(ConfigError, match="invisible"):
        load_selector_config(environ=env)
    config = load_selector_config(environ=env, lenient=True)
    assert (config.base_url, config.model, config.timeout, config.api_key) == ("http://h/v1", "m", 9.0, None)
    assert set(config.problems) == {"api_key"} and "U+200B" in config.problems["api_key"]
    assert not config.configured
    with pytest.raises(ConfigError, match="invisible"):
        ModelSelector.from_config(config)
