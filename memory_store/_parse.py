"""Turning the bytes of one memory file into a MemoryDoc, or a one-line reason why not."""

from __future__ import annotations

import datetime
import functools
import hashlib
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

from memory_store._types import DEFAULT_MAX_BYTES, MEMORY_TYPES, MemoryDoc
from memory_store._errors import MemoryParseError

_MAX_INT_CHARS = 100  # a longer integer is kept as its text: Python refuses to print ints over 4300 digits


@functools.cache
def _yaml() -> tuple[Any, type]:
    """PyYAML and our loader, made when the first file is parsed: a query whose memories all come
    from the index cache parses none, and does not import it."""
    import yaml

    def timestamp_or_text(loader: Any, node: yaml.ScalarNode) -> Any:
        try:
            return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
        except (ValueError, OverflowError):
            return node.value

    def int_or_text(loader: Any, node: yaml.ScalarNode) -> Any:
        if len(node.value) > _MAX_INT_CHARS:
            return node.value
        try:
            return yaml.SafeLoader.construct_yaml_int(loader, node)
        except ValueError:
            return node.value

    # libyaml's loader is several times faster; PyYAML builds without it still work.
    base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class YamlLoader(base):  # type: ignore[misc]
        """The safe loader, except that a value Python cannot build (2024-02-30, a 5,000-digit int) stays
        text, and so does a plain number or boolean in a list (keywords: [3.10, yes])."""

    def sequence_as_written(loader: Any, node: yaml.SequenceNode) -> Any:
        # a list's plain numbers and booleans as written: YAML 1.1 would make the keyword 3.10 into 3.1,
        # 1:30 into 90, 0x1F into 31 and yes into True
        items: list[Any] = []
        yield items
        items.extend(
            child.value if _plain(child) and child.tag in _AS_WRITTEN else loader.construct_object(child)
            for child in node.value
        )

    def _plain(node: Any) -> bool:
        return isinstance(node, yaml.ScalarNode) and not node.style  # plain: None, or "" from libyaml

    YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", timestamp_or_text)
    YamlLoader.add_constructor("tag:yaml.org,2002:int", int_or_text)
    YamlLoader.add_constructor("tag:yaml.org,2002:seq", sequence_as_written)
    return yaml, YamlLoader


_AS_WRITTEN = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"})
# What YAML's reader refuses anywhere in a document (C0 controls but tab and newlines, DEL, C1 but NEL,
# U+FFFE/U+FFFF): dropped from the frontmatter with one problem line, so that the memory still loads.
_UNREADABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


_FENCE = "---"
_REQUIRED_TEXT_FIELDS = ("name", "description")
_KNOWN_FIELDS = frozenset({"name", "description", "type", "keywords", "usage_scenarios"})
_DESCRIBING_FIELDS = ("type", "keywords", "usage_scenarios")  # read from a `metadata` mapping when not at the top
_SCALARS = (str, int, float, bool, datetime.date)  # what a text field may hold; str() of each is O(its text)
# The frontmatter's own search terms. The agents are asked for 8 to 15 keywords and 2 or 3 usage
# scenarios; the eval datasets carry at most 7 keywords of at most 21 characters. Far past that is
# not a memory's keywords (100,000 items, a 200 KB "keyword"): dropped with one problem line.
MAX_FRONTMATTER_KEYWORDS = 64
MAX_FRONTMATTER_KEYWORD_CHARS = 100
MAX_FRONTMATTER_SCENARIOS = 16
MAX_FRONTMATTER_SCENARIO_CHARS = 300
_INSPECT_FACTOR = 4  # items looked at per item that can be kept: duplicates and blanks are skipped within it
_OVERFLOW = object()  # stands for the items of a list or string past what is looked at


