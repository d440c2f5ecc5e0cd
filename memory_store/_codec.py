"""A MemoryDoc's fields as bytes and back: the layout a cache keeps a doc in, owned beside the doc itself.

The blob is a marshal of the fields in a fixed order, without the enrichment (the store attaches
fresh enrichment to every doc it hands out). A new MemoryDoc field is added here and nowhere else.
"""

from __future__ import annotations

import marshal
from pathlib import Path
from types import MappingProxyType
from typing import Any

from memory_store._types import MemoryDoc

_NO_EXTRA: MappingProxyType[str, Any] = MappingProxyType({})  # read-only, so every doc without extras shares it


def encode_doc(doc: MemoryDoc) -> bytes:
    """The doc's fields (all but its enrichment) as one blob; ValueError when a frontmatter value
    cannot be kept this way (a date, say)."""
    return marshal.dumps((
        doc.scope, doc.path, str(doc.abspath), doc.name, doc.description, doc.type, tuple(doc.keywords),
        dict(doc.extra), doc.body, doc.mtime, doc.size, doc.content_hash, tuple(doc.usage_scenarios),
    ))


def decode_doc(blob: bytes | memoryview) -> MemoryDoc:
    """The doc ``encode_doc`` made ``blob`` from, without enrichment."""
    scope, path, abspath, name, description, type_, keywords, extra, body, mtime, size, content_hash, scenarios = (
        marshal.loads(blob)
    )
    return MemoryDoc(
        scope=scope, path=path, abspath=Path(abspath), name=name, description=description, type=type_,
        keywords=tuple(keywords), extra=MappingProxyType(extra) if extra else _NO_EXTRA, body=body, mtime=mtime,
        size=size, content_hash=content_hash, usage_scenarios=tuple(scenarios),
    )
