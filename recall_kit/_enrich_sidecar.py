"""Which memories need enrichment, and recording finished enrichment in a root's sidecar."""

from __future__ import annotations

from typing import Iterable, Sequence

from memory_store import EnrichmentEntry, MemoryDoc, sidecar_path, update_enrichment


def needs_enrichment(doc: MemoryDoc) -> bool:
    """True when the root's sidecar holds no entry for exactly this version of the memory."""
    return doc.enrichment is None


def docs_to_enrich(docs: Sequence[MemoryDoc], *, everything: bool = False) -> list[MemoryDoc]:
    """The memories to enrich, in a stable order (by ref)."""
    chosen = [doc for doc in docs if everything or needs_enrichment(doc)]
    return sorted(chosen, key=lambda doc: doc.ref)


def record_enrichment(root: str, entries: Iterable[EnrichmentEntry], live_paths: Iterable[str]) -> None:
    """Merge ``entries`` into the sidecar of ``root``, drop entries of memories that are gone, and
    write it atomically, locked against other writers. Lines that were already corrupt are not carried over."""
    update_enrichment(sidecar_path(root), entries, live_paths)