def parse_memory(
    raw: bytes | str,
    *,
    scope: str = "",
    path: str = "",
    abspath: Path | str | None = None,
    mtime: float = 0.0,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> MemoryDoc:
    """Parse one memory file's content. Raises MemoryParseError with a one-line reason.

    ``raw`` is the file's bytes (a str is encoded as UTF-8 first); the size limit,
    binary check and UTF-8 check apply to those bytes.
    """
    try:
        data = raw.encode("utf-8") if isinstance(raw, str) else raw
    except UnicodeEncodeError as exc:  # a lone surrogate: os.fsdecode's or surrogateescape's, never text
        raise MemoryParseError(f"invalid UTF-8 at character {exc.start} (a lone surrogate)") from None
    if len(data) > max_bytes:
        raise MemoryParseError(f"file is {len(data)} bytes, over the {max_bytes}-byte limit")
    nul = data.find(b"\x00")
    if nul != -1:
        raise MemoryParseError(f"binary content (NUL byte at offset {nul})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryParseError(f"invalid UTF-8 at byte {exc.start}") from None
    front, body = _split_frontmatter(text.removeprefix("\ufeff"))
    problems: list[str] = []  # what the memory loads without, one line each
    try:
        fields = _load_frontmatter(_readable(front, problems))
    except MemoryParseError as exc:
        if not problems:
            raise
        raise MemoryParseError(f"{exc}, once its control characters were dropped") from None
    name, description = (_text_field(fields, key) for key in _REQUIRED_TEXT_FIELDS)
    described = _described(fields)
    return MemoryDoc(
        scope=scope,
        path=path,
        abspath=Path(abspath) if abspath is not None else Path(path),
        name=name,
        description=description,
        type=_memory_type(described),
        keywords=_terms(described.get("keywords"), "keywords", MAX_FRONTMATTER_KEYWORDS, MAX_FRONTMATTER_KEYWORD_CHARS, problems),
        extra=MappingProxyType({k: v for k, v in fields.items() if k not in _KNOWN_FIELDS}),
        body=body,
        mtime=mtime,
        size=len(data),
        content_hash=hashlib.sha256(data).hexdigest(),
        usage_scenarios=_terms(
            described.get("usage_scenarios"), "usage_scenarios", MAX_FRONTMATTER_SCENARIOS, MAX_FRONTMATTER_SCENARIO_CHARS, problems
        ),
        problems=tuple(problems),
    )


def _described(fields: dict[str, Any]) -> dict[str, Any]:
    """``type``, ``keywords`` and ``usage_scenarios`` where the file keeps them: at the top, else in a
    ``metadata`` mapping, where Claude Code (2.1.197) puts every field but name and description of
    each memory written into its folder (it rewrites the file so: ``metadata: {node_type: memory,
    type: project, keywords: [...], ...}``). The mapping stays in ``extra`` as read."""
    metadata = fields.get("metadata")
    if not isinstance(metadata, dict):
        return fields
    nested = {key: metadata[key] for key in _DESCRIBING_FIELDS if isinstance(key, str) and key in metadata}
    return {**nested, **{key: fields[key] for key in _DESCRIBING_FIELDS if key in fields}}


def _split_frontmatter(text: str) -> tuple[str, str]:
    """Return (frontmatter, body); the frontmatter sits between two ``---`` lines at the top."""
    first_end = text.find("\n")
    if first_end == -1 or text[:first_end].rstrip() != _FENCE:
        raise MemoryParseError("missing frontmatter (the file must start with a '---' line)")
    start = first_end + 1
    pos = start
    while pos <= len(text):
        end = text.find("\n", pos)
        line = text[pos:] if end == -1 else text[pos:end]
        if line.rstrip() in (_FENCE, "..."):
            body = "" if end == -1 else text[end + 1 :]
            return text[start:pos], body
        if end == -1:
            break
        pos = end + 1
    raise MemoryParseError("malformed frontmatter: no closing '---' line")


def _readable(front: str, problems: list[str]) -> str:
    """``front`` without the characters YAML cannot read (an ESC, a DEL, a C1 control), one problem line
    naming the first of them if there were any."""
    found = _UNREADABLE.search(front)
    if found is None:
        return front
    readable, count = _UNREADABLE.subn("", front)
    line = front.count("\n", 0, found.start()) + 2  # the file's line: the first is the opening '---'
    problems.append(
        f"frontmatter: dropped {count} control character{'s' if count != 1 else ''} YAML cannot read"
        f" (the first U+{ord(found.group()):04X}, line {line})"
    )
    return readable


def _load_frontmatter(front: str) -> dict[str, Any]:
    yaml, loader = _yaml()
    try:
        _refuse_aliases(front)
        fields = yaml.load(front, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        fields = _plain_key_values(front)
        if fields is None:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or type(exc).__name__
            raise MemoryParseError(f"malformed frontmatter: {problem}{where}") from None
    except MemoryParseError:
        raise
    except Exception as exc:  # RecursionError, MemoryError, a constructor's ValueError: never out of the parser
        raise MemoryParseError(f"malformed frontmatter: {type(exc).__name__}") from None
    if fields is None:
        raise MemoryParseError("empty frontmatter: name, description and type are required")
    if not isinstance(fields, dict):
        raise MemoryParseError(f"malformed frontmatter: expected key: value pairs, got {type(fields).__name__}")
    return {str(key): value for key, value in fields.items()}  # keys are hashable scalars, so str() is small


def _refuse_aliases(front: str) -> None:
    """Refuse anchors and aliases before building anything: nested aliases expand exponentially."""
    if "&" not in front and "*" not in front:
        return  # neither can be written without its sigil; most memories skip the token pass
    yaml, loader = _yaml()
    for token in yaml.scan(front, Loader=loader):
        if isinstance(token, (yaml.AliasToken, yaml.AnchorToken)):
            what = "alias" if isinstance(token, yaml.AliasToken) else "anchor"
            line = token.start_mark.line + 2 if token.start_mark is not None else 0
            raise MemoryParseError(f"YAML {what}s are not allowed in frontmatter (line {line})")


# A value that opens YAML structure ([, {, quotes, block scalars, anchors, tags) was meant as YAML.
_PLAIN_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+([^\[{\"'|>&*!].*))?")


def _plain_key_values(front: str) -> dict[str, Any] | None:
    """Read frontmatter that is only ``key: value`` lines, where YAML itself gave up.

    Hand- and model-written memories often carry an unquoted ``: `` in a description
    (``description: Fixed it: the cache was stale``), which strict YAML rejects. When
    every line is a flat ``key: value`` pair, the first ``: `` splits key from value;
    anything else (nesting, lists, indentation) is still malformed.
    """
    fields: dict[str, Any] = {}
    for line in front.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _PLAIN_LINE.fullmatch(line.rstrip())
        if match is None or match.group(1) in fields:
            return None
        fields[match.group(1)] = (match.group(2) or "").strip() or None
    return fields or None


def _text_field(fields: dict[str, Any], key: str) -> str:
    value = fields.get(key)
    if value is not None and not isinstance(value, _SCALARS):
        raise MemoryParseError(f"'{key}' must be text, got a {type(value).__name__}")
    text = "" if value is None else " ".join(str(value).split())
    if not text:
        raise MemoryParseError(f"missing '{key}' in frontmatter")
    return text


def _memory_type(fields: dict[str, Any]) -> str:
    value = fields.get("type")
    if value is None:
        raise MemoryParseError("missing 'type' in frontmatter")
    if not isinstance(value, str):
        raise MemoryParseError(f"'type' must be text, got a {type(value).__name__}")
    kind = value.strip().lower()
    if kind not in MEMORY_TYPES:
        allowed = ", ".join(sorted(MEMORY_TYPES))
        raise MemoryParseError(f"unknown type {value[:40]!r} (expected one of: {allowed})")
    return kind


def _terms(value: Any, key: str, max_items: int, max_chars: int, problems: list[str]) -> tuple[str, ...]:
    """A terms field as distinct non-empty strings: a list, or one string (``keywords``: split at
    commas; ``usage_scenarios``: one per line). What cannot be read adds one line to ``problems``
    and the memory still loads: a value of another kind is ignored, items past ``max_items``, items
    over ``max_chars`` and nested values are dropped. The work is bounded by the limits."""
    if value is None:
        return ()
    if isinstance(value, str):
        # a string can split into at most this many items that fit: the rest is never looked at
        head = value[: max_items * (max_chars + 2)]
        items: list[Any] = head.split(",") if key == "keywords" else head.splitlines()
        if len(head) < len(value) and items:
            items[-1] = _OVERFLOW  # cut by the head: never kept as a shorter term
    elif isinstance(value, (list, tuple)):
        items = list(value[: max_items * _INSPECT_FACTOR])
        if len(value) > len(items):
            items.append(_OVERFLOW)
    else:
        problems.append(f"'{key}' ignored: a list or a string is expected, got a {_kind(value)}")
        return ()
    terms: list[str] = []
    seen: set[str] = set()
    nested = too_long = past = 0
    for item in items:
        if item is _OVERFLOW or len(terms) >= max_items:
            past += 1
            continue
        if item is not None and not isinstance(item, _SCALARS):
            nested += 1
            continue
        word = " ".join(str(item)[: max_chars * _INSPECT_FACTOR].split()) if item is not None else ""
        if len(word) > max_chars:
            too_long += 1
        elif word and word not in seen:
            seen.add(word)
            terms.append(word)
    dropped = [
        f"{nested} nested value{'s' if nested != 1 else ''}" if nested else "",
        f"{too_long} over {max_chars} characters" if too_long else "",
        _past(value, len(terms), max_items, max_chars) if past else "",
    ]
    if any(dropped):
        problems.append(f"'{key}': dropped {', '.join(d for d in dropped if d)}")
    return tuple(terms)


def _past(value: object, kept: int, max_items: int, max_chars: int) -> str:
    # what a cut dropped: the items past the limit, or the rest of a string too long to hold that many
    if isinstance(value, str) and kept < max_items:
        return f"everything past its first {max_items * (max_chars + 2):,} characters"
    return f"everything past the first {max_items}"


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, datetime.date):
        return "date"
    return type(value).__name__
