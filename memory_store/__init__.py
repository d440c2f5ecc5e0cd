"""Markdown memory store: parsing, scanning, watching, immutable snapshots."""

from memory_store._errors import MemoryParseError, MemoryStoreError, RecallKitError
from memory_store._types import DEFAULT_MAX_BYTES, MEMORY_TYPES, LoadError, MemoryDoc, Snapshot
from memory_store._parse import parse_memory
from memory_store._store import DEFAULT_DEBOUNCE_MS, MemoryStore
from memory_store._write import atomic_write

__all__ = [
    "DEFAULT_DEBOUNCE_MS",
    "DEFAULT_MAX_BYTES",
    "MEMORY_TYPES",
    "LoadError",
    "MemoryDoc",
    "MemoryParseError",
    "MemoryStoreError",
    "MemoryStore",
    "RecallKitError",
    "Snapshot",
    "atomic_write",
    "parse_memory",
]
