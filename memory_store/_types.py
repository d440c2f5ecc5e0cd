"""The values a store hands out: documents, load errors and immutable snapshots."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

MEMORY_TYPES = frozenset({"user", "feedback", "project", "reference"})
INDEX_FILE_NAME = "MEMORY.md"  # the index of a memory folder, not a memory itself
DEFAULT_MAX_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Enrichment:
    """Search terms a model wrote for one version of a memory, read from the root's sidecar, never the file."""

    keywords: tuple[str, ...] = ()
    usage_scenarios: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryDoc:
    """One parsed memory file. Identified by ``ref`` = ``scope/path``."""

    scope: str  # label of the root the file lives under
    path: str  # POSIX path relative to that root, e.g. "projects/atlas/db.md"
    abspath: Path
    name: str
    description: str
    type: str
    keywords: tuple[str, ...]
    extra: Mapping[str, Any]  # unknown frontmatter fields, kept as read
    body: str
    mtime: float
    size: int
    content_hash: str  # sha256 hex of the raw bytes
    usage_scenarios: tuple[str, ...] = ()  # example requests, from the frontmatter
    enrichment: Enrichment | None = None  # the sidecar's entry for exactly these bytes, if any

    @property
    def ref(self) -> str:
        """Stable, unique reference: the scope label and the relative path."""
        return f"{self.scope}/{self.path}"


@dataclass(frozen=True, slots=True)
class LoadError:
    """A file that was skipped, with a one-line reason."""

    scope: str
    path: str  # relative to the root when known, else absolute
    reason: str

    @property
    def ref(self) -> str:
        return f"{self.scope}/{self.path}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An immutable view of the store. Readers hold one; updates build the next.

    ``changed`` and ``removed`` are the refs that differ from the previous
    version (for version 1 every doc is in ``changed``).
    """

    version: int
    docs: Mapping[str, MemoryDoc]  # ref -> doc, read-only
    errors: tuple[LoadError, ...]
    changed: frozenset[str] = field(default_factory=frozenset)
    removed: frozenset[str] = field(default_factory=frozenset)

    @staticmethod
    def build(
        version: int,
        docs: Mapping[str, MemoryDoc],
        errors: tuple[LoadError, ...],
        changed: frozenset[str] = frozenset(),
        removed: frozenset[str] = frozenset(),
    ) -> "Snapshot":
        return Snapshot(version, MappingProxyType(dict(docs)), errors, changed, removed)
