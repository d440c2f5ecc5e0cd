"""Edit JSON text in place: parse it with the span of every value, then splice in only what changes.

Every byte outside a splice is kept as written: key order, spacing, line endings, comments, and
number literals such as ``1e400`` (which a parse and re-dump would turn into ``Infinity``, not JSON).
Strict JSON (RFC 8259: no trailing commas, no NaN), and with ``comments`` what Qwen Code reads too:
``//`` and ``/* */`` comments between tokens and a leading byte-order mark (its reader strips those with
strip-json-comments, then calls JSON.parse). An edit never removes a comment outside what it replaces.
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
    commas: list[int] = field(default_factory=list)  # where the comma after each item but the last is

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
    commas: list[int] = field(default_factory=list)  # where the comma after each member but the last is

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


def parse(text: str, *, comments: bool = False) -> Node:
    """The JSON value of ``text`` with its spans; JsonTextError when it is not one strict JSON value
    (``comments``: with comments and a leading byte-order mark allowed, as Qwen Code reads its settings)."""
    parser = _Parser(text, comments)
    if comments and text.startswith("\ufeff"):
        parser.pos = 1
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
    is a ``(key, value)`` pair. A comment between the children stays where it is."""
    if holds_comments(text, container):
        return _edit_around_comments(text, container, removed, appended)
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


def holds_comments(text: str, container: Array | Object) -> bool:
    """Whether a comment stands between the container's brackets and its children (text between
    tokens is whitespace, commas and comments only, so a slash there starts one)."""
    edges = [container.start + 1, *(p for child in container.children for p in (child.start, child.end)), container.end - 1]
    return any("/" in text[start:end] for start, end in zip(edges[::2], edges[1::2]))


def _edit_around_comments(
    text: str, container: Array | Object, removed: set[int], appended: Sequence[Any]
) -> list[Splice]:
    """``edit_children`` where comments stand between the children: each removed child goes with one
    comma (and with its lines, when it has them to itself); what is added comes after the last child
    kept and the comments on its line, or before the closing bracket. No comment is cut."""
    children, commas = container.children, container.commas
    kept = [i for i in range(len(children)) if i not in removed]
    cut_commas = {commas[j] for j in range(len(children) - 1) if j in removed or (kept and j == kept[-1])}
    reused = commas[kept[-1]] if appended and kept and kept[-1] < len(commas) else None  # the last kept's comma
    cut_commas.discard(reused)
    cuts = [(comma, comma + 1) for comma in cut_commas]
    runs: list[list[int]] = []  # removed children next to each other, no comment between: cut as one
    for i in sorted(removed):
        if runs and runs[-1][-1] == i - 1 and "/" not in text[children[i - 1].end : children[i].start]:
            runs[-1].append(i)
        else:
            runs.append([i])
    cuts += [_cut_span(text, children[run[0]].start, children[run[-1]].end, cut_commas) for run in runs]
    splices = [Splice(start, end, "") for start, end in _merged(cuts)]
    if not appended:
        return splices
    nl, multiline = newline(text), "\n" in text
    if kept:
        anchor = children[kept[-1]]
        line_start = _starts_line(text, anchor.start)
        indent = _line_indent(text, anchor.start) if line_start else ""
        items = [_render_child(container, item, indent, line_start, text) for item in appended]
        after = anchor.end if reused is None else reused + 1
        end = _line_end_after_comments(text, after) if line_start else None
        if end is None:  # one line: right after the child
            return splices + [Splice(anchor.end, anchor.end, "".join(", " + item for item in items))]
        new = "".join(("," if n else "") + nl + indent + item for n, item in enumerate(items))
        if reused is None and end == anchor.end:
            return splices + [Splice(end, end, "," + new)]
        if reused is None:  # the comma right after the child, before the comments on its line
            splices.append(Splice(anchor.end, anchor.end, ","))
        return splices + [Splice(end, end, new)]
    closing = container.end - 1
    base = _line_indent(text, container.start)
    indent = base + indent_unit(text) if multiline else ""
    body = ("," + nl + indent if multiline else ", ").join(
        _render_child(container, item, indent, multiline, text) for item in appended
    )
    if multiline and _starts_line(text, closing):  # before the closing bracket's own line
        at = _line_start(text, closing)
        return splices + [Splice(at, at, indent + body + nl)]
    if multiline:
        return splices + [Splice(closing, closing, nl + indent + body + nl + base)]
    spaced = text[closing - 1] in " \t"
    return splices + [Splice(closing, closing, f"{body} " if spaced else f" {body}")]


def _cut_span(text: str, start: int, end: int, cut_commas: set[int]) -> tuple[int, int]:
    """The span to cut for a child at ``text[start:end]`` with its comma (when that is cut): its whole
    lines when nothing else is on them, else the child and the spaces an insertion put beside it."""
    line_start = _line_start(text, start)
    after = _past_spaces(text, end)
    comma_after = after in cut_commas
    if comma_after:
        after = _past_spaces(text, after + 1)
    if not text[line_start:start].strip(" \t"):
        for ending in ("\r\n", "\n"):
            if text.startswith(ending, after):
                return line_start, after + len(ending)
    before = start
    while before > line_start and text[before - 1] in " \t":
        before -= 1
    if before - 1 in cut_commas:  # the comma before it goes too: the child was the last
        return before - 1, after if comma_after else end
    if comma_after or before == start:
        return start, after if comma_after else end
    return (start, after) if after > end else (before, end)  # one of the spaces around it


def _past_spaces(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


def _line_end_after_comments(text: str, pos: int) -> int | None:
    """Where the line goes on after ``pos`` past spaces and comments (a block comment may run over lines),
    before its line ending; None when something else follows on it."""
    while True:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if text.startswith("//", pos):
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            return end - 1 if text[end - 1 : end] == "\r" else end
        if text.startswith("/*", pos):
            end = text.find("*/", pos + 2)
            if end < 0:
                return None
            pos = end + 2
            continue
        if pos >= len(text) or text[pos] in "\r\n":
            return pos
        return None


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` with those that overlap or touch made one."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


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

    def __init__(self, text: str, comments: bool = False) -> None:
        self.text = text
        self.pos = 0
        self.comments = comments

    def error(self, what: str) -> JsonTextError:
        line = self.text.count("\n", 0, self.pos) + 1
        column = self.pos - _line_start(self.text, self.pos) + 1
        return JsonTextError(f"{what} at line {line} column {column}")

    def skip(self) -> None:
        """Past whitespace (and comments, when they are allowed: one left open runs to the end, as
        strip-json-comments takes it)."""
        text, pos = self.text, self.pos
        while pos < len(text):
            if text[pos] in _WHITESPACE:
                pos += 1
            elif self.comments and text.startswith("//", pos):
                end = text.find("\n", pos)
                pos = len(text) if end < 0 else end
            elif self.comments and text.startswith("/*", pos):
                end = text.find("*/", pos + 2)
                pos = len(text) if end < 0 else end + 2
            else:
                break
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
                node.commas.append(self.pos)
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
                node.commas.append(self.pos)
                self.pos += 1
                continue
            if self.text.startswith("}", self.pos):
                self.pos += 1
                node.end = self.pos
                return node
            raise self.error("',' or '}' expected")
