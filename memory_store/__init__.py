"""Markdown memory store: parsing, scanning, watching, immutable snapshots."""

from memory_store._types import MEMORY_TYPES, LoadError, MemoryDoc, Snapshot

__all__ = ["MEMORY_TYPES", "LoadError", "MemoryDoc", "Snapshot"]
