"""File-system watching: watchdog (inotify) events, debounced into batches of dirty paths.

The watcher knows nothing about memories. It collects the paths events name,
waits until they go quiet for the debounce window, and hands one Batch to the
store's callback on its own thread. It also keeps the set of inotify watches
right as roots appear, vanish and are re-created.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
import warnings
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
# watchdog warns when a new folder's watch races with its own bookkeeping; the
# watch is still in place and we rescan new folders anyway, so the notice is noise.
warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning, module="watchdog")
MAX_DELAY_FACTOR = 5  # a steady stream of events still publishes every 5 debounce windows


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
    ) -> None:
        self._root_paths = root_paths
        self._on_batch = on_batch
        self._debounce_s = debounce_s
        self._max_delay_s = max(debounce_s * MAX_DELAY_FACTOR, 0.05)
        self._observer = Observer()
        self._handler = _Handler(self)
        self._watches: dict[WatchKey, tuple[ObservedWatch, tuple[int, int]]] = {}
        self._cond = threading.Condition()
        self._pending = Batch()
        self._last_event = 0.0
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="memory-store-debounce", daemon=True)

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        self._observer.start()
        self._thread.start()
        _overflow_listeners.add(self)

    def stop(self) -> None:
        _overflow_listeners.discard(self)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._observer.stop()
        self._observer.join()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    @property
    def threads(self) -> tuple[threading.Thread, ...]:
        """The threads this watcher runs (for tests that check close() leaves none)."""
        return (self._observer, self._thread)

    # --- watches -----------------------------------------------------------------

    def sync_watches(self) -> set[str]:
        """Make the inotify watches match the roots as they exist now.

        Returns the roots whose recursive watch was (re)created; the caller must
        rescan them, since files may have appeared before the watch did.
        """
        fresh: set[str] = set()
        while True:  # each new watch can reveal the next missing level of a root's path
            wanted = self._wanted_watches()
            if wanted.keys() == self._watches.keys() and all(
                self._watches[key][1] == ident for key, ident in wanted.items()
            ):
                return fresh
            for key in [k for k in self._watches if wanted.get(k) != self._watches[k][1]]:
                self._unschedule(key)
            for key, ident in wanted.items():
                if key in self._watches:
                    continue
                try:
                    watch = self._observer.schedule(
                        self._handler, key[0], recursive=key[1], event_filter=_EVENT_FILTER
                    )
                except OSError:
                    continue  # vanished between stat and watch; the next pass sees it
                self._watches[key] = (watch, ident)
                if key[1]:
                    fresh.add(key[0])

    def _wanted_watches(self) -> dict[WatchKey, tuple[int, int]]:
        wanted: dict[WatchKey, tuple[int, int]] = {}
        for path in self._root_paths:
            ident = _folder_identity(path)
            if ident is not None:
                wanted[(path, True)] = ident
            parent = os.path.dirname(path)
            while parent:  # the nearest existing ancestor sees the root (re)appear or vanish
                parent_ident = _folder_identity(parent)
                if parent_ident is not None:
                    wanted[(parent, False)] = parent_ident
                    break
                if parent == os.path.dirname(parent):
                    break
                parent = os.path.dirname(parent)
        return wanted

    def _unschedule(self, key: WatchKey) -> None:
        watch, _ = self._watches.pop(key)
        try:
            self._observer.unschedule(watch)
        except (KeyError, OSError):
            pass  # the emitter already stopped itself (its folder was deleted)

    # --- events ------------------------------------------------------------------

    def relevant(self, path: str) -> bool:
        """Inside a root, or a folder on the way to one."""
        for root in self._root_paths:
            if path == root or path.startswith(root + os.sep) or root.startswith(path + os.sep):
                return True
        return False

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
            except Exception:  # one bad batch must not end watching
                logging.getLogger(__name__).exception("memory store: applying file events failed")


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self._watcher = weakref.proxy(watcher)

    def dispatch(self, event: FileSystemEvent) -> None:
        paths = tuple(
            os.fsdecode(p) for p in (event.src_path, getattr(event, "dest_path", "")) if p
        )
        paths = tuple(p for p in paths if self._watcher.relevant(p))
        if not paths:
            return
        if event.is_directory:
            self._watcher.note(folders=paths)
        else:
            self._watcher.note(files=paths)


def _folder_identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


class _OverflowListener(logging.Filter):
    """watchdog only logs a kernel queue overflow; we turn that log line into a full rescan."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "queue overflowed" in record.getMessage():
            for watcher in list(_overflow_listeners):
                watcher.note(rescan_all=True)
        return True


_overflow_listeners: "weakref.WeakSet[Watcher]" = weakref.WeakSet()
logging.getLogger("watchdog.observers.inotify_c").addFilter(_OverflowListener())
