"""Default roots, `recall-kit config`, unknown keys and errors that name their real source."""

from __future__ import annotations

import os
from pathlib import Path

from cli_support import EXAMPLES, RunCli, assert_one_line_error, clean_environ, json_out

API_KEY = "sk-test-5be04a7c19d2e836"


def _refs(result: object) -> set[str]:
    return {d["ref"] for d in json_out(result)["docs"]}


def test_roots_come_from_the_environment_variable_then_the_config_file(run_cli: RunCli, tmp_path: Path) -> None:
    project = tmp_path / "project"
    other = project / "other"  # inside the project file's folder, as an untrusted file's roots must be
    (other / "user").mkdir(parents=True)
    (other / "user" / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\n")
    env = clean_environ(RECALL_KIT_ROOTS=os.pathsep.join([str(EXAMPLES), str(other)]))
    from_env = _refs(run_cli("list", "--json", env=env))
    assert "other/user/a.md" in from_env and len(from_env) == 28
    (project / "recall-kit.toml").write_text('roots = ["other"]\n')
    assert _refs(run_cli("list", "--json", cwd=project)) == {"other/user/a.md"}
    assert len(_refs(run_cli("list", "--json", cwd=project, env=env))) == 28  # the variable wins
    assert _refs(run_cli("list", "--json", "--root", str(EXAMPLES), cwd=project, env=env)) == from_env - {
        "other/user/a.md"}  # and --root wins over both


def test_no_root_anywhere_is_one_line_naming_every_way_to_give_one(run_cli: RunCli) -> None:
    for command in ("list", "validate", "stats", "watch"):
        assert_one_line_error(run_cli(command), "no memory root", "--root", "RECALL_KIT_ROOTS", "recall-kit.toml")
    assert_one_line_error(run_cli("query", "deploy ledgerline"), "no memory root")


def test_roots_of_the_wrong_shape_in_the_config_file_are_one_line(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "cwd" / "recall-kit.toml").write_text('roots = "examples"\n')
    assert_one_line_error(run_cli("list"), "recall-kit.toml", "roots must be a non-empty list")


def test_config_shows_every_setting_with_its_source_and_never_the_key(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "cwd" / "notes").mkdir()
    (tmp_path / "cwd" / "recall-kit.toml").write_text('roots = ["notes"]\n[selector]\nmodel = "from-file"\ntimeout = 12\n')
    env = clean_environ(RECALL_KIT_BASE_URL="http://user:hunter2@127.0.0.1:9/v1", RECALL_KIT_API_KEY=API_KEY)
    text = run_cli("config", env=env)
    data = json_out(run_cli("config", "--json", env=env))
    assert text.returncode == 0 and API_KEY not in text.stdout + str(data) and "hunter2" not in text.stdout + str(data)
    assert data["base_url"]["source"] == "environment variable RECALL_KIT_BASE_URL"
    project = tmp_path / "cwd" / "recall-kit.toml"
    assert data["model"] == {"value": "from-file", "source": f"project file {project} (untrusted) [selector] model"}
    assert data["timeout"]["value"] == "12" and data["api_key"]["value"] == "***"
    assert data["roots"] == {"value": str(tmp_path / "cwd" / "notes"), "source": f"project file {project} (untrusted) roots"}
    assert data["config_file"] == {"value": str(project), "source": "project file, untrusted"}
    assert data["cache_dir"]["source"] == "environment variable RECALL_KIT_CACHE_DIR"
    lines = text.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [
        "config_file", "user_config", "roots", "base_url", "model", "api_key", "timeout", "learn", "cache_dir",
        "idle_timeout", "trail", "trail_prompts", "agent_keywords", "daemon_enrich", "enrich_calls_per_minute"]
    assert data["trail"] == {"value": "on", "source": "default"} and data["trail_prompts"]["value"] == "off"
    assert data["agent_keywords"] == data["daemon_enrich"] == {"value": "on", "source": "default"}
    assert lines[4].startswith("model         from-file  (") and "[selector] model" in lines[4]


def test_config_with_nothing_set_says_where_a_value_would_come_from(run_cli: RunCli) -> None:
    data = json_out(run_cli("config", "--json"))
    assert data["config_file"]["value"] is None and data["roots"]["value"] is None
    assert data["model"] == {"value": None, "source": "not set"} and data["timeout"]["source"] == "default"


def test_an_unknown_key_is_warned_about_in_one_line_with_a_suggestion(run_cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "cwd" / "recall-kit.toml").write_text('rots = []\n[selector]\nmodle = "x"\n')
    result = run_cli("config")
    assert result.returncode == 0
    warnings = result.stderr.splitlines()
    assert len(warnings) == 2
    assert "unknown key [selector] 'modle' ignored; did you mean [selector] model?" in warnings[1]
    assert "unknown key 'rots' at the top level ignored; did you mean roots?" in warnings[0]
    assert all(line.startswith("recall-kit: warning: ") for line in warnings)


def test_a_bad_value_names_its_real_source(run_cli: RunCli) -> None:
    args = ("query", "x", "--root", str(EXAMPLES), "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    bad_env = run_cli(*args, env=clean_environ(RECALL_KIT_TIMEOUT="abc"))
    assert_one_line_error(bad_env, "environment variable RECALL_KIT_TIMEOUT", "number of seconds")
    assert "recall-kit.toml" not in bad_env.stderr
    bad_arg = run_cli(*args, "--model-timeout", "-1")
    assert_one_line_error(bad_arg, "--model-timeout", "positive")
    assert "recall-kit.toml" not in bad_arg.stderr


def test_a_base_url_with_a_bad_port_is_one_line_naming_it(run_cli: RunCli, dataset: Path) -> None:
    bad = "http://127.0.0.1:99999/v1"
    words = (f"{bad} is not a usable base URL", "port 99999 is out of range (1-65535)")
    assert_one_line_error(run_cli("query", "x", "--root", str(EXAMPLES), "--base-url", bad, "--model", "m"), *words)
    assert_one_line_error(run_cli("enrich", "--root", str(EXAMPLES), "--base-url", bad, "--model", "m"), *words)
    assert_one_line_error(run_cli("bench", "delivery", str(dataset), "--base-url", bad, "--model", "m"), *words)
    masked = run_cli("query", "x", "--root", str(EXAMPLES), "--model", "m",
                     env=clean_environ(RECALL_KIT_BASE_URL="http://me:hunter2@127.0.0.1:99999/v1"))
    assert_one_line_error(masked, "RECALL_KIT_BASE_URL", "http://***@127.0.0.1:99999/v1", "port 99999")
    assert "hunter2" not in masked.stderr


def test_a_transport_failure_at_request_time_reads_as_its_problem(run_cli: RunCli) -> None:
    env = {k: v for k, v in clean_environ().items() if k.lower() not in ("no_proxy", "https_proxy", "all_proxy")}
    env["HTTP_PROXY"] = "http://127.0.0.1:99999"  # httpx's own settings: no URL check of ours sees it
    result = run_cli("query", "deploy ledgerline", "--root", str(EXAMPLES), "--base-url", "http://127.0.0.1:9/v1",
                     "--model", "m", env=env)
    assert result.returncode == 0, result.stderr
    assert "model unreachable (OverflowError: connect(): port must be 0-65535.): showing the fast result" in (
        result.stdout.splitlines())
    assert "ExceptionGroup" not in result.stdout + result.stderr and result.stderr == ""


def test_config_with_a_malformed_key_shows_every_other_setting_and_flags_the_key(run_cli: RunCli) -> None:
    env = clean_environ(RECALL_KIT_BASE_URL="http://127.0.0.1:9/v1", RECALL_KIT_MODEL="m",
                        RECALL_KIT_API_KEY="sk-5be04a7c\u200b19d2e836", RECALL_KIT_ROOTS=str(EXAMPLES))
    text = run_cli("config", env=env)
    assert text.returncode == 0, text.stderr
    rows = {line.split()[0]: line for line in text.stdout.splitlines()}
    assert set(rows) == {"config_file", "user_config", "roots", "base_url", "model", "api_key", "timeout", "learn",
                         "cache_dir", "idle_timeout", "trail", "trail_prompts", "agent_keywords", "daemon_enrich", "enrich_calls_per_minute"}
    assert rows["base_url"].startswith("base_url      http://127.0.0.1:9/v1  (environment variable RECALL_KIT_BASE_URL)")
    assert rows["model"].startswith("model         m  (") and str(EXAMPLES) in rows["roots"]
    assert rows["api_key"].startswith("api_key       invalid  (environment variable RECALL_KIT_API_KEY: ")
    assert "U+200B" in rows["api_key"] and "5be04a7c" not in text.stdout
    data = json_out(run_cli("config", "--json", env=env))
    assert data["api_key"]["value"] is None and "U+200B" in data["api_key"]["problem"]
    assert data["model"] == {"value": "m", "source": "environment variable RECALL_KIT_MODEL"}
    assert all("problem" not in data[name] for name in data if name != "api_key")
    assert_one_line_error(run_cli("query", "x", "--root", str(EXAMPLES), env=env), "RECALL_KIT_API_KEY", "U+200B")


def test_config_trust_and_untrust_say_what_they_did_in_one_line(run_cli: RunCli, tmp_path: Path) -> None:
    env = clean_environ(RECALL_KIT_CONFIG=str(tmp_path / "user" / "recall-kit.toml"))
    assert_one_line_error(run_cli("config", "trust", env=env), "recall-kit.toml", "cannot read")
    project = tmp_path / "cwd" / "recall-kit.toml"
    project.write_text("[selector\n")
    assert_one_line_error(run_cli("config", "trust", env=env), "not valid TOML")
    assert not (tmp_path / "user").exists()
    project.write_text('[selector]\nbase_url = "http://u:hunter2@127.0.0.1:9/v1"\n')
    trusted = run_cli("config", "trust", env=env)
    assert trusted.returncode == 0 and "hunter2" not in trusted.stdout
    assert "its base_url http://***@127.0.0.1:9/v1 may receive your API key" in trusted.stdout
    assert run_cli("config", "untrust", env=env).stdout == f"untrusted {project}\n"
    assert run_cli("config", "untrust", str(project.parent), env=env).stdout == f"{project} was not trusted\n"
