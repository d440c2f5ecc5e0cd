"""Writing one new memory file, shared by `recall-kit add` and the MCP `remember` tool.

The text is built from the fields, validated by the store's own parser before anything touches the
disk, and written under ``<root>/<type>/<slug of name>.md``: atomically, and never over an existing
file unless asked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from memory_store import (
    DEFAULT_MAX_BYTES,
    MEMORY_TYPES,
    MemoryDoc,
    atomic_write,
    format_memory,
    memory_slug,
    new_memory_path,
    parse_memory,
)


@dataclass(frozen=True, slots=True)
class SavedMemory:
    ref: str
    path: Path
    overwritten: bool


slug = memory_slug


def memory_text(
    name: str, description: str, type: str, body: str, keywords: Sequence[str] | None = None
) -> tuple[str, MemoryDoc]:
    """The file's text and the doc the store will read from it; MemoryParseError when it would skip it."""
    text = format_memory(name=name, description=description, type=type, body=body, keywords=keywords or ())
    doc = parse_memory(text, max_bytes=DEFAULT_MAX_BYTES)  # the store's own rules, before any write
    if doc.type not in MEMORY_TYPES:  # parse_memory already refuses these; the folder name relies on it
        raise ValueError(f"unknown type {type!r}")
    return text, doc


def save_memory(
    folder: Path, label: str, text: str, doc: MemoryDoc, *, overwrite: bool, how_to_overwrite: str
) -> SavedMemory:
    """Write ``text`` as ``<folder>/<type>/<slug>.md``; FileExistsError naming ``how_to_overwrite``."""
    rel = new_memory_path(doc.type, doc.name)
    target = folder / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    existed = target.exists()
    if existed and not overwrite:
        raise FileExistsError(f"{label}/{rel} already exists; {how_to_overwrite} to replace it")
    if overwrite:
        atomic_write(target, text)
    else:
        _create_new(target, text, how_to_overwrite)
    return SavedMemory(f"{label}/{rel}", target, existed)


def _create_new(target: Path, text: str, how_to_overwrite: str) -> None:
    """Write the whole file under a hidden name, then link it into place: never replaces a file."""
    temp = target.with_name(f".{target.name}.new")
    atomic_write(temp, text)
    try:
        os.link(temp, target)
    except FileExistsError:
        raise FileExistsError(f"{target.name} appeared meanwhile; {how_to_overwrite} to replace it") from None
    finally:
        temp.unlink(missing_ok=True)
