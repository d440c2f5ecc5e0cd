"""Markdown memory store: parsing, scanning, watching, immutable snapshots, and every read and
write of a memory file, confined to its root.

Each name loads on first use, with only the module that defines it (and what that one imports):
``from memory_store import RecallKitError`` loads the error classes alone, ``open_private`` the
private-path helpers (the Claude Code hook uses both on every prompt), ``parse_memory`` the parser
without the scanner or the watcher.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_store._errors import MemoryExistsError as MemoryExistsError
    from memory_store._errors import MemoryNotFoundError as MemoryNotFoundError
    from memory_store._errors import MemoryParseError as MemoryParseError
    from memory_store._errors import MemoryPathError as MemoryPathError
    from memory_store._errors import MemoryStoreError as MemoryStoreError
    from memory_store._errors import RecallKitError as RecallKitError
    from memory_store._errors import StoreTimeoutError as StoreTimeoutError
    from memory_store._errors import UnsafePathError as UnsafePathError
    from memory_store._types import DEFAULT_MAX_BYTES as DEFAULT_MAX_BYTES
    from memory_store._types import DeferredDoc as DeferredDoc
    from memory_store._types import Enrichment as Enrichment
    from memory_store._types import MEMORY_TYPES as MEMORY_TYPES
    from memory_store._types import MemoryDoc as MemoryDoc
    from memory_store._types import SkippedFile as SkippedFile
    from memory_store._types import Snapshot as Snapshot
    from memory_store._parse import parse_memory as parse_memory
    from memory_store._format import format_memory as format_memory
    from memory_store._format import memory_slug as memory_slug
    from memory_store._format import new_memory_path as new_memory_path
    from memory_store._root import MemoryRoot as MemoryRoot
    from memory_store._root import SavedMemory as SavedMemory
    from memory_store._names import given_ref as given_ref
    from memory_store._names import shown_ref as shown_ref
    from memory_store._index_file import INDEX_MAX_BYTES as INDEX_MAX_BYTES
    from memory_store._index_file import IndexFile as IndexFile
    from memory_store._store import root_labels as root_labels
    from memory_store._store import DEFAULT_DEBOUNCE_MS as DEFAULT_DEBOUNCE_MS
    from memory_store._store import MAX_DEBOUNCE_MS as MAX_DEBOUNCE_MS
    from memory_store._store import debounce_refusal as debounce_refusal
    from memory_store._store import MemoryStore as MemoryStore
    from memory_store._scan import MAX_FOLDER_DEPTH as MAX_FOLDER_DEPTH
    from memory_store._root_rule import broad_root_refusal as broad_root_refusal
    from memory_store._scan import MAX_ROOT_ENTRIES as MAX_ROOT_ENTRIES
    from memory_store._scan import count_entries as count_entries
    from memory_store._sidecar import EnrichmentEntry as EnrichmentEntry
    from memory_store._sidecar import MAX_KEYWORDS as MAX_KEYWORDS
    from memory_store._sidecar import MAX_KEYWORD_CHARS as MAX_KEYWORD_CHARS
    from memory_store._sidecar import MAX_SCENARIOS as MAX_SCENARIOS
    from memory_store._sidecar import MAX_SCENARIO_CHARS as MAX_SCENARIO_CHARS
    from memory_store._sidecar import SIDECAR_PATH as SIDECAR_PATH
    from memory_store._terms import clean_terms as clean_terms
    from memory_store._sidecar import prune_enrichment as prune_enrichment
    from memory_store._sidecar import read_enrichment as read_enrichment
    from memory_store._sidecar import sidecar_path as sidecar_path
    from memory_store._sidecar import update_enrichment as update_enrichment
    from memory_store._sidecar import write_enrichment as write_enrichment
    from memory_store._types import Learned as Learned
    from memory_store._learned_format import LEARNED_PATH as LEARNED_PATH
    from memory_store._learned_format import LearnedEntry as LearnedEntry
    from memory_store._learned_format import LearnedTerm as LearnedTerm
    from memory_store._learned_format import LearningUpdate as LearningUpdate
    from memory_store._learned_format import MAX_LEARNED_KEYS as MAX_LEARNED_KEYS
    from memory_store._learned_format import MAX_LEARNED_TERMS as MAX_LEARNED_TERMS
    from memory_store._learned_format import MAX_LEARNED_TERM_CHARS as MAX_LEARNED_TERM_CHARS
    from memory_store._learned_format import MAX_SUPPRESSORS as MAX_SUPPRESSORS
    from memory_store._learned_format import clean_term as clean_term
    from memory_store._learned_format import releases as releases
    from memory_store._codec import decode_doc as decode_doc
    from memory_store._codec import encode_doc as encode_doc
    from memory_store._write import atomic_write as atomic_write
    from memory_store._private import PRIVATE_FILE_MODE as PRIVATE_FILE_MODE
    from memory_store._private import PRIVATE_FOLDER_MODE as PRIVATE_FOLDER_MODE
    from memory_store._private import open_private as open_private
    from memory_store._private import read_private as read_private
    from memory_store._private import private_folder as private_folder
    from memory_store._private import private_lock as private_lock
    from memory_store._write import file_lock as file_lock
    from memory_store._json import JsonNestingError as JsonNestingError
    from memory_store._json import parse_json as parse_json
    from memory_store._json import parse_json_prefix as parse_json_prefix
    from memory_store._json import recorded_time as recorded_time
    from memory_store._public import fixup_module_metadata as fixup_module_metadata

# Each public name and the module that defines it (the imports above say the same for type checkers).
_EXPORTS: dict[str, str] = {
    "MemoryExistsError": "memory_store._errors",
    "MemoryNotFoundError": "memory_store._errors",
    "MemoryParseError": "memory_store._errors",
    "MemoryPathError": "memory_store._errors",
    "MemoryStoreError": "memory_store._errors",
    "RecallKitError": "memory_store._errors",
    "StoreTimeoutError": "memory_store._errors",
    "UnsafePathError": "memory_store._errors",
    "DEFAULT_MAX_BYTES": "memory_store._types",
    "DeferredDoc": "memory_store._types",
    "Enrichment": "memory_store._types",
    "MEMORY_TYPES": "memory_store._types",
    "MemoryDoc": "memory_store._types",
    "SkippedFile": "memory_store._types",
    "Snapshot": "memory_store._types",
    "parse_memory": "memory_store._parse",
    "format_memory": "memory_store._format",
    "memory_slug": "memory_store._format",
    "new_memory_path": "memory_store._format",
    "MemoryRoot": "memory_store._root",
    "given_ref": "memory_store._names",
    "shown_ref": "memory_store._names",
    "SavedMemory": "memory_store._root",
    "INDEX_MAX_BYTES": "memory_store._index_file",
    "IndexFile": "memory_store._index_file",
    "root_labels": "memory_store._store",
    "DEFAULT_DEBOUNCE_MS": "memory_store._store",
    "MAX_DEBOUNCE_MS": "memory_store._store",
    "debounce_refusal": "memory_store._store",
    "MemoryStore": "memory_store._store",
    "MAX_FOLDER_DEPTH": "memory_store._scan",
    "MAX_ROOT_ENTRIES": "memory_store._scan",
    "broad_root_refusal": "memory_store._root_rule",
    "count_entries": "memory_store._scan",
    "EnrichmentEntry": "memory_store._sidecar",
    "MAX_KEYWORDS": "memory_store._sidecar",
    "MAX_KEYWORD_CHARS": "memory_store._sidecar",
    "MAX_SCENARIOS": "memory_store._sidecar",
    "MAX_SCENARIO_CHARS": "memory_store._sidecar",
    "SIDECAR_PATH": "memory_store._sidecar",
    "clean_terms": "memory_store._terms",
    "prune_enrichment": "memory_store._sidecar",
    "read_enrichment": "memory_store._sidecar",
    "sidecar_path": "memory_store._sidecar",
    "update_enrichment": "memory_store._sidecar",
    "write_enrichment": "memory_store._sidecar",
    "Learned": "memory_store._types",
    "LEARNED_PATH": "memory_store._learned_format",
    "LearnedEntry": "memory_store._learned_format",
    "LearnedTerm": "memory_store._learned_format",
    "LearningUpdate": "memory_store._learned_format",
    "MAX_LEARNED_KEYS": "memory_store._learned_format",
    "MAX_LEARNED_TERMS": "memory_store._learned_format",
    "MAX_LEARNED_TERM_CHARS": "memory_store._learned_format",
    "MAX_SUPPRESSORS": "memory_store._learned_format",
    "clean_term": "memory_store._learned_format",
    "releases": "memory_store._learned_format",
    "JsonNestingError": "memory_store._json",
    "parse_json": "memory_store._json",
    "parse_json_prefix": "memory_store._json",
    "recorded_time": "memory_store._json",
    "decode_doc": "memory_store._codec",
    "encode_doc": "memory_store._codec",
    "atomic_write": "memory_store._write",
    "PRIVATE_FILE_MODE": "memory_store._private",
    "PRIVATE_FOLDER_MODE": "memory_store._private",
    "open_private": "memory_store._private",
    "read_private": "memory_store._private",
    "private_folder": "memory_store._private",
    "private_lock": "memory_store._private",
    "file_lock": "memory_store._write",
    "fixup_module_metadata": "memory_store._public",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memory_store' has no attribute {name!r}")
    _bind(module)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


def _bind(module: str) -> None:
    """Import ``module`` alone and bind the public names it defines, each shown as ``memory_store.Name``."""
    from memory_store._public import fixup_module_metadata

    names = [name for name, home in _EXPORTS.items() if home == module]
    loaded, namespace = importlib.import_module(module), globals()
    for name in names:
        namespace[name] = getattr(loaded, name)
    fixup_module_metadata(__name__, namespace, names)
