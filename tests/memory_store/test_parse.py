"""parse_memory: the content rules, independent of the file system."""

from __future__ import annotations

import datetime

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_store import MEMORY_TYPES, parse_memory
from recall_kit import MemoryParseError


def parse(text: str | bytes, **kw: object):
    return parse_memory(text, scope="s", path="a.md", **kw)  # type: ignore[arg-type]


def test_valid_memory_has_all_fields() -> None:
    text = (
        "---\nname: Editor\ndescription: Uses  neovim\ntype: user\nkeywords: [vim, editor]\n"
        "since: 2024-01-02\n---\nPrefers lua config.\n"
    )
    doc = parse(text)
    assert (doc.name, doc.description, doc.type) == ("Editor", "Uses neovim", "user")
    assert doc.keywords == ("vim", "editor")
    assert doc.body == "Prefers lua config.\n"
    assert doc.ref == "s/a.md"
    assert len(doc.content_hash) == 64 and doc.size == len(text.encode())


def test_the_type_claude_code_writes_under_metadata_is_read() -> None:
    # what Claude Code 2.1.197's Write tool leaves in its memory folder, byte for byte
    text = (
        "---\nname: deploy-flow\ndescription: The app deploys from main\nmetadata: \n  node_type: memory\n"
        "  type: project\n  originSessionId: 289bcc88-8fb2-4c1b-a8c6-6708f4126dc4\n---\n\nbody\n"
    )
    doc = parse(text)
    assert (doc.name, doc.type) == ("deploy-flow", "project") and doc.extra["metadata"]["node_type"] == "memory"
    with pytest.raises(MemoryParseError, match="unknown type"):
        parse(text.replace("type: project", "type: gossip"))
    assert parse(text.replace("description:", "type: user\ndescription:")).type == "user"  # its own field first


def test_unknown_frontmatter_fields_are_kept_as_read() -> None:
    doc = parse("---\nname: n\ndescription: d\ntype: project\nowner: priya\nsince: 2024-01-02\n---\n")
    assert dict(doc.extra) == {"owner": "priya", "since": datetime.date(2024, 1, 2)}
    with pytest.raises(TypeError):
        doc.extra["owner"] = "x"  # type: ignore[index]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("[a, b, a]", ("a", "b")),
        ("'db, postgres ,, sql'", ("db", "postgres", "sql")),
        ("[1, 2.5, ' spaced  out ']", ("1", "2.5", "spaced out")),
        ("[]", ()),
        ("", ()),
    ],
)
def test_keywords_normalised_to_a_tuple_of_strings(raw: str, expected: tuple[str, ...]) -> None:
    doc = parse(f"---\nname: n\ndescription: d\ntype: user\nkeywords: {raw}\n---\n")
    assert doc.keywords == expected


@pytest.mark.parametrize("kind", sorted(MEMORY_TYPES))
def test_every_memory_type_is_accepted(kind: str) -> None:
    assert parse(f"---\nname: n\ndescription: d\ntype: {kind}\n---\n").type == kind


def test_crlf_line_endings_and_bom_are_accepted() -> None:
    doc = parse("\ufeff---\r\nname: n\r\ndescription: d\r\ntype: user\r\n---\r\nbody\r\n")
    assert (doc.name, doc.body) == ("n", "body\r\n")


def test_unquoted_colon_in_a_flat_field_is_read_as_plain_text() -> None:
    doc = parse("---\nname: Fix\ndescription: Fixed it: the cache was stale\ntype: project\n---\nb\n")
    assert doc.description == "Fixed it: the cache was stale"


def test_unquoted_colon_beside_nested_yaml_is_still_malformed() -> None:
    with pytest.raises(MemoryParseError, match="malformed frontmatter"):
        parse("---\nname: n\ndescription: a: b\ntype: user\nkeywords:\n  - x\n---\n")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("just a body\n", "missing frontmatter"),
        ("", "missing frontmatter"),
        ("---\nname: n\ndescription: d\ntype: user\n", "no closing '---'"),
        ("---\nname: [unclosed\ndescription: d\ntype: user\n---\n", "malformed frontmatter"),
        ("---\n- a\n- b\n---\n", "expected key: value pairs"),
        ("---\n---\nbody\n", "empty frontmatter"),
        ("---\nname: n\ndescription: d\ntype: diary\n---\n", "unknown type 'diary'"),
        ("---\nname: n\ndescription: d\n---\n", "missing 'type'"),
        ("---\ndescription: d\ntype: user\n---\n", "missing 'name'"),
        ("---\nname: n\ntype: user\n---\n", "missing 'description'"),
        ("---\nname: n\ndescription: '  '\ntype: user\n---\n", "missing 'description'"),
        ("---\nname: {a: 1}\ndescription: d\ntype: user\n---\n", "'name' must be text"),
    ],
)
def test_bad_content_raises_a_one_line_reason(text: str, reason: str) -> None:
    with pytest.raises(MemoryParseError, match=reason) as info:
        parse(text)
    assert "\n" not in str(info.value)


def test_invalid_utf8_is_reported_with_its_offset() -> None:
    with pytest.raises(MemoryParseError, match="invalid UTF-8 at byte 26"):
        parse(b"---\nname: n\ndescription: d\xc3\x28\ntype: user\n---\n")


def test_nul_bytes_mean_binary_content() -> None:
    with pytest.raises(MemoryParseError, match="binary content"):
        parse(b"---\nname: n\ndescription: d\ntype: user\n---\n\x00\x01\x02")


def test_content_over_the_size_limit_is_refused() -> None:
    text = "---\nname: n\ndescription: d\ntype: user\n---\n" + "x" * 200
    with pytest.raises(MemoryParseError, match="over the 100-byte limit"):
        parse(text, max_bytes=100)
    assert parse(text, max_bytes=1000).size == len(text)


_line = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="\ufeff\x85"),
    min_size=1,
    max_size=40,
).filter(lambda s: s.strip())


@settings(max_examples=150, deadline=None)
@given(
    name=_line,
    description=_line,
    kind=st.sampled_from(sorted(MEMORY_TYPES)),
    keywords=st.lists(_line, max_size=5),
    extra=st.dictionaries(st.from_regex(r"x_[a-z]{1,8}", fullmatch=True), _line, max_size=3),
    body=st.text(max_size=200).filter(lambda s: "\x00" not in s),
)
def test_any_yaml_written_frontmatter_parses_back(
    name: str, description: str, kind: str, keywords: list[str], extra: dict[str, str], body: str
) -> None:
    fields = {"name": name, "description": description, "type": kind, "keywords": keywords, **extra}
    text = "---\n" + yaml.safe_dump(fields, allow_unicode=True) + "---\n" + body
    doc = parse(text)
    assert doc.name == " ".join(name.split()) and doc.description == " ".join(description.split())
    assert doc.type == kind
    assert doc.keywords == tuple(dict.fromkeys(" ".join(k.split()) for k in keywords))
    assert dict(doc.extra) == extra
    assert doc.body == body
