"""Docs a caller's cache stands in for (``reuse`` returning a DeferredDoc): built only when looked at."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import os
import weakref
from pathlib import Path
from typing import Callable

import pytest
from store_helpers import memory, wait_until, write

from memory_store import (
    DeferredDoc,
    Enrichment,
    EnrichmentEntry,
    MemoryDoc,
    MemoryStore,
    Snapshot,
    sidecar_path,
    write_enrichment,
)

Open = Callable[..., MemoryStore]


def scan(*roots: object, **options: object) -> Snapshot:
    with MemoryStore.open(*roots, watch=False, **options) as store:  # type: ignore[arg-type]
        return store.snapshot()


class Cache:
    """A caller's cache: the docs of an earlier scan, handed back deferred for unchanged files."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.docs = {str(doc.abspath): doc for doc in snapshot.docs.values()}
        self.handed: dict[str, DeferredDoc[MemoryDoc]] = {}  # ref -> deferred doc given to the store
        self.builds: list[str] = []

    def reuse(self, abspath: str, info: os.stat_result) -> DeferredDoc[MemoryDoc] | None:
        doc = self.docs.get(abspath)
        if doc is None or doc.size != info.st_size or info.st_mtime != doc.mtime:
            return None
        deferred = DeferredDoc(doc.content_hash, self.build, doc)
        self.handed[doc.ref] = deferred
        return deferred

    def build(self, doc: MemoryDoc) -> MemoryDoc:
        self.builds.append(doc.ref)
        return doc


def test_a_deferred_doc_is_built_on_first_look_only_and_equals_a_read_one(root: Path) -> None:
    for i in range(5):
        write(root / f"m{i}.md", memory(name=f"M{i}", body=f"body {i}\n"))
    fresh = scan(root)
    cache = Cache(fresh)
    snapshot = scan(root, reuse=cache.reuse)
    assert len(cache.handed) == 5 and cache.builds == []
    assert len(snapshot.docs) == 5 and "mem/m3.md" in snapshot.docs and sorted(snapshot.docs) == sorted(fresh.docs)
    assert cache.builds == []  # counting and listing refs builds nothing
    first = snapshot.docs["mem/m3.md"]
    assert first == fresh.docs["mem/m3.md"] and snapshot.docs["mem/m3.md"] is first
    assert cache.builds == ["mem/m3.md"] and [d.built for d in cache.handed.values()].count(True) == 1
    assert dict(snapshot.docs) == dict(fresh.docs)  # every doc, built once each
    assert sorted(cache.builds) == sorted(fresh.docs)


def test_changed_files_are_read_and_the_rest_stay_deferred(root: Path) -> None:
    for name in ("a", "b", "c"):
        write(root / f"{name}.md", memory(name=name.upper()))
    cache = Cache(scan(root))
    write(root / "b.md", memory(name="B edited", body="longer body than before\n"))
    snapshot = scan(root, reuse=cache.reuse)
    assert sorted(cache.handed) == ["mem/a.md", "mem/c.md"]
    assert snapshot.docs["mem/b.md"].name == "B edited" and cache.builds == []


def test_fresh_enrichment_is_attached_without_building_the_doc(root: Path) -> None:
    write(root / "a.md", memory(name="A"))
    write(root / "b.md", memory(name="B"))
    cache = Cache(scan(root))
    sha = hashlib.sha256((root / "a.md").read_bytes()).hexdigest()
    write_enrichment(
        sidecar_path(root), [EnrichmentEntry("a.md", sha, ("db",)), EnrichmentEntry("b.md", "0" * 64, ("stale",))]
    )
    snapshot = scan(root, reuse=cache.reuse)
    assert snapshot.enrichments() == {"mem/a.md": Enrichment(("db",))}
    assert cache.builds == []
    assert snapshot.docs["mem/a.md"].enrichment == Enrichment(("db",))
    assert snapshot.docs["mem/b.md"].enrichment is None
    assert dict(snapshot.docs) == dict(scan(root).docs)


def test_enrichment_the_builder_attaches_is_replaced_by_the_sidecars(root: Path) -> None:
    write(root / "a.md", memory(name="A"))
    cache = Cache(scan(root))
    old = Enrichment(("from an old sidecar",))
    cache.docs = {path: dataclasses.replace(doc, enrichment=old) for path, doc in cache.docs.items()}
    snapshot = scan(root, reuse=cache.reuse)
    assert snapshot.docs["mem/a.md"].enrichment is None


