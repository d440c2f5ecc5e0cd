"""Usage errors in one line, help that fits a screen with an example, shell completion."""

from __future__ import annotations

import pytest
from cli_support import EXAMPLES, RunCli, assert_one_line_error, clean_environ

COMMANDS = [
    (), ("list",), ("query",), ("watch",), ("add",), ("show",), ("rm",), ("validate",), ("stats",), ("config",),
    ("config", "trust"), ("config", "untrust"),
    ("bench",), ("bench", "delivery"), ("bench", "latency"), ("serve",), ("hook",), ("hook", "claude-code"),
    ("hook", "qwen-code"), ("hook", "status"), ("hook", "log"),
    ("hook", "install"), ("hook", "uninstall"), ("mcp",), ("enrich",), ("learned",), ("learned", "clear"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "recall-kit")
def test_help_fits_24_lines_and_shows_an_example(run_cli: RunCli, command: tuple[str, ...]) -> None:
    result = run_cli(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) <= 24, result.stdout
    assert "Example" in result.stdout, result.stdout


@pytest.mark.parametrize("args, words", [
    (("query", "how", "do", "we", "deploy", "--root", str(EXAMPLES)), ("quote it", "recall-kit query --help")),
    (("list", "--bogus"), ("No such option", "--bogus")),
    (("query",), ("Missing argument", "TEXT")),
    (("nonsense",), ("No such command", "nonsense")),
    (("add", "--type", "user"), ("Missing option", "--name")),
    (("query", "x", "--model-timeout", "soon"), ("--model-timeout", "soon")),
])
def test_usage_errors_are_one_line_with_exit_2(run_cli: RunCli, args: tuple[str, ...], words: tuple[str, ...]) -> None:
    assert_one_line_error(run_cli(*args), *words)


def test_shell_completion_is_clicks_own(run_cli: RunCli) -> None:
    script = run_cli(env=clean_environ(_RECALL_KIT_COMPLETE="bash_source"))
    assert script.returncode == 0 and "_recall_kit_completion()" in script.stdout
    words = run_cli(env=clean_environ(_RECALL_KIT_COMPLETE="bash_complete", COMP_WORDS="recall-kit va", COMP_CWORD="1"))
    assert words.stdout.split() == ["plain,validate"]


def test_shell_completion_reaches_the_options_of_a_command_loaded_when_used(run_cli: RunCli) -> None:
    words = run_cli(env=clean_environ(_RECALL_KIT_COMPLETE="bash_complete", COMP_WORDS="recall-kit query x --fast", COMP_CWORD="3"))
    assert words.stdout.split() == ["plain,--fast-only"]
    nested = run_cli(env=clean_environ(_RECALL_KIT_COMPLETE="bash_complete", COMP_WORDS="recall-kit bench re", COMP_CWORD="2"))
    assert nested.stdout.split() == ["plain,replay"]
