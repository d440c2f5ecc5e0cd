"""FastHeuristic following a real, watched MemoryStore on the real file system."""

from __future__ import annotations

import threading
from pathlib import Path

from memory_store import MemoryStore, Snapshot, atomic_write
from recall_kit import FastHeuristic, open_indexed, open_watched
from recall_kit._frozen_index import FrozenIndex
from recall_kit._index import FieldIndex

TIMEOUT = 10.0


def memory(name: str, description: str, body: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: project\n---\n{body}\n"


class VersionSeen:
    """Subscribed after the heuristic, so it fires once the heuristic has applied a version."""

    def __init__(self) -> None:
        self.version = 0
        self.changed = threading.Condition()

    def __call__(self, snapshot: Snapshot) -> None:
        with self.changed:
            self.version = snapshot.version
            self.changed.notify_all()

    def wait(self, version: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.version >= version, TIMEOUT)


def test_heuristic_follows_file_edits_incrementally(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    root.mkdir()
    atomic_write(root / "redis.md", memory("Redis cache", "routewise session cache in Redis 7 on the homelab"))
    with MemoryStore.open(root, debounce_ms=20) as store:
        heuristic = FastHeuristic(store)
        seen = VersionSeen()
        store.subscribe(seen)
        assert heuristic.recall("valkey session cache for routewise").docs[0].doc.name == "Redis cache"

        version = store.snapshot().version
        atomic_write(root / "valkey.md", memory("Valkey migration", "routewise moved its session cache to Valkey 8"))
        seen.wait(version + 1)
        assert heuristic.version == store.snapshot().version
        assert heuristic.recall("valkey session cache for routewise").docs[0].doc.ref == "mem/valkey.md"

        version = store.snapshot().version
        (root / "valkey.md").unlink()
        seen.wait(version + 1)
        refs = [s.doc.ref for s in heuristic.recall("valkey session cache for routewise").ranked]
        assert "mem/valkey.md" not in refs
        heuristic.close()


def test_a_heuristic_opened_from_the_index_cache_follows_the_store(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    root.mkdir()
    atomic_write(root / "redis.md", memory("Redis cache", "routewise session cache in Redis 7 on the homelab"))
    atomic_write(root / "tea.md", memory("Tea", "the user drinks oolong in the afternoon"))
    cache = tmp_path / "cache"
    with open_watched([root], cache_dir=cache) as first:
        assert first.reused == 0
    with open_watched([root], cache_dir=cache, debounce_ms=20) as watched:
        store, heuristic = watched.store, watched.heuristic
        assert store.watching and watched.reused == 2 and heuristic.version == store.snapshot().version
        seen = VersionSeen()
        store.subscribe(seen)
        assert heuristic.recall("valkey session cache for routewise").docs[0].doc.name == "Redis cache"

        version = store.snapshot().version
        atomic_write(root / "valkey.md", memory("Valkey migration", "routewise moved its session cache to Valkey 8"))
        seen.wait(version + 1)
        assert heuristic.recall("valkey session cache for routewise").docs[0].doc.ref == "mem/valkey.md"

        version = store.snapshot().version
        (root / "redis.md").unlink()
        seen.wait(version + 1)
        assert "mem/redis.md" not in [s.doc.ref for s in heuristic.recall("redis homelab session cache").ranked]
    assert not watched.store.watching
    # the next open starts from what the first one saved, not from the changes it followed
    with open_watched([root], cache_dir=cache) as again:
        assert again.reused == 1 and set(again.store.snapshot().docs) == {"mem/tea.md", "mem/valkey.md"}


def test_a_heuristic_over_a_one_shot_cached_index_takes_in_a_next_snapshot(tmp_path: Path) -> None:
    # a one-shot open of an unchanged small store reads its cached index without numpy; a change
    # applied to that heuristic afterwards still lands, as on any other
    root = tmp_path / "mem"
    root.mkdir()
    atomic_write(root / "redis.md", memory("Redis cache", "routewise session cache in Redis 7 on the homelab"))
    atomic_write(root / "tea.md", memory("Tea", "the user drinks oolong in the afternoon"))
    open_indexed([root], cache_dir=tmp_path / "cache")
    heuristic = open_indexed([root], cache_dir=tmp_path / "cache").heuristic
    assert isinstance(heuristic._index, FrozenIndex)
    atomic_write(root / "valkey.md", memory("Valkey migration", "routewise moved its session cache to Valkey 8"))
    (root / "tea.md").unlink()
    with MemoryStore.open(root, watch=False) as store:
        now = store.snapshot()
    heuristic.apply(Snapshot.build(heuristic.version + 1, now.docs, (), frozenset({"mem/valkey.md"}), frozenset({"mem/tea.md"})))
    query = "valkey session cache for routewise"
    assert [(s.doc.ref, s.score) for s in heuristic.recall(query).ranked] == [
        (s.doc.ref, s.score) for s in FastHeuristic(now).recall(query).ranked
    ]
    assert heuristic.recall(query).docs[0].doc.ref == "mem/valkey.md" and isinstance(heuristic._index, FieldIndex)
