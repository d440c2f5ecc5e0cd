"""What the learned file promises the user (issue 25): forgetting takes the words off the disk at once,
what the user wrote there is kept, a planted entry cannot wedge learning, and the file is theirs alone."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from store_helpers import WAIT_S, memory, write

from memory_store import LEARNED_PATH, LearningUpdate, MemoryRoot, MemoryStore, Snapshot

Open = Callable[..., MemoryStore]


def removal_heard(store: MemoryStore, ref: str) -> threading.Event:
    """Set once a subscriber is told of a snapshot without ``ref``."""
    heard = threading.Event()

    def told(snapshot: Snapshot) -> None:
        if ref not in snapshot.docs:
            heard.set()

    store.subscribe(told)
    return heard


# --- forgetting means off the disk ---------------------------------------------------------------


def test_removing_a_memory_takes_its_learned_words_off_the_disk_at_once(root: Path) -> None:
    write(root / "a.md", memory())
    write(root / "b.md", memory())
    files = MemoryRoot(root)
    files.record_learning([LearningUpdate("a.md", keys=("secretproject",)), LearningUpdate("b.md", keys=("kept",))])
    files.remove("a.md")
    data = (root / LEARNED_PATH).read_bytes()
    assert b"secretproject" not in data and b"kept" in data


def test_a_plain_rm_under_a_watched_store_takes_the_words_off_the_disk_before_anyone_hears(
    root: Path, open_store: Open
) -> None:
    write(root / "a.md", memory())
    write(root / "b.md", memory())
    store = open_store(root)
    store.record_learning("mem", [LearningUpdate("a.md", keys=("secretproject",)), LearningUpdate("b.md", keys=("kept",))])
    heard = removal_heard(store, "mem/a.md")
    (root / "a.md").unlink()
    assert heard.wait(WAIT_S)
    data = (root / LEARNED_PATH).read_bytes()
    assert b"secretproject" not in data and b"kept" in data