def test_a_watched_store_updates_deferred_docs_like_read_ones(root: Path, open_store: Open) -> None:
    write(root / "a.md", memory(name="A"))
    write(root / "b.md", memory(name="B"))
    cache = Cache(scan(root))
    store = open_store(root, reuse=cache.reuse)
    assert cache.builds == [] and store.snapshot().version == 1
    write(root / "a.md", memory(name="A edited"))
    snapshot = wait_until(store, lambda s: s.docs["mem/a.md"].name == "A edited")
    assert snapshot.changed == {"mem/a.md"} and "mem/b.md" not in snapshot.changed
    (root / "b.md").unlink()
    snapshot = wait_until(store, lambda s: "mem/b.md" not in s.docs)
    assert snapshot.removed == {"mem/b.md"}
    assert cache.builds == ["mem/a.md"]  # compared with the edited file; b was dropped unbuilt


def test_a_watched_store_lets_go_of_reuse_after_the_first_scan(root: Path, open_store: Open) -> None:
    class Reuse:  # a caller's lookup, which may hold its whole cache (the table of every file)
        def __init__(self, cache: Cache) -> None:
            self.cache = cache

        def __call__(self, abspath: str, info: os.stat_result) -> DeferredDoc[MemoryDoc] | None:
            return self.cache.reuse(abspath, info)

    write(root / "a.md", memory(name="A"))
    reuse = Reuse(Cache(scan(root)))
    gone = weakref.ref(reuse)
    store = open_store(root, reuse=reuse)
    del reuse
    gc.collect()
    assert gone() is None  # a long-lived store does not keep it alive
    assert store.snapshot().docs["mem/a.md"].name == "A"  # the deferred doc it handed over still builds


def test_a_snapshot_built_from_another_keeps_its_docs_deferred(root: Path) -> None:
    write(root / "a.md", memory())
    cache = Cache(scan(root))
    snapshot = scan(root, reuse=cache.reuse)
    copy = Snapshot.build(2, snapshot.docs, snapshot.errors)
    assert cache.builds == [] and copy.docs["mem/a.md"] is snapshot.docs["mem/a.md"]
    assert cache.builds == ["mem/a.md"]


def test_docs_are_read_only(root: Path) -> None:
    write(root / "a.md", memory())
    docs = scan(root, reuse=Cache(scan(root)).reuse).docs
    with pytest.raises(TypeError):
        docs["mem/b.md"] = docs["mem/a.md"]  # type: ignore[index]


class BadCache(Cache):
    """A caller's cache whose entries turn out unusable when built: ``bad(doc)`` says how."""

    def __init__(self, snapshot: Snapshot, bad: Callable[[MemoryDoc], MemoryDoc]) -> None:
        super().__init__(snapshot)
        self.bad = bad

    def build(self, doc: MemoryDoc) -> MemoryDoc:
        self.builds.append(doc.ref)
        return self.bad(doc)


def broken(doc: MemoryDoc) -> MemoryDoc:
    raise ValueError("'name' is a int, not text")


@pytest.mark.parametrize("bad", [
    broken,
    lambda doc: dataclasses.replace(doc, body="text of no file", content_hash="f" * 64),  # another version
    lambda doc: dataclasses.replace(doc, path="other.md"),  # another file
    lambda doc: dataclasses.replace(doc, abspath=Path("/etc/passwd")),
])
def test_a_deferred_doc_that_does_not_build_into_the_listed_file_is_read_from_it(
    root: Path, bad: Callable[[MemoryDoc], MemoryDoc]
) -> None:
    write(root / "a.md", memory(name="A", body="the real body\n"))
    cache = BadCache(scan(root), bad)
    snapshot = scan(root, reuse=cache.reuse)
    assert cache.handed and snapshot.docs["mem/a.md"] == scan(root).docs["mem/a.md"]
    assert snapshot.docs["mem/a.md"].body == "the real body\n"


def test_a_deferred_doc_whose_file_is_gone_too_is_an_empty_memory_never_an_error(root: Path) -> None:
    write(root / "a.md", memory(name="A", body="the real body\n"))
    cache = BadCache(scan(root), broken)
    snapshot = scan(root, reuse=cache.reuse)
    (root / "a.md").unlink()
    doc = snapshot.docs["mem/a.md"]
    assert (doc.ref, doc.body, doc.name) == ("mem/a.md", "", "a") and doc.description.startswith("unreadable: ")
