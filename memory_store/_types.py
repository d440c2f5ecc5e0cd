"""The values a store hands out: documents, load errors and immutable snapshots."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, KeysView, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, Union

MEMORY_TYPES = frozenset({"user", "feedback", "project", "reference"})
INDEX_FILE_NAME = "MEMORY.md"  # the index of a memory folder, not a memory itself
DEFAULT_MAX_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Enrichment:
    """Search terms a model wrote for one version of a memory, read from the root's sidecar, never the file."""

    keywords: tuple[str, ...] = ()
    usage_scenarios: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Learned:
    """What the model's refined selections taught about one memory, read from the root's learned file, never the memory."""

    keys: tuple[str, ...] = ()  # the prompts' words (as the fast stage reads them), most used first
    suppressors: tuple[frozenset[str], ...] = ()  # each a prompt's term set the model said no to


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
    learned: Learned | None = None  # the learned file's entry for this path (it survives edits), if any
    problems: tuple[str, ...] = ()  # what the file holds that the doc was read without, one line each (`validate`)

    @property
    def ref(self) -> str:
        """Stable, unique reference: the scope label and the relative path."""
        return f"{self.scope}/{self.path}"


Source = TypeVar("Source")
_BUILD_LOCK = threading.RLock()  # one object per deferred doc; reentrant, so a build may load another


class DeferredDoc(Generic[Source]):
    """A memory a caller can build without reading its file (from its own cache), built on first access.

    ``build(source)`` must return the doc parsed from exactly the bytes the store listed; the
    store attaches fresh enrichment and learned keys itself, so what ``build`` attaches is replaced. ``content_hash``
    lets the store match the sidecar without building the doc. When ``build`` raises, or returns a
    doc of another file or other bytes, the store reads the file again instead: a bad cache entry
    costs one read, never a broken recall.
    """

    __slots__ = ("content_hash", "enrichment", "learned", "_build", "_source", "_doc", "_listing")

    def __init__(
        self,
        content_hash: str,
        build: Callable[[Source], MemoryDoc],
        source: Source,
        enrichment: Enrichment | None = None,
        learned: Learned | None = None,
    ) -> None:
        self.content_hash = content_hash
        self.enrichment = enrichment
        self.learned = learned
        self._build = build
        self._source = source
        self._doc: MemoryDoc | None = None
        self._listing: Listing | None = None  # set by the store's scan: what the doc must be, and how to read it

    @property
    def built(self) -> bool:
        """Whether the doc has been built (by ``load()``) yet."""
        return self._doc is not None

    def load(self) -> MemoryDoc:
        """The doc, built once."""
        doc = self._doc
        if doc is None:
            with _BUILD_LOCK:
                doc = self._doc
                if doc is None:
                    doc = self._built()
                    enrichment = self.enrichment if doc.content_hash == self.content_hash else None
                    if doc.enrichment != enrichment or doc.learned != self.learned:
                        doc = dataclasses.replace(doc, enrichment=enrichment, learned=self.learned)
                    self._doc = doc
        return doc

    def with_enrichment(self, enrichment: Enrichment | None) -> DeferredDoc[Source]:
        """The same doc, still deferred, with other enrichment."""
        return self.with_attached(enrichment, self.learned)

    def with_attached(self, enrichment: Enrichment | None, learned: Learned | None) -> DeferredDoc[Source]:
        """The same doc, still deferred, with other enrichment and learned keys."""
        copy = DeferredDoc(self.content_hash, self._build, self._source, enrichment, learned)
        copy._listing = self._listing
        return copy

    def _listed(self, listing: Listing) -> None:
        """Bind the file the store listed this doc for (the scan's, once, before anyone reads the doc)."""
        self._listing = listing

    def _built(self) -> MemoryDoc:
        listing = self._listing
        try:
            doc = self._build(self._source)
        except Exception as exc:  # whatever a caller's cache holds, it never escapes to a reader
            if listing is None:
                raise
            return listing.reread(f"{type(exc).__name__}: {exc}")
        if listing is None or listing.matches(doc, self.content_hash):
            return doc
        return listing.reread("it holds another file or other bytes")


