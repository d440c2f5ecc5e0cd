"""The candidate manifest a model reads: one sanitised line per memory, capped in count and bytes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from memory_store import MEMORY_TYPES, MemoryDoc
from recall_kit._text import format_age, one_line
from recall_kit.limits import (
    MAX_DESCRIPTION_CHARS,
    MAX_MANIFEST_BYTES,
    MAX_MANIFEST_DOCS,
    MAX_MANIFEST_KEYWORD_CHARS,
    MAX_MANIFEST_KEYWORDS,
    MAX_MANIFEST_KEYWORDS_BYTES,
    MAX_MANIFEST_SCENARIOS,
    MAX_MANIFEST_SCENARIOS_BYTES,
    MODEL_PROMPT_CHARS,
)

_LINE_CACHE_SIZE = 8192  # lines of recently shown docs, keyed by (ref, content_hash)
_LINE_PARTS: dict[tuple[str, str, object], tuple[str, str, int]] = {}

LINE_PREFIX = "- ref: "
FIELD_SEPARATOR = " | "
QUERY_PREFIX = "Query: "
MANIFEST_HEADING = "Memories"


@dataclass(frozen=True, slots=True)
class Manifest:
    """The text shown to the model and the references it may answer with."""

    text: str
    docs: Mapping[str, MemoryDoc]  # ref -> doc, in manifest order
    omitted: int  # candidates left out by the caps or because their ref cannot be shown safely


def manifest_text(text: str) -> str:
    """Untrusted text as one manifest field: a single printable line with no field separator."""
    return one_line(text.replace("|", "/"))


def _is_showable_ref(ref: str) -> bool:
    # A ref is echoed verbatim, so it cannot be rewritten: one that would break the line is left out.
    return ref.isprintable() and "|" not in ref and ref == ref.strip()


def _line_parts(doc: MemoryDoc) -> tuple[str, str, int]:
    """The line around its age, and their size in bytes; cached, as docs recur across queries."""
    key = (doc.ref, doc.content_hash, doc.enrichment)  # enrichment changes without the file changing
    parts = _LINE_PARTS.get(key)
    if parts is None:
        # Slice before cleaning so a huge description costs no more than a short one.
        description = manifest_text(doc.description[: 2 * MAX_DESCRIPTION_CHARS])[:MAX_DESCRIPTION_CHARS]
        kind = doc.type if doc.type in MEMORY_TYPES else manifest_text(doc.type)
        head = f"{LINE_PREFIX}{doc.ref}{FIELD_SEPARATOR}type: {kind}{FIELD_SEPARATOR}age: "
        tail = f"{FIELD_SEPARATOR}{description or manifest_text(doc.name)}"
        keywords, scenarios = doc.keywords, doc.usage_scenarios
        if doc.enrichment is not None:
            keywords += doc.enrichment.keywords
            scenarios += doc.enrichment.usage_scenarios
        if keywords:
            shown = ", ".join(k[:MAX_MANIFEST_KEYWORD_CHARS] for k in keywords[:MAX_MANIFEST_KEYWORDS])
            tail += f"{FIELD_SEPARATOR}keywords: {_capped(manifest_text(shown), MAX_MANIFEST_KEYWORDS_BYTES)}"
        if scenarios:
            shown = "; ".join(s for s in scenarios[:MAX_MANIFEST_SCENARIOS])
            tail += f"{FIELD_SEPARATOR}scenarios: {_capped(manifest_text(shown), MAX_MANIFEST_SCENARIOS_BYTES)}"
        if len(_LINE_PARTS) >= _LINE_CACHE_SIZE:
            _LINE_PARTS.clear()
        parts = _LINE_PARTS[key] = (head, tail, len(head.encode()) + len(tail.encode()))
    return parts


def clear_line_cache() -> None:
    """Forget every cached line: the next manifest renders each doc's line afresh."""
    _LINE_PARTS.clear()


def _capped(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` of UTF-8, never inside a character."""
    return text.encode()[:max_bytes].decode(errors="ignore").rstrip()


def _priority_order(
    candidates: Sequence[MemoryDoc], preferred: Sequence[MemoryDoc]
) -> list[MemoryDoc]:
    """Preferred docs (those that are candidates) first, then the rest newest first."""
    by_ref: dict[str, MemoryDoc] = {}
    for doc in candidates:
        by_ref.setdefault(doc.ref, doc)
    first = dict.fromkeys(d.ref for d in preferred if d.ref in by_ref)  # ordered, no repeats
    ordered = [by_ref[ref] for ref in first]
    rest = [d for d in by_ref.values() if d.ref not in first]
    rest.sort(key=lambda d: d.mtime, reverse=True)
    return ordered + rest


def build_manifest(
    candidates: Sequence[MemoryDoc],
    preferred: Sequence[MemoryDoc] = (),
    *,
    now: float | None = None,
    max_docs: int = MAX_MANIFEST_DOCS,
    max_bytes: int = MAX_MANIFEST_BYTES,
) -> Manifest:
    """The manifest of ``candidates``: ``preferred`` first, then newest first, within ``max_docs`` and ``max_bytes``."""
    now = time.time() if now is None else now
    ordered = _priority_order(candidates, preferred)
    lines: list[str] = []
    docs: dict[str, MemoryDoc] = {}
    used = 0
    for doc in ordered:
        if len(docs) >= max_docs:
            break
        if not _is_showable_ref(doc.ref):
            continue
        head, tail, size = _line_parts(doc)
        age = format_age(now - doc.mtime)
        size += len(age) + 1  # the age is ASCII; the newline
        if used + size > max_bytes:
            continue  # a shorter line further down may still fit
        lines.append(f"{head}{age}{tail}")
        docs[doc.ref] = doc
        used += size
    return Manifest("\n".join(lines), docs, len(ordered) - len(docs))


def user_message(query: str, manifest: Manifest) -> str:
    """The selector's user message: the query, then the manifest."""
    query = query.strip()[:MODEL_PROMPT_CHARS]
    return (
        f"{QUERY_PREFIX}{manifest_text(query)}\n\n"
        f"{MANIFEST_HEADING} ({len(manifest.docs)}):\n{manifest.text}\n"
    )


def read_user_message(text: str) -> tuple[str, list[str]]:
    """The query and manifest refs back out of a user message (for test servers)."""
    query = ""
    refs: list[str] = []
    for line in text.splitlines():
        if line.startswith(QUERY_PREFIX) and not query:
            query = line[len(QUERY_PREFIX):]
        elif line.startswith(LINE_PREFIX):
            refs.append(line[len(LINE_PREFIX):].split(FIELD_SEPARATOR, 1)[0])
    return query, refs
