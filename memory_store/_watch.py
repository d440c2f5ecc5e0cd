"""File-system watching: watchdog (inotify) events, debounced into batches of dirty paths.

The watcher knows nothing about memories. It collects the paths events name,
waits until they go quiet for the debounce window, and hands one Batch to the
store's callback on its own thread. It also keeps the set of inotify watches
right as roots appear, vanish and are re-created.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import ObservedWatch

from memory_store._scan import over_bound
from memory_store._watchdog_adapter import folder_identity, not_watching, watching

# Events that can change what a memory file holds, or whether it can be read (chmod).
_EVENT_FILTER = [
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
]
MAX_DELAY_FACTOR = 5
_MAX_SYNC_PASSES = 256  # a loop guard: one pass per missing folder level on the way to a root
_log = logging.getLogger(__name__)  # a steady stream of events still publishes every 5 debounce windows


@dataclass
class Batch:
    """Paths that changed since the last batch. ``folders`` need a subtree rescan."""

    files: set[str] = field(default_factory=set)
    folders: set[str] = field(default_factory=set)
    rescan_all: bool = False

    def __bool__(self) -> bool:
        return bool(self.files or self.folders or self.rescan_all)


WatchKey = tuple[str, bool]  # (folder, recursive)


class Watcher:
    """Owns a watchdog Observer and a debounce thread; calls ``on_batch`` with each settled Batch."""

    def __init__(
        self,
        root_paths: list[str],
        on_batch: Callable[[Batch, "Watcher"], None],
        debounce_s: float,
        extra_files: list[str] | tuple[str, ...] = (),
        max_entries: int | None = None,
    ) -> None:
        self._root_paths = root_paths
        self._max_entries = max_entries  # a root's folder over it gets no recursive watch (one inotify watch a folder)
        self._sizes: dict[tuple[str, tuple[int, int]], bool] = {}  # (real path, identity) -> over the bound
        self._extra_files = list(extra_files)  # single files outside the roots (given sidecars), reported as they are
        self._on_batch = on_batch
        self._debounce_s = debounce_s
        self._max_delay_s = max(debounce_s * MAX_DELAY_FACTOR, 0.05)
        self._observer = Observer()
        self._handler = _Handler(self)
        self._watches: dict[WatchKey, tuple[ObservedWatch, tuple[int, int]]] = {}
        self._aliases = [(path, path) for path in root_paths]  # (root as given, its real path)
        self._cond = threading.Condition()
        self._pending = Batch()
        self._last_event = 0.0
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="memory-store-debounce", daemon=True)

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        watching(self)  # before the first watch: watchdog's walk must already know our roots
        self._observer.start()
        self._thread.start()

    def stop(self) -> None:
        not_watching(self)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._observer.stop()
        self._observer.join()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    # --- watches -----------------------------------------------------------------

    def sync_watches(self) -> set[str]:
        """Make the inotify watches match the roots as they exist now.

        Returns the roots (as given) whose recursive watch was (re)created; the
        caller must rescan them, since files may have appeared before the watch did.
        """
        fresh: set[str] = set()
        failed: set[WatchKey] = set()
        for _ in range(_MAX_SYNC_PASSES):  # each new watch can reveal the next missing level of a path
            self._aliases = [(path, os.path.realpath(path)) for path in self._root_paths]
            wanted = self._wanted_watches()
            stale = [key for key, (_, ident) in self._watches.items() if wanted.get(key) != ident]
            missing = [key for key in wanted if key not in self._watches and key not in failed]
            if not stale and not missing:
                break
            for key in stale:
                self._unschedule(key)
            for key in missing:
                try:
                    watch = self._observer.schedule(
                        self._handler, key[0], recursive=key[1], event_filter=_EVENT_FILTER
                    )
                except OSError as exc:  # vanished since the stat, or out of inotify watches
                    failed.add(key)
                    _log.warning("memory store: cannot watch %s: %s", key[0], exc.strerror or exc)
                    continue
                self._watches[key] = (watch, wanted[key])
                if key[1]:
                    fresh.update(path for path, real in self._aliases if real == key[0])
        return fresh

    def _oversized(self, real: str, ident: tuple[int, int]) -> bool:
        """Whether the root folder ``real`` is over the entry bound: counted once for each folder identity
        it has (a root retargeted or replaced is a new identity, counted again before it is watched)."""
        if self._max_entries is None:
            return False
        key = (real, ident)
        if key not in self._sizes:
            if len(self._sizes) > 4 * len(self._root_paths) + 16:
                self._sizes.clear()
            self._sizes[key] = over_bound(real, self._max_entries)
        return self._sizes[key]

    def _wanted_watches(self) -> dict[WatchKey, tuple[int, int]]:
        wanted: dict[WatchKey, tuple[int, int]] = {}
        for path, real in self._aliases:
            ident = folder_identity(real)
            if ident is not None and not self._oversized(real, ident):
                wanted[(real, True)] = ident  # inotify does not follow a symlinked root: watch its target
            for start in {path, real}:  # the nearest existing ancestor sees the root (re)appear or vanish
                parent = os.path.dirname(start)
                while True:
                    parent_ident = folder_identity(parent)
                    if parent_ident is not None:
                        wanted[(parent, False)] = parent_ident
                        break
                    if parent == os.path.dirname(parent):
                        break
                    parent = os.path.dirname(parent)
        for path in self._extra_files:
            folder = os.path.dirname(path)  # its nearest existing folder sees it written, replaced or removed
            while (ident := folder_identity(folder)) is None and folder != os.path.dirname(folder):
                folder = os.path.dirname(folder)
            if ident is not None and (folder, True) not in wanted:
                wanted[(folder, False)] = ident
        return wanted

    def _unschedule(self, key: WatchKey) -> None:
        watch, _ = self._watches.pop(key)
        try:
            self._observer.unschedule(watch)
        except (KeyError, OSError):
            pass  # the emitter already stopped itself (its folder was deleted)

    # --- events ------------------------------------------------------------------

    def translate(self, path: str) -> tuple[list[str], bool]:
        """Map an event path to root terms: ([paths as under the given root], touches a root itself).

        A path below a symlinked root's target is renamed to sit below the root
        as given; a path that is a root, or a folder on the way to one, means
        the whole root must be rescanned.
        """
        inside: list[str] = []
        whole = False
        for given, real in self._aliases:
            if path.startswith(real + os.sep):
                inside.append(given + path[len(real) :])
            elif path in (given, real) or given.startswith(path + os.sep) or real.startswith(path + os.sep):
                inside.append(given)
                whole = True
        for extra in self._extra_files:
            if path == extra or extra.startswith(path + os.sep):
                inside.append(extra)
        return inside, whole

    def note(self, files: tuple[str, ...] = (), folders: tuple[str, ...] = (), rescan_all: bool = False) -> None:
        with self._cond:
            self._pending.files.update(files)
            self._pending.folders.update(folders)
            self._pending.rescan_all |= rescan_all
            self._last_event = time.monotonic()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                first = time.monotonic()
                while not self._stopped:
                    now = time.monotonic()
                    wake = min(self._last_event + self._debounce_s, first + self._max_delay_s)
                    if now >= wake:
                        break
                    self._cond.wait(wake - now)
                if self._stopped:
                    return
                batch, self._pending = self._pending, Batch()
            try:
                self._on_batch(batch, self)
            except Exception:  # one bad batch must not end watching; a full rescan repairs what it missed
                _log.exception("memory store: applying file events failed")
                if not batch.rescan_all:
                    self.note(rescan_all=True)


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self._watcher = weakref.proxy(watcher)

    def dispatch(self, event: FileSystemEvent) -> None:
        files: list[str] = []
        folders: list[str] = []
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if not raw:
                continue
            paths, whole = self._watcher.translate(os.fsdecode(raw))
            (folders if whole or event.is_directory else files).extend(paths)
        if files or folders:
            self._watcher.note(tuple(files), tuple(folders))
