"""Markdown memory store: parsing, scanning, watching, immutable snapshots."""

from memory_store._errors import (
    MemoryExistsError,
    MemoryNotFoundError,
    MemoryParseError,
    MemoryPathError,
    MemoryStoreError,
    RecallKitError,
)
from memory_store._types import DEFAULT_MAX_BYTES, MEMORY_TYPES, DeferredDoc, Enrichment, LoadError, MemoryDoc, Snapshot
from memory_store._parse import parse_memory
from memory_store._format import format_memory, memory_slug, new_memory_path
from memory_store._sidecar import (
    MAX_KEYWORD_CHARS,
    MAX_KEYWORDS,
    MAX_SCENARIO_CHARS,
    MAX_SCENARIOS,
    SIDECAR_PATH,
    EnrichmentEntry,
    clean_terms,
    prune_enrichment,
    read_enrichment,
    sidecar_path,
    update_enrichment,
    write_enrichment,
)
from memory_store._codec import decode_doc, encode_doc
from memory_store._files import MemoryRoot, SavedMemory
from memory_store._store import DEFAULT_DEBOUNCE_MS, MemoryStore
from memory_store._write import atomic_write, file_lock

__all__ = [
    "DEFAULT_DEBOUNCE_MS",
    "DEFAULT_MAX_BYTES",
    "MAX_KEYWORDS",
    "MAX_KEYWORD_CHARS",
    "MAX_SCENARIOS",
    "MAX_SCENARIO_CHARS",
    "MEMORY_TYPES",
    "SIDECAR_PATH",
    "DeferredDoc",
    "Enrichment",
    "EnrichmentEntry",
    "LoadError",
    "MemoryDoc",
    "MemoryExistsError",
    "MemoryNotFoundError",
    "MemoryParseError",
    "MemoryPathError",
    "MemoryRoot",
    "MemoryStoreError",
    "MemoryStore",
    "RecallKitError",
    "SavedMemory",
    "Snapshot",
    "atomic_write",
    "decode_doc",
    "encode_doc",
    "file_lock",
    "format_memory",
    "memory_slug",
    "new_memory_path",
    "clean_terms",
    "parse_memory",
    "prune_enrichment",
    "read_enrichment",
    "sidecar_path",
    "update_enrichment",
    "write_enrichment",
]
