"""Edit JSON text in place: parse it with the span of every value, then splice in only what changes.

Every byte outside a splice is kept as written: key order, spacing, line endings, and number literals
such as ``1e400`` (which a parse and re-dump would turn into ``Infinity``, not JSON). Strict JSON only
(RFC 8259: no comments, no trailing commas, no NaN).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from memory_store import RecallKitError

MAX_DEPTH = 200  # far deeper than any settings file; keeps a hostile one from exhausting the stack
_WHITESPACE = " \t\n\r"
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = ("true", "false", "null")
_DECODER = json.JSONDecoder(strict=True)  # strict: a raw control character in a string is an error
DEFAULT_INDENT = "  "


class JsonTextError(RecallKitError, ValueError):
    """The text is not strict JSON; the message names the line and column."""


@dataclass(slots=True)
class Node:
    """One JSON value and where it is in the text: ``text[start:end]``."""

    start: int
    end: int


@dataclass(slots=True)
class Scalar(Node):
    """A string (``value`` decoded) or a number, true, false or null (``value`` is its literal as written)."""

    value: str
    is_string: bool


@dataclass(slots=True)
class Array(Node):
    """A JSON array and its items."""

    items: list[Node] = field(default_factory=list)

    @property
    def children(self) -> Sequence[Node | Member]:
        """The items, as the splicing helpers see them."""
        return self.items


@dataclass(slots=True)
class Member:
    """One ``"key": value`` of an object; its span runs from the key's quote to the value's end."""

    key: str
    start: int
    value: Node

    @property
    def end(self) -> int:
        """Where the member ends: at its value's end."""
        return self.value.end


@dataclass(slots=True)
class Object(Node):
    """A JSON object and its members, in the order written (duplicate keys kept)."""

    members: list[Member] = field(default_factory=list)

    @property
    def children(self) -> Sequence[Node | Member]:
        """The members, as the splicing helpers see them."""
        return self.members

    def get(self, key: str) -> Node | None:
        """The value of ``key`` as a JSON parser sees it: the last member of that name wins."""
        for member in reversed(self.members):
            if member.key == key:
                return member.value
        return None


@dataclass(frozen=True, slots=True)
class Splice:
    """Replace ``text[start:end]`` with ``new``."""

    start: int
    end: int
    new: str


def parse(text: str) -> Node:
    """The JSON value of ``text`` with its spans; JsonTextError when it is not one strict JSON value."""
    parser = _Parser(text)
    node = parser.value(0)
    parser.skip()
    if parser.pos != len(text):
        raise parser.error("extra data after the JSON value")
    return node


def string_value(node: Node | None) -> str | None:
    """The decoded text of a JSON string node, else None."""
    return node.value if isinstance(node, Scalar) and node.is_string else None


def apply(text: str, splices: Sequence[Splice]) -> str:
    """``text`` with every splice made; splices must not overlap."""
    out = text
    last = len(text) + 1
    for splice in sorted(splices, key=lambda s: (s.start, s.end), reverse=True):
        if splice.end > last:
            raise AssertionError(f"overlapping edits at {splice.start}..{splice.end}")
        out = out[: splice.start] + splice.new + out[splice.end :]
        last = splice.start
    return out


def edit_children(
    text: str, container: Array | Object, removed: set[int], appended: Sequence[Any] = ()
) -> list[Splice]:
    """The splices that drop the children at ``removed`` (with their commas) and add ``appended`` after
    the last child kept, indented like the children around them. For an object, each appended item
    is a ``(key, value)`` pair."""
    children = container.children
    kept = [i for i in range(len(children)) if i not in removed]
    splices: list[Splice] = []
    if not kept:
        inner_start, inner_end = container.start + 1, container.end - 1
        if not appended:
            return [Splice(inner_start, inner_end, "")] if children else []
        base, nl = _line_indent(text, container.start), newline(text)
        if "\n" in text:  # a pretty-printed file: one child per line, one level deeper
            indent = base + indent_unit(text)
            body = ("," + nl + indent).join(_render_child(container, item, indent, True, text) for item in appended)
            return [Splice(inner_start, inner_end, nl + indent + body + nl + base)]
        body = ", ".join(_render_child(container, item, "", False, text) for item in appended)
        return [Splice(inner_start, inner_end, body)]
    last_kept = kept[-1]
    for i in sorted(removed):
        if i < last_kept:  # the child and what separates it from the next
            splices.append(Splice(children[i].start, children[i + 1].start, ""))
        else:  # after the last child kept: what separates it from the one before, and the child
            splices.append(Splice(children[i - 1].end, children[i].end, ""))
    if appended:
        anchor = children[last_kept]
        multiline = _starts_line(text, anchor.start)
        indent = _line_indent(text, anchor.start) if multiline else ""
        separator = "," + newline(text) + indent if multiline else ", "
        new = "".join(separator + _render_child(container, item, indent, multiline, text) for item in appended)
        splices.append(Splice(anchor.end, anchor.end, new))
    return splices


