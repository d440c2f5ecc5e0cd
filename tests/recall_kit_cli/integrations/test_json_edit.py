"""The settings edit in place: strict JSON in, only our entries changed, and uninstall undoes install."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recall_kit_cli.integrations._json_edit import JsonTextError, parse
from recall_kit_cli.integrations.agent_settings import hook_command, is_our_command, with_our_hooks, without_our_hooks
from recall_kit_cli.integrations.agents import CLAUDE_CODE, HOOK_EVENTS

COMMAND = hook_command(CLAUDE_CODE, ["/home/me/memories"], executable="/opt/venv/bin/recall-kit")
OTHER = hook_command(CLAUDE_CODE, ["/home/me/other"], executable="/opt/venv/bin/recall-kit")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
user_settings = st.dictionaries(st.text(max_size=8).filter(lambda k: k != "hooks"), json_values, max_size=5)
styles = st.sampled_from([None, 2, 4, "\t"])
user_commands = st.sampled_from([
    "/opt/notifier hook claude-code --sound", "prettier -w", "recall-kit hook claude-code --root ~/m",
    "/usr/bin/recall-kit hook claude-code --root relative", "/x/recall-kit hook claude-code --root /m --fast",
])


def _ours(settings: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in settings["hooks"].get(event, []) for h in g["hooks"] if is_our_command(CLAUDE_CODE, h["command"])]


@settings(max_examples=150, deadline=None)
@given(user_settings, styles)
def test_install_then_uninstall_gives_back_the_exact_text(data: dict[str, Any], indent: Any) -> None:
    text = json.dumps(data, indent=indent, ensure_ascii=False) + "\n"
    installed = with_our_hooks(CLAUDE_CODE, text, COMMAND)
    parsed = json.loads(installed)
    assert {k: v for k, v in parsed.items() if k != "hooks"} == data
    assert all(_ours(parsed, event) == [COMMAND] for event in HOOK_EVENTS)
    assert with_our_hooks(CLAUDE_CODE, installed, COMMAND) == installed
    assert without_our_hooks(CLAUDE_CODE, installed) == text
    assert without_our_hooks(CLAUDE_CODE, with_our_hooks(CLAUDE_CODE, installed, OTHER)) == text


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(HOOK_EVENTS), user_commands), min_size=1, max_size=6), styles)
def test_the_users_own_hooks_are_kept_through_install_and_uninstall(hooks: list[tuple[str, str]], indent: Any) -> None:
    table: dict[str, list[Any]] = {}
    for event, command in hooks:
        table.setdefault(event, []).append({"hooks": [{"type": "command", "command": command}]})
    text = json.dumps({"model": "opus", "hooks": table}, indent=indent)
    installed = json.loads(with_our_hooks(CLAUDE_CODE, text, COMMAND))
    for event in HOOK_EVENTS:
        kept = [h["command"] for g in installed["hooks"][event] for h in g["hooks"] if h["command"] != COMMAND]
        assert kept == [command for e, command in hooks if e == event]
        assert _ours(installed, event) == [COMMAND]
    assert without_our_hooks(CLAUDE_CODE, with_our_hooks(CLAUDE_CODE, text, COMMAND)) == text  # (a table the user left empty would not come back)


def test_older_entries_of_ours_are_replaced_in_place_and_duplicates_dropped() -> None:
    old = {"type": "command", "command": OTHER, "timeout": 5}
    text = json.dumps({"hooks": {"Stop": [{"hooks": [old, {"type": "command", "command": "say done"}]},
                                          {"hooks": [old]}]}}, indent=2)
    stop = json.loads(with_our_hooks(CLAUDE_CODE, text, COMMAND))["hooks"]["Stop"]
    assert stop == [{"hooks": [{"type": "command", "command": COMMAND, "timeout": 5},
                               {"type": "command", "command": "say done"}]}]


@pytest.mark.parametrize("command, ours", [
    (COMMAND, True),
    ("recall-kit hook claude-code", True),
    ("/opt/notifier hook claude-code --sound", False),
    ("/opt/venv/bin/recall-kit hook claude-code --root /m --sound", False),
    ("/opt/venv/bin/recall-kit hook claude-code --root relative/m", False),
    ("/opt/venv/bin/recall-kit  hook claude-code", False),  # not as we quote it
    ("echo x; /opt/venv/bin/recall-kit hook claude-code", False),
    ("/opt/venv/bin/recall-kit hook claude-code --root '/m", False),
])
def test_an_entry_is_ours_only_in_the_exact_shape_we_write(command: str, ours: bool) -> None:
    assert is_our_command(CLAUDE_CODE, command) is ours


@pytest.mark.parametrize("text", [
    '{"a": NaN}', '{"a": Infinity}', '{"a": 1,}', '[1 2]', "{'a': 1}", '{"a": 01}', '{"a": 1} x',
    '// c\n{}', '{"a": "\x01"}', '{"a"}', "", "[" * 300 + "]" * 300,
])
def test_only_strict_json_is_accepted(text: str) -> None:
    with pytest.raises(JsonTextError, match="line"):
        parse(text)


def test_numbers_are_kept_as_written() -> None:
    text = '{"a": 1e400, "b": -0.0, "c": 1.50, "d": 123456789012345678901234567890}'
    installed = with_our_hooks(CLAUDE_CODE, text, COMMAND)
    assert installed.startswith(text[:-1]) and without_our_hooks(CLAUDE_CODE, installed) == text
