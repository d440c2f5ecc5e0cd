"""A memory's own `keywords` and `usage_scenarios`: read as lists or strings; a bad value is one
problem line on the doc, never a skipped memory; the work stays bounded whatever the value's size."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memory_store import MemoryStore, parse_memory
from recall_kit import MemoryParseError
from memory_store._parse import (
    MAX_FRONTMATTER_KEYWORD_CHARS,
    MAX_FRONTMATTER_KEYWORDS,
    MAX_FRONTMATTER_SCENARIOS,
)

HEAD = "---\nname: Deploying\ndescription: how ledgerline ships\ntype: project\n"


def parse(front: str, **kw: object):  # type: ignore[no-untyped-def]
    return parse_memory(f"{HEAD}{front}---\nbody\n", scope="s", path="a.md", **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("front", "keywords", "scenarios"),
    [
        ("keywords: deploy, fly.io ,release\n", ("deploy", "fly.io", "release"), ()),
        ("keywords: [deploy, fly.io]\nusage_scenarios: [ship it?, the deploy hangs]\n",
         ("deploy", "fly.io"), ("ship it?", "the deploy hangs")),
        ("keywords:\n  - deploy\n  - release train\nusage_scenarios:\n  - how do I ship to production?\n",
         ("deploy", "release train"), ("how do I ship to production?",)),
        ("usage_scenarios: how do I ship, safely, to production?\n", (), ("how do I ship, safely, to production?",)),
        ("usage_scenarios: |\n  how do I ship?\n  the deploy is stuck\n", (), ("how do I ship?", "the deploy is stuck")),
        ("keywords: [2024, true, ~, '']\n", ("2024", "true"), ()),
        # a plain number or boolean in a list is kept as written, not as YAML 1.1 reads it (3.1, 90, 31, 8, True)
        ("keywords: [3.10, '1:30', 1:30, 0x1F, 010, yes, no, on, 1_000, .5]\n",
         ("3.10", "1:30", "0x1F", "010", "yes", "no", "on", "1_000", ".5"), ()),
        ("usage_scenarios:\n  - 42\n  - Off\n", (), ("42", "Off")),
    ],
)
def test_terms_read_as_a_comma_separated_string_a_flow_list_or_a_block_list(
    front: str, keywords: tuple[str, ...], scenarios: tuple[str, ...]
) -> None:
    doc = parse(front)
    assert (doc.keywords, doc.usage_scenarios, doc.problems) == (keywords, scenarios, ())


@pytest.mark.parametrize(
    ("front", "problem"),
    [
        ("keywords: 42\n", "'keywords' ignored: a list or a string is expected, got a number"),
        ("keywords: {deploy: yes}\n", "'keywords' ignored: a list or a string is expected, got a mapping"),
        ("usage_scenarios: true\n", "'usage_scenarios' ignored: a list or a string is expected, got a boolean"),
        ("keywords: 2024-05-01\n", "'keywords' ignored: a list or a string is expected, got a date"),
        ("keywords: [deploy, {a: 1}, [b]]\n", "'keywords': dropped 2 nested values"),
    ],
)
def test_a_bad_value_is_one_problem_line_and_the_memory_still_loads(front: str, problem: str) -> None:
    doc = parse(front)
    assert doc.problems == (problem,)
    assert doc.name == "Deploying" and doc.body == "body\n"
    assert doc.keywords in ((), ("deploy",))


def test_a_huge_string_and_a_huge_list_are_cut_with_one_line_each_in_bounded_time() -> None:
    huge_string = "x" * 10_000_000  # no file the store reads can hold it: parse_memory is asked directly
    many = ", ".join(f"k{i}" for i in range(100_000))
    started = time.perf_counter()
    doc = parse_memory(
        f"{HEAD}keywords: {many}\nusage_scenarios: ['{huge_string}', ship it]\n---\n", scope="s", path="a.md",
        max_bytes=20_000_000,
    )
    elapsed = time.perf_counter() - started
    assert doc.keywords == tuple(f"k{i}" for i in range(MAX_FRONTMATTER_KEYWORDS))
    assert doc.usage_scenarios == ("ship it",)
    assert doc.problems == (
        f"'keywords': dropped everything past the first {MAX_FRONTMATTER_KEYWORDS}",
        "'usage_scenarios': dropped 1 over 300 characters",
    )
    assert elapsed < 30  # a bound on runaway work (it takes well under a second), not a speed figure


def test_a_list_of_100000_items_keeps_the_first_ones() -> None:
    items = "\n".join(f"  - term {i}" for i in range(100_000))
    doc = parse_memory(f"{HEAD}usage_scenarios:\n{items}\n---\n", scope="s", path="a.md", max_bytes=10_000_000)
    assert len(doc.usage_scenarios) == MAX_FRONTMATTER_SCENARIOS
    assert doc.problems == (f"'usage_scenarios': dropped everything past the first {MAX_FRONTMATTER_SCENARIOS}",)


def test_a_string_cut_at_its_head_never_keeps_the_cut_term() -> None:
    long = "y" * (MAX_FRONTMATTER_KEYWORD_CHARS - 1)
    value = ",".join([long] * 2 + ["z" * 10_000] * 200)  # the head ends inside a 10,000-character item
    doc = parse(f"keywords: '{value}'\n", max_bytes=10_000_000)
    assert doc.keywords == (long,)
    assert doc.problems and doc.problems[0].startswith("'keywords': dropped")


def test_the_store_loads_the_memory_and_validate_names_the_problem(tmp_path: Path) -> None:
    (tmp_path / "deploy.md").write_text(f"{HEAD}keywords: {{a: 1}}\n---\nbody\n")
    (tmp_path / "fine.md").write_text(f"{HEAD}keywords: [deploy]\n---\nbody\n")
    with MemoryStore.open(tmp_path, watch=False) as store:
        snapshot = store.snapshot()
    label = tmp_path.name
    assert sorted(snapshot.docs) == [f"{label}/deploy.md", f"{label}/fine.md"]
    assert snapshot.errors == ()
    assert snapshot.docs[f"{label}/deploy.md"].problems == (
        "'keywords' ignored: a list or a string is expected, got a mapping",)


CLAUDE_CODE_WROTE = (  # a memory as Claude Code 2.1.197 rewrites every file written into its memory folder
    "---\nname: feature-flags-in-ledgerline\ndescription: ledgerline gates unfinished work\nmetadata: \n"
    "  node_type: memory\n  type: project\n  keywords: \n    - kill switch\n    - dark launch\n"
    "  usage_scenarios: \n    - how do I dark launch a feature?\n  originSessionId: 45cb002e\n---\n\nbody\n"
)


def test_type_and_terms_under_metadata_are_read_as_claude_code_writes_them() -> None:
    doc = parse_memory(CLAUDE_CODE_WROTE, scope="s", path="a.md")
    assert (doc.type, doc.keywords, doc.usage_scenarios, doc.problems) == (
        "project", ("kill switch", "dark launch"), ("how do I dark launch a feature?",), ())
    assert doc.extra["metadata"]["originSessionId"] == "45cb002e"  # kept as read


def test_the_top_level_wins_over_metadata_and_a_bad_metadata_value_is_a_problem_line() -> None:
    doc = parse(  # HEAD has a top-level type
        "keywords: [deploy]\nmetadata:\n  type: user\n  keywords: [ignored]\n  usage_scenarios: 7\n")
    assert (doc.type, doc.keywords, doc.usage_scenarios) == ("project", ("deploy",), ())
    assert doc.problems == ("'usage_scenarios' ignored: a list or a string is expected, got a number",)
    with pytest.raises(MemoryParseError, match="unknown type 'diary'"):
        parse_memory("---\nname: n\ndescription: d\nmetadata:\n  type: diary\n---\n")
    with pytest.raises(MemoryParseError, match="missing 'type'"):
        parse_memory("---\nname: n\ndescription: d\nmetadata: [type, user]\n---\n")


def test_one_string_too_long_to_split_says_it_was_cut_by_length() -> None:
    doc = parse_memory(f"{HEAD}keywords: {'x' * 250_000}\n---\n", scope="s", path="a.md", max_bytes=1_000_000)
    assert doc.keywords == ()
    limit = MAX_FRONTMATTER_KEYWORDS * (MAX_FRONTMATTER_KEYWORD_CHARS + 2)
    assert doc.problems == (f"'keywords': dropped everything past its first {limit:,} characters",)


@pytest.mark.parametrize("char", ["\x1b", "\x07", "\x7f", "\x9b", "\ufffe"])
def test_a_control_character_yaml_cannot_read_is_one_problem_line_and_the_memory_still_loads(char: str) -> None:
    # YAML's reader refuses the whole document for one of these ("ReaderError", the memory lost)
    doc = parse(f"keywords: [ansi, bell{char}, 'x{char}y']\n")
    assert doc.keywords == ("ansi", "bell", "xy") and doc.name == "Deploying"
    assert doc.problems == (f"frontmatter: dropped 2 control characters YAML cannot read (the first U+{ord(char):04X}, line 5)",)


def test_frontmatter_that_is_malformed_once_its_control_characters_are_dropped_says_so() -> None:
    with pytest.raises(MemoryParseError, match=r"^malformed frontmatter: .*\(line 5\), once its control characters were dropped$"):
        parse("keywords: [ansi, red\x1b[31m]\n")
