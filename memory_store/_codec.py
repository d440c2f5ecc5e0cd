"""A MemoryDoc's fields as bytes and back: the layout a cache keeps a doc in, owned beside the doc itself.

The blob is a marshal of the fields in a fixed order, without the enrichment and the learned keys
(the store attaches fresh ones to every doc it hands out). A new MemoryDoc field is added here and nowhere else.
A blob is read back only into a doc whose every field has the type and shape the parser gives it:
anything else is a ValueError, never a doc that breaks whoever reads it later.
"""

from __future__ import annotations

import marshal
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

from memory_store._types import MEMORY_TYPES, MemoryDoc

_NO_EXTRA: MappingProxyType[str, Any] = MappingProxyType({})  # read-only, so every doc without extras shares it
_FIELDS = 14
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def encode_doc(doc: MemoryDoc) -> bytes:
    """The doc's fields (all but its enrichment and learned keys) as one blob; ValueError when a frontmatter value
    cannot be kept this way (a date, say)."""
    return marshal.dumps((
        doc.scope, doc.path, str(doc.abspath), doc.name, doc.description, doc.type, tuple(doc.keywords),
        dict(doc.extra), doc.body, doc.mtime, doc.size, doc.content_hash, tuple(doc.usage_scenarios),
        tuple(doc.problems),
    ))


def decode_doc(blob: bytes | memoryview) -> MemoryDoc:
    """The doc ``encode_doc`` made ``blob`` from, without enrichment or learned keys; ValueError, naming the field,
    when ``blob`` is not such a doc (damaged, or written by something else)."""
    try:
        fields = marshal.loads(blob)
    except (EOFError, ValueError, TypeError):
        raise ValueError("not an encoded memory") from None
    if not isinstance(fields, tuple) or len(fields) != _FIELDS:
        raise ValueError("not an encoded memory")
    (scope, path, abspath, name, description, type_, keywords, extra, body, mtime, size, content_hash, scenarios,
     problems) = fields
    for field, value in (("scope", scope), ("path", path), ("abspath", abspath), ("name", name),
                         ("description", description), ("body", body)):
        if not isinstance(value, str):
            raise ValueError(f"'{field}' is a {type(value).__name__}, not text")
    if type_ not in MEMORY_TYPES:  # also refuses anything that is not a str
        raise ValueError("'type' is not a memory type")
    _check_terms("keywords", keywords)
    _check_terms("usage_scenarios", scenarios)
    _check_terms("problems", problems)
    if not isinstance(extra, dict) or not all(isinstance(key, str) for key in extra):
        raise ValueError("'extra' is not a mapping of field names")
    if not isinstance(mtime, (int, float)) or isinstance(mtime, bool):
        raise ValueError("'mtime' is not a number")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError("'size' is not a byte count")
    if not isinstance(content_hash, str) or not _SHA256_HEX.fullmatch(content_hash):
        raise ValueError("'content_hash' is not a SHA-256")
    return MemoryDoc(
        scope=scope, path=path, abspath=Path(abspath), name=name, description=description, type=type_,
        keywords=tuple(keywords), extra=MappingProxyType(extra) if extra else _NO_EXTRA, body=body, mtime=mtime,
        size=size, content_hash=content_hash, usage_scenarios=tuple(scenarios), problems=tuple(problems),
    )


def _check_terms(field: str, value: object) -> None:
    if not isinstance(value, (tuple, list)) or not all(isinstance(term, str) for term in value):
        raise ValueError(f"'{field}' is not a list of text")
