"""Where the store reaches into watchdog's internals, all in one place (its test:
tests/memory_store/test_watchdog_adapter.py). watchdog only logs a kernel queue overflow, walks a
watched tree with a recursive os.walk, and watches again a folder its walk already watches; each is
mended here, for the watchers of this process that are running (``watching``) and for them only.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import types
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

from memory_store._scan import MAX_FOLDER_DEPTH


class Watcher(Protocol):
    """What the adapter reads of a running watcher (``memory_store._watch.Watcher``)."""

    _aliases: list[tuple[str, str]]  # (root as given, its real path)

    def note(self, files: tuple[str, ...] = (), folders: tuple[str, ...] = (), rescan_all: bool = False) -> None: ...


def watching(watcher: Watcher) -> None:
    """``watcher`` starts: watchdog's walks and watch groups are bounded (once), and its roots known."""
    _bound_watchdog_walks()
    _bound_watchdog_watches()
    _running.add(watcher)


def not_watching(watcher: Watcher) -> None:
    """``watcher`` stopped: its roots no longer bound anything."""
    _running.discard(watcher)


def folder_identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


class _OverflowListener(logging.Filter):
    """watchdog only logs a kernel queue overflow; we turn that log line into a full rescan."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "queue overflowed" in record.getMessage():
            for watcher in list(_running):
                watcher.note(rescan_all=True)
        return True


_running: "weakref.WeakSet[Any]" = weakref.WeakSet()  # started and not stopped
logging.getLogger("watchdog.observers.inotify_c").addFilter(_OverflowListener())


# --- how deep watchdog walks ----------------------------------------------------------------------
# watchdog walks a folder it watches recursively with os.walk, which on Python 3.11 recurses once per
# level (3.12 walks iteratively): a 1,100-level tree raised RecursionError out of the store's open, or
# ended watchdog's thread and with it all watching. Its modules get an os whose walk goes no deeper
# below one of our roots than the scan reads (MAX_FOLDER_DEPTH); anywhere else it is os.walk itself.
_WALKING_MODULES = ("watchdog.events", "watchdog.observers.inotify", "watchdog.observers.inotify_c")


def _walk_within_depth(
    top: Any, topdown: bool = True, onerror: Any = None, followlinks: bool = False
) -> Iterator[tuple[Any, list[Any], list[Any]]]:
    """os.walk, kept to MAX_FOLDER_DEPTH below the roots of the running watchers that ``top`` lies in."""
    walk = os.walk(top, topdown, onerror, followlinks)
    levels = _levels_left(os.fsdecode(top))
    if levels is None or not topdown:
        yield from walk
        return
    sep = os.fsencode(os.sep) if isinstance(top, bytes) else os.sep
    start = len(top)
    for entry in walk:
        if entry[0][start:].count(sep) >= levels:
            entry[1].clear()  # topdown: what is left in the list is all the walk enters
        yield entry


def _levels_left(top: str) -> int | None:
    """How many more folder levels below ``top`` the store reads, or None when no root of ours holds it."""
    left: int | None = None
    for watcher in list(_running):
        for _given, real in watcher._aliases:
            if top == real:
                depth = 0
            elif top.startswith(real.rstrip(os.sep) + os.sep):
                depth = top[len(real.rstrip(os.sep)) + 1 :].rstrip(os.sep).count(os.sep) + 1
            else:
                continue
            left = max(left if left is not None else -1, MAX_FOLDER_DEPTH - depth)
    return left


class _OsWithBoundedWalk(types.ModuleType):
    """The os module, but for ``walk``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


_BOUNDED_OS = _OsWithBoundedWalk("os")
_BOUNDED_OS.walk = _walk_within_depth  # type: ignore[attr-defined]


def _bound_watchdog_walks() -> None:
    """Give watchdog's walking modules the bounded walk (once; a module not loaded, or not using os, is left alone)."""
    for name in _WALKING_MODULES:
        module = sys.modules.get(name)  # the Observer's import loaded those this platform uses
        if module is not None and getattr(module, "os", None) is os:
            setattr(module, "os", _BOUNDED_OS)


