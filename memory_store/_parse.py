"""Turning the bytes of one memory file into a MemoryDoc, or a one-line reason why not."""

from __future__ import annotations

import datetime
import hashlib
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from memory_store._types import DEFAULT_MAX_BYTES, MEMORY_TYPES, MemoryDoc
from memory_store._errors import MemoryParseError

# libyaml's loader is several times faster; PyYAML builds without it still work.
_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_INT_CHARS = 100  # a longer integer is kept as its text: Python refuses to print ints over 4300 digits


class _YamlLoader(_BaseLoader):  # type: ignore[misc]
    """The safe loader, except that a value Python cannot build (2024-02-30, a 5,000-digit int) stays text."""


def _timestamp_or_text(loader: Any, node: yaml.ScalarNode) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except (ValueError, OverflowError):
        return node.value


def _int_or_text(loader: Any, node: yaml.ScalarNode) -> Any:
    if len(node.value) > _MAX_INT_CHARS:
        return node.value
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:
        return node.value


_YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_or_text)
_YamlLoader.add_constructor("tag:yaml.org,2002:int", _int_or_text)

_FENCE = "---"
_REQUIRED_TEXT_FIELDS = ("name", "description")
_KNOWN_FIELDS = frozenset({"name", "description", "type", "keywords", "usage_scenarios"})
_SCALARS = (str, int, float, bool, datetime.date)  # what a text field may hold; str() of each is O(its text)


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
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
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
    fields = _load_frontmatter(front)
    name, description = (_text_field(fields, key) for key in _REQUIRED_TEXT_FIELDS)
    return MemoryDoc(
        scope=scope,
        path=path,
        abspath=Path(abspath) if abspath is not None else Path(path),
        name=name,
        description=description,
        type=_memory_type(fields),
        keywords=_terms(fields.get("keywords"), "keywords", split_commas=True),
        extra=MappingProxyType({k: v for k, v in fields.items() if k not in _KNOWN_FIELDS}),
        body=body,
        mtime=mtime,
        size=len(data),
        content_hash=hashlib.sha256(data).hexdigest(),
        usage_scenarios=_terms(fields.get("usage_scenarios"), "usage_scenarios", split_commas=False),
    )


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


def _load_frontmatter(front: str) -> dict[str, Any]:
    try:
        _refuse_aliases(front)
        fields = yaml.load(front, Loader=_YamlLoader)  # noqa: S506 - a safe loader
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
    for token in yaml.scan(front, Loader=_YamlLoader):
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
    metadata = fields.get("metadata")
    if value is None and isinstance(metadata, dict):
        # Claude Code 2.1.197 rewrites every memory its Write tool saves as `metadata: {type: ...}`
        value = metadata.get("type")
    if value is None:
        raise MemoryParseError("missing 'type' in frontmatter")
    if not isinstance(value, str):
        raise MemoryParseError(f"'type' must be text, got a {type(value).__name__}")
    kind = value.strip().lower()
    if kind not in MEMORY_TYPES:
        allowed = ", ".join(sorted(MEMORY_TYPES))
        raise MemoryParseError(f"unknown type {value[:40]!r} (expected one of: {allowed})")
    return kind


def _terms(value: Any, key: str, *, split_commas: bool) -> tuple[str, ...]:
    """Normalise to a tuple of distinct non-empty strings; one string is one item (or comma-separated ones)."""
    if value is None:
        return ()
    if isinstance(value, str):
        items: list[Any] = value.split(",") if split_commas else [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise MemoryParseError(f"'{key}' must be a list of strings, got a {type(value).__name__}")
    terms: list[str] = []
    seen: set[str] = set()
    for item in items:
        if item is not None and not isinstance(item, _SCALARS):
            raise MemoryParseError(f"'{key}' must be a list of strings, got a nested value")
        word = " ".join(str(item).split()) if item is not None else ""
        if word and word not in seen:
            seen.add(word)
            terms.append(word)
    return tuple(terms)
