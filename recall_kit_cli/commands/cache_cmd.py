"""`recall-kit cache list|clear`: the per-user index caches, one per root set, and removing them."""

from __future__ import annotations

import time
from collections.abc import Callable

import click

from recall_kit import MemoryStoreError
from recall_kit.cache import CacheFile, clear_cache_files, default_cache_dir, list_cache_files
from recall_kit.limits import CACHE_MAX_FILES, CACHE_MAX_UNUSED_DAYS
from recall_kit_cli._format import InputError
from recall_kit_cli._help import HelpGroup
from recall_kit_cli._output import clean, echo_json, echo_rows


@click.group("cache", cls=HelpGroup, help=(
    "The index caches (one per root set) in the per-user cache folder: list or clear them.\n\n"
    f"A cache unused for {CACHE_MAX_UNUSED_DAYS} days, or not among the {CACHE_MAX_FILES} most recently used, "
    "is removed when another is written."
))
def cache() -> None:
    """The index caches in the per-user cache folder: list or clear them."""


_root_filter = click.option(
    "--root", "roots", multiple=True, metavar="DIR",
    help="Only the caches that hold this root, by any path, or a folder in or around it (repeatable); default: every cache.",
)


@cache.command("list")
@_root_filter
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def list_caches(roots: tuple[str, ...], as_json: bool) -> None:
    """Each cache file: its roots, its size and when it was last used. Most recent first.

    With --root, only those `cache clear --root` with the same roots would remove.

    \b
    Example:
      recall-kit cache list --root ~/memories
    """
    folder = default_cache_dir()
    caches = _listed(lambda: list_cache_files(folder, roots or None))
    if as_json:
        echo_json({"folder": str(folder), "caches": [_cache_json(cache) for cache in caches]})
        return
    total = sum(cache.size for cache in caches)
    echo_rows([f"{len(caches)} cache files, {_size(total)}, in {clean(folder)}"])
    now = time.time()
    echo_rows(
        f"  {cache.path.name}  {_size(cache.size):>8}  used {_ago(now - cache.last_used):>10}  {_roots(cache)}"
        for cache in caches
    )


@cache.command("clear")
@_root_filter
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def clear_caches(roots: tuple[str, ...], as_json: bool) -> None:
    """Remove every cache file, or those holding a given root. Each is rebuilt when next needed.

    \b
    Example:
      recall-kit cache clear --root ~/memories
    """
    folder = default_cache_dir()
    removed = _listed(lambda: clear_cache_files(folder, roots or None))
    if as_json:
        echo_json({"folder": str(folder), "removed": [_cache_json(cache) for cache in removed],
                   "bytes": sum(cache.size for cache in removed)})
        return
    echo_rows([f"removed {len(removed)} cache files ({_size(sum(cache.size for cache in removed))}) from {clean(folder)}"])


def _listed(work: Callable[[], list[CacheFile]]) -> list[CacheFile]:
    """What ``work`` returns; a cache folder that is not ours alone, or unreadable, is a one-line error."""
    try:
        return work()
    except MemoryStoreError as exc:
        raise InputError(f"index cache: {exc}") from None
    except OSError as exc:
        raise InputError(f"index cache: {exc.filename}: {exc.strerror}") from None


def _cache_json(cache: CacheFile) -> dict[str, object]:
    return {
        "file": str(cache.path),
        "roots": list(cache.roots) if cache.roots is not None else None,
        "bytes": cache.size,
        "last_used": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(cache.last_used)),
        "regular": cache.regular,
    }


def _roots(cache: CacheFile) -> str:
    if not cache.regular:
        return "(not a regular file: never used; clear removes it)"
    return ", ".join(clean(root) for root in cache.roots) if cache.roots else "(roots unknown)"


def _size(n: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _ago(seconds: float) -> str:
    for unit, scale in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= scale:
            return f"{seconds / scale:.0f} {unit} ago"
    return "just now"
