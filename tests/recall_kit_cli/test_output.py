"""The one sanitiser and the JSON writer, on the characters a terminal acts on."""

from __future__ import annotations

import json

import pytest

from recall_kit_cli._output import clean, clean_block, fit, json_text


@pytest.mark.parametrize("raw, shown", [
    ("\x1b[2J", "\\x1b[2J"),
    ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
    ("\x1b]8;;http://x\x1b\\a\x1b]8;;\x1b\\", "\\x1b]8;;http://x\\x1b\\a\\x1b]8;;\\x1b\\"),
    ("a\rb\nc\td", "a\\rb\\nc\\td"),
    ("\x9b31m", "\\x9b31m"),  # 8-bit CSI
    ("evil\u202etxt.md", "evil\\u202etxt.md"),  # right-to-left override
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("line\u2028sep\u2029", "line\\u2028sep\\u2029"),
    ("caf\udce9", "caf\\xe9"),  # an undecodable byte kept by surrogateescape
    ("café 中文 ok", "café 中文 ok"),
])
def test_clean_makes_every_control_visible_and_keeps_printable_text(raw: str, shown: str) -> None:
    assert clean(raw) == shown


def test_clean_block_keeps_lines_and_tabs_but_escapes_the_rest() -> None:
    assert clean_block("a\tb\x1b[2J\nsecond\rline") == "a\tb\\x1b[2J\nsecond\\rline"


def test_fit_counts_wide_characters_and_leaves_short_lines_alone() -> None:
    assert fit("x" * 80, 80) == "x" * 80
    assert fit("x" * 81, 80) == "x" * 79 + "…"
    assert fit("中" * 50, 80) == "中" * 39 + "…"
    assert fit("x" * 300, None) == "x" * 300


def test_json_text_is_valid_utf8_and_round_trips_undecodable_bytes() -> None:
    text = json_text({"path": "caf\udce9.md", "name": "中文\x1b"})
    text.encode("utf-8")  # no lone surrogate left
    assert '"caf\\udce9.md"' in text and "中文" in text and "\\u001b" in text
    assert json.loads(text) == {"path": "caf\udce9.md", "name": "中文\x1b"}


def test_json_text_writes_a_number_that_is_not_finite_as_null_never_nan() -> None:
    text = json_text({"found": float("nan"), "spread": [1.5, float("inf"), -float("inf")], "n": 3})
    assert json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON")) == {
        "found": None, "spread": [1.5, None, None], "n": 3}
