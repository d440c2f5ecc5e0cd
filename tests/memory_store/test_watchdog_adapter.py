"""The one place the store reaches into watchdog (memory_store._watchdog_adapter): its mends are in
place once a watcher runs, and each does what it is for."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from store_helpers import memory, write

from memory_store import MAX_FOLDER_DEPTH, MemoryStore
from memory_store import _watchdog_adapter as adapter


class RecordingWatcher:
    """A test double of a running watcher (below the adapter's boundary): its roots, and what it was told."""

    def __init__(self, root: Path) -> None:
        self._aliases = [(str(root), os.path.realpath(root))]
        self.rescans = 0

    def note(self, files: tuple[str, ...] = (), folders: tuple[str, ...] = (), rescan_all: bool = False) -> None:
        self.rescans += rescan_all


def test_a_running_store_puts_the_mends_in_place(tmp_path: Path) -> None:
    write(tmp_path / "m" / "a.md", memory(name="A"))
    with MemoryStore.open(tmp_path / "m", watch=True):
        group = sys.modules["watchdog.observers.inotify"].InotifyWatchGroup  # type: ignore[attr-defined]
        assert group._add_callback.__module__ == adapter.__name__  # watched once, never deeper than the scan
        walking = [sys.modules[name] for name in adapter._WALKING_MODULES if name in sys.modules]
        assert walking and all(getattr(module, "os", os) is adapter._BOUNDED_OS for module in walking if hasattr(module, "os"))


def test_a_queue_overflow_rescans_every_running_watcher_and_no_stopped_one(tmp_path: Path) -> None:
    running, stopped = RecordingWatcher(tmp_path / "a"), RecordingWatcher(tmp_path / "b")
    adapter.watching(running)
    adapter.watching(stopped)
    adapter.not_watching(stopped)
    try:
        logging.getLogger("watchdog.observers.inotify_c").warning("inotify event queue overflowed")
    finally:
        adapter.not_watching(running)
    assert (running.rescans, stopped.rescans) == (1, 0)


def test_watchdogs_walk_goes_no_deeper_below_a_root_than_the_scan_and_elsewhere_as_os_walk(tmp_path: Path) -> None:
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    for top in (root, elsewhere):
        deep = top.joinpath(*[f"d{n}" for n in range(MAX_FOLDER_DEPTH + 5)])
        deep.mkdir(parents=True)
    watcher = RecordingWatcher(root)
    adapter.watching(watcher)
    try:
        below_root = max(len(Path(path).relative_to(root).parts) for path, _, _ in adapter._walk_within_depth(str(root)))
        below_elsewhere = max(len(Path(p).relative_to(elsewhere).parts) for p, _, _ in adapter._walk_within_depth(str(elsewhere)))
    finally:
        adapter.not_watching(watcher)
    assert below_root == MAX_FOLDER_DEPTH and below_elsewhere == MAX_FOLDER_DEPTH + 5