def replace(text: str, node: Node, value: Any) -> Splice:
    """The splice that writes ``value`` where ``node`` is, on one line or indented as the node was."""
    multiline = "\n" in text[node.start : node.end]
    return Splice(node.start, node.end, render(value, _line_indent(text, node.start), multiline, text))


def render(value: Any, indent: str, multiline: bool, text: str) -> str:
    """``value`` as JSON: on one line, or pretty-printed with each line after the first at ``indent``."""
    if not multiline:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, indent=indent_unit(text)).replace("\n", newline(text) + indent)


def indent_unit(text: str) -> str:
    """One level of the file's indentation: the whitespace of its first indented line (two spaces by default)."""
    match = re.search(r"\n([ \t]+)[^ \t\r\n]", text)
    return match.group(1) if match else DEFAULT_INDENT


def newline(text: str) -> str:
    """The file's line ending: CRLF when it has one, else LF."""
    return "\r\n" if "\r\n" in text else "\n"


def _render_child(container: Array | Object, item: Any, indent: str, multiline: bool, text: str) -> str:
    if isinstance(container, Object):
        key, value = item
        return json.dumps(key, ensure_ascii=False) + ": " + render(value, indent, multiline, text)
    return render(item, indent, multiline, text)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _starts_line(text: str, pos: int) -> bool:
    return text[_line_start(text, pos) : pos].strip(" \t") == ""


def _line_indent(text: str, pos: int) -> str:
    """The leading spaces and tabs of the line that ``pos`` is on."""
    start = _line_start(text, pos)
    line = text[start:pos]
    return line[: len(line) - len(line.lstrip(" \t"))]


class _Parser:
    """A recursive-descent parser of strict JSON that records each value's span."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, what: str) -> JsonTextError:
        line = self.text.count("\n", 0, self.pos) + 1
        column = self.pos - _line_start(self.text, self.pos) + 1
        return JsonTextError(f"{what} at line {line} column {column}")

    def skip(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        self.pos = pos

    def value(self, depth: int) -> Node:
        self.skip()
        if depth > MAX_DEPTH:
            raise self.error(f"nested more than {MAX_DEPTH} levels")
        if self.pos >= len(self.text):
            raise self.error("a value expected, the text ended")
        ch = self.text[self.pos]
        if ch == "{":
            return self.object(depth)
        if ch == "[":
            return self.array(depth)
        if ch == '"':
            start = self.pos
            value = self.string()
            return Scalar(start, self.pos, value, True)
        for literal in _LITERALS:
            if self.text.startswith(literal, self.pos):
                start, self.pos = self.pos, self.pos + len(literal)
                return Scalar(start, self.pos, literal, False)
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.error("a value expected")
        self.pos = match.end()
        return Scalar(match.start(), match.end(), match.group(), False)

    def string(self) -> str:
        try:
            value, self.pos = _DECODER.raw_decode(self.text, self.pos)  # at a '"': just the string
        except json.JSONDecodeError as exc:  # unterminated, a bad escape, a control character
            self.pos = exc.pos
            raise self.error(exc.msg) from None
        assert isinstance(value, str)
        return value

    def array(self, depth: int) -> Array:
        node = Array(self.pos, self.pos)
        self.pos += 1
        self.skip()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            node.end = self.pos
            return node
        while True:
            node.items.append(self.value(depth + 1))
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("]", self.pos):
                self.pos += 1
                node.end = self.pos
                return node
            raise self.error("',' or ']' expected")

    def object(self, depth: int) -> Object:
        node = Object(self.pos, self.pos)
        self.pos += 1
        self.skip()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            node.end = self.pos
            return node
        while True:
            self.skip()
            if not self.text.startswith('"', self.pos):
                raise self.error("a key in double quotes expected")
            start = self.pos
            key = self.string()
            self.skip()
            if not self.text.startswith(":", self.pos):
                raise self.error("':' expected")
            self.pos += 1
            node.members.append(Member(key, start, self.value(depth + 1)))
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("}", self.pos):
                self.pos += 1
                node.end = self.pos
                return node
            raise self.error("',' or '}' expected")
