"""Where the endpoint comes from: arguments, RECALL_KIT_*, the user's file, OPENAI_*, the project file."""

from __future__ import annotations

from pathlib import Path

import pytest

from recall_kit import ConfigError, ModelSelector, load_selector_config

KEY = "sk-test-very-secret-0123456789"


def write_toml(folder: Path, text: str) -> Path:
    path = folder / "recall-kit.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_from_env_reads_recall_kit_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"RECALL_KIT_BASE_URL": "http://h/v1/", "RECALL_KIT_MODEL": "m", "RECALL_KIT_API_KEY": KEY,
           "RECALL_KIT_TIMEOUT": "7.5"}
    selector = ModelSelector.from_env(environ=env)
    assert (selector.base_url, selector.model, selector.timeout) == ("http://h/v1", "m", 7.5)


def test_openai_variables_are_the_last_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_selector_config(environ={"OPENAI_BASE_URL": "http://o/v1", "OPENAI_API_KEY": KEY,
                                           "RECALL_KIT_MODEL": "m"})
    assert (config.base_url, config.api_key, config.model) == ("http://o/v1", KEY, "m")


def test_recall_kit_toml_in_current_directory_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_toml(tmp_path, '[selector]\nbase_url = "http://file/v1"\nmodel = "file-model"\ntimeout = 12\n')
    monkeypatch.chdir(tmp_path)
    config = load_selector_config(environ={})
    assert (config.base_url, config.model, config.timeout) == ("http://file/v1", "file-model", 12.0)
    assert config.config_file == tmp_path / "recall-kit.toml" and config.project_trust == "untrusted"
    # every setting of the user's own, even a variable set for every OpenAI client, outranks a project file
    assert load_selector_config(environ={"OPENAI_BASE_URL": "http://generic/v1"}).base_url == "http://generic/v1"


def test_precedence_arguments_then_env_then_user_file_then_openai_then_project_file(tmp_path: Path) -> None:
    project = write_toml(tmp_path, '[selector]\nbase_url = "http://file/v1"\nmodel = "file-model"\napi_key = "file-key"\n')
    (tmp_path / "user").mkdir()
    user = write_toml(tmp_path / "user", '[selector]\nmodel = "user-model"\napi_key = "user-key"\n')
    env = {"RECALL_KIT_MODEL": "env-model", "OPENAI_API_KEY": "generic-key", "RECALL_KIT_CONFIG": str(user)}
    config = load_selector_config(base_url="http://arg/v1", config_path=project, environ=env)
    assert (config.base_url, config.model, config.api_key) == ("http://arg/v1", "env-model", "user-key")
    del env["RECALL_KIT_MODEL"]
    user.write_text('[selector]\nmodel = "user-model"\n')
    config = load_selector_config(base_url="http://arg/v1", config_path=project, environ=env)
    assert (config.model, config.api_key) == ("user-model", "generic-key")
    assert config.sources["api_key"] == "environment variable OPENAI_API_KEY"


def test_nothing_configured_raises_config_error_naming_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="missing base URL and model"):
        ModelSelector.from_env(environ={})
    assert not load_selector_config(environ={}).configured


@pytest.mark.parametrize(
    ("text", "message"),
    [("[selector\n", "not valid TOML"), ('selector = "x"\n', "must be a table"),
     ("[selector]\ntimeout = -1\n", "positive"), ('[selector]\ntimeout = "soon"\n', "number of seconds"),
     ("[selector]\nmodel = 3\n", "model must be a string")],
)
def test_invalid_config_file_raises_config_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_selector_config(config_path=write_toml(tmp_path, text), environ={})


def test_missing_explicit_config_file_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_selector_config(config_path=tmp_path / "nope.toml", environ={})


def test_invalid_constructor_arguments_raise_config_error() -> None:
    with pytest.raises(ConfigError):
        ModelSelector("", "m")
    with pytest.raises(ConfigError):
        ModelSelector("http://h/v1", "m", timeout=0)


def test_api_key_absent_from_repr_of_selector_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_selector_config(base_url="http://h/v1", model="m", api_key=KEY, config_path=None,
                                  environ={})
    selector = ModelSelector.from_config(config)
    assert KEY not in repr(selector) and "'***'" in repr(selector)
    assert KEY not in repr(config) and KEY not in str(config)
