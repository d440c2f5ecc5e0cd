"""Hostile frontmatter: alias bombs, values Python cannot build, and fuzzed bytes never escape the parser."""

from __future__ import annotations

import contextlib
import datetime
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import alias_bomb, fingerprint, memory, write

from memory_store import MemoryParseError, MemoryStore, MemoryStoreError, parse_memory


_PARSE_IN_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # a regression fails fast instead of eating the machine
from memory_store import MemoryParseError, parse_memory
try:
    parse_memory(sys.stdin.buffer.read())
except MemoryParseError as exc:
    print(exc)
else:
    print("parsed")
"""


@pytest.mark.parametrize("where", ["type", "unknown field"])
def test_alias_bomb_is_refused_with_a_one_line_reason(where: str) -> None:
    text = alias_bomb("type" if where == "type" else "extra")
    assert len(text.encode()) < 450
    try:  # a child process: an expanding bomb must not hang or exhaust the test run
        result = subprocess.run(
            [sys.executable, "-c", _PARSE_IN_CHILD], input=text.encode(), capture_output=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("parsing a 400-byte alias bomb did not return")
    assert result.returncode == 0, result.stderr.decode()[-300:]
    assert result.stdout.decode().strip() == "YAML anchors are not allowed in frontmatter (line 4)"


@pytest.mark.parametrize(
    "front",
    ["a: &x 1\nb: *x\n", "<<: {a: 1}\nb: &y [1]\n", "k: !!str &z v\n"],
)
def test_any_anchor_or_alias_is_refused(front: str) -> None:
    with pytest.raises(MemoryParseError, match=r"YAML (anchor|alias)s are not allowed"):
        parse_memory(f"---\nname: n\ndescription: d\ntype: user\n{front}---\n")


def test_alias_like_text_inside_values_is_still_text() -> None:
    doc = parse_memory('---\nname: see *this* & that\ndescription: "a *b &c"\ntype: user\n---\n')
    assert (doc.name, doc.description) == ("see *this* & that", "a *b &c")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("created: 2024-02-30", "2024-02-30"),
        ("created: 2024-13-01 10:00:00", "2024-13-01 10:00:00"),
        ("big: " + "9" * 5000, "9" * 5000),
        ("hex: 0x" + "f" * 200, "0x" + "f" * 200),
        ("created: 2024-02-29", datetime.date(2024, 2, 29)),
        ("small: 12", 12),
    ],
)
def test_values_python_cannot_build_are_kept_as_their_text(line: str, expected: object) -> None:
    doc = parse_memory(f"---\nname: n\ndescription: d\ntype: user\n{line}\n---\n")
    assert list(doc.extra.values()) == [expected]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("type: " + "7" * 5000, "unknown type"),
        ("type: [user]", "'type' must be text"),
        ("type: 2024-02-30", "unknown type '2024-02-30'"),
        ("type: !!binary aGVsbG8=", "'type' must be text, got a bytes"),
    ],
)
def test_invalid_known_values_are_one_line_parse_errors(line: str, reason: str) -> None:
    with pytest.raises(MemoryParseError, match=reason) as info:
        parse_memory(f"---\nname: n\ndescription: d\n{line}\n---\n")
    assert "\n" not in str(info.value) and len(str(info.value)) < 200


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("keywords: [!!set {a: null}]", "'keywords': dropped 1 nested value"),
        ("usage_scenarios: {a: 1}", "'usage_scenarios' ignored: a list or a string is expected, got a mapping"),
        ("keywords: !!binary aGVsbG8=", "'keywords' ignored: a list or a string is expected, got a bytes"),
    ],
)
def test_invalid_terms_are_one_problem_line_and_the_memory_loads(line: str, problem: str) -> None:
    doc = parse_memory(f"---\nname: n\ndescription: d\ntype: user\n{line}\n---\n")
    assert doc.problems == (problem,) and doc.keywords == () and doc.usage_scenarios == ()


def test_huge_number_as_name_is_text_not_a_crash() -> None:
    doc = parse_memory("---\nname: " + "1" * 5000 + "\ndescription: d\ntype: user\n---\n")
    assert doc.name == "1" * 5000


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """Bound one fuzzed parse: a hang becomes a failure instead of a stuck suite."""

    def _raise(*_: object) -> None:
        raise TimeoutError(f"parse_memory did not return within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_HOSTILE_PIECES = [
    "&a [x, x]", "*a", "!!binary aGk=", "!!set {a, b}", "!!python/object:os.system ls", "2024-02-30",
    "9" * 4400, "0x" + "f" * 300, "[[[[[[[[", "{a: {b: {c: [1, 2]}}}", "|\n  block", ">-\n  folded",
    "? [a, b]\n: c", "<<: {a: 1}", "'unterminated", "\"\\x00\\ud800\"", "!!timestamp 99999-99-99",
    ".nan", "-.inf", "~", "yes", "\t", "---", "...", "%YAML 1.1", "- a\n- b", "\u202e\u200b", "\x85",
]
_field = st.sampled_from(["name", "description", "type", "keywords", "usage_scenarios", "x", "<<", "? a"])
_value = st.one_of(st.sampled_from(_HOSTILE_PIECES), st.text(max_size=40))


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.tuples(_field, _value), max_size=8),
    raw_tail=st.binary(max_size=64),
    as_bytes=st.booleans(),
)
def test_fuzzed_frontmatter_only_ever_raises_parse_errors(
    lines: list[tuple[str, str]], raw_tail: bytes, as_bytes: bool
) -> None:
    front = "".join(f"{key}: {value}\n" for key, value in lines)
    data = ("---\n" + front + "---\nbody\n").encode("utf-8", "surrogatepass")
    if as_bytes:
        data = b"---\n" + raw_tail + b"\n" + data[4:]
    try:
        with bounded(10):
            doc = parse_memory(data)
    except MemoryParseError as exc:
        assert "\n" not in str(exc)
    else:
        assert doc.type in {"user", "feedback", "project", "reference"}
        assert all(isinstance(k, str) for k in doc.keywords + doc.usage_scenarios)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes_only_ever_raise_parse_errors(data: bytes) -> None:
    try:
        with bounded(10):
            parse_memory(b"---\n" + data)
    except MemoryParseError as exc:
        assert "\n" not in str(exc)


def _hostile_tree(root: Path) -> None:
    write(root / "good-1.md", memory(name="Good one"))
    write(root / "sub" / "good-2.md", memory(name="Good two"))
    write(root / "bomb.md", alias_bomb("extra"))
    write(root / "date.md", memory(extra="created: 2024-02-30\n"))
    write(root / "bigint-type.md", memory(type="5" * 5000))


def test_hostile_files_never_stop_a_scan_and_good_ones_all_load(root: Path) -> None:
    _hostile_tree(root)
    with MemoryStore.open(root, watch=False) as store:
        snapshot = store.snapshot()
    assert set(snapshot.docs) == {"mem/good-1.md", "mem/sub/good-2.md", "mem/date.md"}
    assert snapshot.docs["mem/date.md"].extra["created"] == "2024-02-30"
    reasons = {e.path: e.reason for e in snapshot.errors}
    assert reasons["bomb.md"] == "YAML anchors are not allowed in frontmatter (line 4)"
    assert reasons["bigint-type.md"].startswith("unknown type '5555")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1, 1e300, "50", True])
def test_a_debounce_window_that_cannot_work_is_refused_by_the_store_itself(tmp_path: Path, bad: object) -> None:
    with pytest.raises(MemoryStoreError, match="^debounce_ms must be"):
        MemoryStore.open(tmp_path, debounce_ms=bad)  # type: ignore[arg-type]
