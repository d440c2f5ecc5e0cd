"""Forgetting, whole: a memory removed, or what was learned for it cleared, and with it every index
cache that still holds it. The caches keep each memory's words and what was learned for it; without
this, a forgotten memory's words would stay in a cache until its root set is queried again, or for
good. Every door forgets through here (the CLI's ``rm`` and ``learned clear``, an agent's code)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory_store import UnsafePathError
from recall_kit._cache_file import clear_cache_files

if TYPE_CHECKING:
    from collections.abc import Iterable

    from memory_store import MemoryStore

_log = logging.getLogger("recall_kit")


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What a forgetting did: learned entries removed (0 for a memory removed), the index caches
    dropped, and the one-line reason they could not be when they could not (the forgetting stands)."""

    learned_entries: int
    caches_dropped: int
    cache_problem: str | None = None


def forget_memory(store: MemoryStore, ref: str, *, cache_dir: str | os.PathLike[str] | None = None) -> Forgotten:
    """Delete the memory file ``ref`` (and what was learned for it) and every index cache of its roots.

    Raises MemoryStoreError when the store refuses the removal; then nothing was forgotten.
    """
    store.remove(ref)
    return _drop_caches(store, 0, cache_dir)


def forget_learning(
    store: MemoryStore,
    label: str | None = None,
    paths: Iterable[str] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Forgotten:
    """Forget what was learned (``MemoryStore.clear_learning``'s arguments) and, when anything was,
    drop the index caches that hold it."""
    removed = store.clear_learning(label, paths)
    return _drop_caches(store, removed, cache_dir) if removed else Forgotten(0, 0)


def _drop_caches(store: MemoryStore, removed: int, cache_dir: str | os.PathLike[str] | None) -> Forgotten:
    """The caches of any of the store's roots removed (``cache_dir`` None: the per-user default); a
    folder that is not ours alone is left, and said so."""
    try:
        dropped = clear_cache_files(cache_dir, [path for _label, path in store.roots])
    except (UnsafePathError, OSError) as exc:
        _log.warning("index cache not cleared: %s", exc)
        return Forgotten(removed, 0, f"index cache not cleared: {exc}")
    return Forgotten(removed, len(dropped))
