"""Markdown memory store: parsing, scanning, watching, immutable snapshots."""

# The plain value types come first: the modules below import recall_kit's errors,
# and recall_kit imports these types back from here while it initialises.
from memory_store._types import DEFAULT_MAX_BYTES, MEMORY_TYPES, LoadError, MemoryDoc, Snapshot  # isort: skip

from memory_store._parse import parse_memory
from memory_store._store import DEFAULT_DEBOUNCE_MS, MemoryStore
from memory_store._write import atomic_write

__all__ = [
    "DEFAULT_DEBOUNCE_MS",
    "DEFAULT_MAX_BYTES",
    "MEMORY_TYPES",
    "LoadError",
    "MemoryDoc",
    "MemoryStore",
    "Snapshot",
    "atomic_write",
    "parse_memory",
]