# --- which folders watchdog watches ---------------------------------------------------------------
# watchdog 7 (its InotifyWatchGroup) watches each folder a creation event names, then walks it for the
# folders below. On a tree made while it is watched that goes wrong twice. A folder its parent's walk
# already watches is watched again when its own creation event is read: a RuntimeWarning each, whose
# text holds every path the group watches (a 1,100-level tree made 62 of them, 2.3 MB, in one test).
# And the walk stops at MAX_FOLDER_DEPTH, but a folder created just below the deepest watched one was
# watched because its parent was, then its own child, on down the tree. Its groups get an _add_callback
# that skips both. watchdog 7.1.0 (the floor) keeps its watches in two dicts, path -> watch and watch -> path;
# 7.1.1 in a tree of folder nodes (``_nodes_by_wd``, found by path with ``_find_node_by_path``), and
# the dicts are built afresh at each read. Any other layout is left to watchdog, but for the depth.
_WATCH_GROUP = ("watchdog.observers.inotify", "InotifyWatchGroup")


def _bound_watchdog_watches() -> None:
    """Keep watchdog 7's watch groups from watching a folder twice or deeper than the scan reads (once)."""
    group = getattr(sys.modules.get(_WATCH_GROUP[0]), _WATCH_GROUP[1], None)
    add = getattr(group, "_add_callback", None)
    if group is None or add is None or getattr(add, "__module__", None) == __name__:
        return

    def _add_callback(self: Any, path: bytes) -> None:
        left = _levels_left(os.fsdecode(path))
        if left is not None and left < 0:
            return  # below the deepest folder the scan reads: nothing in it is ever read
        watches = _watches_of(self)
        if watches is None:
            add(self, path)  # not a group this was written for: as watchdog does it
            return
        if watches.watch_at(path) is not None:
            return  # watched already: the walk of a folder above found it before its creation event came
        identity = folder_identity(os.fsdecode(path))
        known = self.__dict__.setdefault("_recall_kit_watch_of", {})
        wd = known.get(identity)
        if identity is not None and wd is not None and watches.alive(wd):
            # the same folder here again (moved, or its creation read twice; inotify keeps one watch per
            # inode): what watchdog's own call would do, without re-adding the callback (a RuntimeWarning)
            watches.put(path, wd)
            return
        add(self, path)
        wd = watches.watch_at(path)
        if identity is not None and wd is not None:
            known[identity] = wd

    group._add_callback = _add_callback


class _Watches(Protocol):
    def watch_at(self, path: bytes) -> Any: ...
    def alive(self, wd: Any) -> bool: ...
    def put(self, path: bytes, wd: Any) -> None: ...


class _FlatWatches:
    """watchdog 7.1.0: ``_active_callbacks_by_path`` and ``_active_callbacks_by_watch``, plain dicts."""

    def __init__(self, by_path: dict[bytes, Any], by_watch: dict[Any, bytes]) -> None:
        self._by_path, self._by_watch = by_path, by_watch

    def watch_at(self, path: bytes) -> Any:
        return self._by_path.get(path)

    def alive(self, wd: Any) -> bool:
        return wd in self._by_watch

    def put(self, path: bytes, wd: Any) -> None:
        self._by_path[path] = wd
        self._by_watch[wd] = path


class _TreeWatches:
    """watchdog 7.1.1: a node per watched folder, in ``_nodes_by_wd`` while its watch lives."""

    def __init__(self, group: Any, nodes: dict[Any, Any]) -> None:
        self._group, self._nodes = group, nodes

    def watch_at(self, path: bytes) -> Any:
        node = self._group._find_node_by_path(path)
        return node.wd if node is not None and node.wd in self._nodes else None

    def alive(self, wd: Any) -> bool:
        return wd in self._nodes

    def put(self, path: bytes, wd: Any) -> None:
        self._group._insert_node(path, wd)


def _watches_of(group: Any) -> _Watches | None:
    """How ``group`` keeps its watches, in the layouts the adapter knows; None for any other."""
    fields = group.__dict__
    by_path, by_watch = fields.get("_active_callbacks_by_path"), fields.get("_active_callbacks_by_watch")
    if isinstance(by_path, dict) and isinstance(by_watch, dict):
        return _FlatWatches(by_path, by_watch)
    nodes = fields.get("_nodes_by_wd")
    if isinstance(nodes, dict) and callable(getattr(group, "_find_node_by_path", None)) and callable(
        getattr(group, "_insert_node", None)
    ):
        return _TreeWatches(group, nodes)
    return None