class Listing:
    """The file a deferred doc stands for, as the scan listed it, and the store's own read of it."""

    __slots__ = ("scope", "path", "abspath", "_reread")

    def __init__(self, scope: str, path: str, abspath: str, reread: Callable[[str, str], MemoryDoc]) -> None:
        self.scope = scope
        self.path = path
        self.abspath = abspath
        self._reread = reread

    def matches(self, doc: object, content_hash: str) -> bool:
        """Whether ``doc`` is a doc of this file with the listed bytes."""
        return (
            isinstance(doc, MemoryDoc) and doc.content_hash == content_hash and doc.scope == self.scope
            and doc.path == self.path and str(doc.abspath) == self.abspath
        )

    def reread(self, problem: str) -> MemoryDoc:
        """The doc read from the file itself, the cached copy being unusable (``problem`` says why)."""
        return self._reread(self.path, problem)


StoredDoc = Union[MemoryDoc, DeferredDoc[Any]]


class Docs(Mapping[str, MemoryDoc]):
    """A snapshot's read-only ref -> doc mapping; a deferred doc is built when it is first looked at."""

    __slots__ = ("_stored",)

    def __init__(self, stored: dict[str, StoredDoc]) -> None:
        self._stored = stored  # never changed after this

    def __getitem__(self, ref: str) -> MemoryDoc:
        stored = self._stored[ref]
        return stored.load() if isinstance(stored, DeferredDoc) else stored

    def __len__(self) -> int:
        return len(self._stored)

    def __iter__(self) -> Iterator[str]:
        return iter(self._stored)

    def __contains__(self, ref: object) -> bool:
        return ref in self._stored

    def keys(self) -> KeysView[str]:
        return self._stored.keys()  # the dict's own view: set operations at C speed

    def __repr__(self) -> str:
        return f"<Docs: {len(self._stored)} memories>"

    def stored(self, ref: str) -> StoredDoc:
        """The doc as held, deferred or built (KeyError when absent)."""
        return self._stored[ref]


@dataclass(frozen=True, slots=True)
class SkippedFile:
    """A file that was skipped, with a one-line reason."""

    scope: str
    path: str  # relative to the root when known, else absolute
    reason: str

    @property
    def ref(self) -> str:
        """``scope/path``, as a MemoryDoc's ref (``path`` is absolute when it is not known relative to the root)."""
        return f"{self.scope}/{self.path}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """An immutable view of the store. Readers hold one; updates build the next.

    ``changed`` and ``removed`` are the refs that differ from the previous
    version (for version 1 every doc is in ``changed``).
    """

    version: int
    docs: Mapping[str, MemoryDoc]  # ref -> doc, read-only (a Docs when built by the store)
    errors: tuple[SkippedFile, ...]
    changed: frozenset[str] = field(default_factory=frozenset)
    removed: frozenset[str] = field(default_factory=frozenset)

    @staticmethod
    def build(
        version: int,
        docs: Mapping[str, StoredDoc],
        errors: tuple[SkippedFile, ...],
        changed: frozenset[str] = frozenset(),
        removed: frozenset[str] = frozenset(),
    ) -> "Snapshot":
        """A snapshot of a copy of ``docs``, whose deferred docs stay deferred."""
        stored = dict(docs._stored) if isinstance(docs, Docs) else dict(docs)
        return Snapshot(version, Docs(stored), errors, changed, removed)

    def enrichments(self) -> dict[str, Enrichment]:
        """ref -> enrichment of every enriched doc, without building deferred docs."""
        stored: Mapping[str, StoredDoc] = self.docs._stored if isinstance(self.docs, Docs) else self.docs
        return {ref: doc.enrichment for ref, doc in stored.items() if doc.enrichment is not None}

    def learned(self) -> dict[str, Learned]:
        """ref -> learned keys and suppressors of every doc that has some, without building deferred docs."""
        stored: Mapping[str, StoredDoc] = self.docs._stored if isinstance(self.docs, Docs) else self.docs
        return {ref: doc.learned for ref, doc in stored.items() if doc.learned is not None}
