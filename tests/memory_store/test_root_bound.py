"""A bounded store stays bounded whoever retargets its root: a watched root accepted at 27
memories that becomes a tree of 62,000 entries (its symlink retargeted, or the folder replaced by a
symlink, as a `git pull` can do) is neither read nor watched past the bound, and the snapshot says so."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from store_helpers import memory, wait_until, write

from memory_store import MAX_ROOT_ENTRIES, MemoryStore, MemoryStoreError, Snapshot

Open = Callable[..., MemoryStore]
FOLDERS, FILES = 1_240, 50  # 1,240 folders of 50 files: 63,240 entries


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big")
    for n in range(FOLDERS):
        folder = root / f"d{n}"
        os.makedirs(folder)
        for m in range(FILES):
            os.close(os.open(folder / f"f{m}.txt", os.O_CREAT | os.O_WRONLY, 0o600))
    assert FOLDERS * (FILES + 1) > MAX_ROOT_ENTRIES
    return root


def small(folder: Path) -> Path:
    for n in range(27):
        write(folder / f"m{n}.md", memory(name=f"Memory {n}"))
    return folder


def inotify_watches() -> int:
    """This process's inotify watches, as the kernel lists them."""
    count = 0
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            count += (Path("/proc/self/fdinfo") / fd).read_text().count("inotify wd:")
        except OSError:
            continue
    return count


def over_the_bound(snapshot: Snapshot) -> bool:
    return any(f"more than {MAX_ROOT_ENTRIES:,} files and folders" in err.reason for err in snapshot.errors)


def _retarget(link: Path, target: Path) -> None:
    fresh = link.with_name(link.name + ".new")
    fresh.symlink_to(target, target_is_directory=True)
    os.replace(fresh, link)


def test_a_symlinked_root_retargeted_to_a_huge_tree_is_neither_read_nor_watched(
    tmp_path: Path, big: Path, open_store: Open
) -> None:
    link = tmp_path / "mem"
    link.symlink_to(small(tmp_path / "small"), target_is_directory=True)
    before = inotify_watches()
    store = open_store(link, max_entries=MAX_ROOT_ENTRIES)
    assert len(store.snapshot().docs) == 27
    _retarget(link, big)
    shown = wait_until(store, over_the_bound)
    assert shown.docs == {} and inotify_watches() - before < 10
    _retarget(link, tmp_path / "small")  # back to a folder of memories: read and watched again
    shown = wait_until(store, lambda s: len(s.docs) == 27 and not over_the_bound(s))


def test_a_root_folder_replaced_by_a_symlink_to_a_huge_tree_is_neither_read_nor_watched(
    tmp_path: Path, big: Path, open_store: Open
) -> None:
    root = small(tmp_path / "mem")
    before = inotify_watches()
    store = open_store(root, max_entries=MAX_ROOT_ENTRIES)
    assert len(store.snapshot().docs) == 27
    root.rename(tmp_path / "old")
    root.symlink_to(big, target_is_directory=True)
    shown = wait_until(store, over_the_bound)
    assert shown.docs == {} and inotify_watches() - before < 10


def test_every_store_is_bounded_unless_told_otherwise(big: Path) -> None:
    with MemoryStore.open(big, watch=False) as store:  # the library's own door, no option given
        assert over_the_bound(store.snapshot()) and len(store.snapshot().docs) == 0
    with MemoryStore.open(big, watch=False, max_entries=None) as store:  # asked for: no bound
        assert not over_the_bound(store.snapshot())


@pytest.mark.parametrize("which", ["/", "home", "above home"])
def test_no_store_opens_the_file_system_root_or_a_home(which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "users" / "alice"
    small(home / "notes")
    monkeypatch.setenv("HOME", str(home))
    root = {"/": "/", "home": "~", "above home": str(tmp_path / "users")}[which]
    with pytest.raises(MemoryStoreError, match="not a folder of memories"):
        MemoryStore.open(root, watch=False)
    MemoryStore.open(home / "notes", watch=False).close()  # a folder inside it opens


def test_the_library_refuses_what_the_cli_refuses(tmp_path: Path) -> None:
    from recall_kit import open_recaller

    with pytest.raises(MemoryStoreError, match="file system root"):
        open_recaller(["/"])


def test_the_bound_counts_every_visible_file_and_folder_of_the_tree_and_no_hidden_one(tmp_path: Path, open_store: Open) -> None:
    root = tmp_path / "mem"
    write(root / "a.md", memory(name="A"))
    write(root / "notes" / "b.md", memory(name="B"))
    write(root / "notes" / "deep" / "c.md", memory(name="C"))
    write(root / ".git" / "objects" / "x.md", memory(name="hidden"))
    # visible: a.md, notes, notes/b.md, notes/deep, notes/deep/c.md = 5
    assert len(open_store(root, max_entries=5, watch=False).snapshot().docs) == 3

    shown = open_store(root, max_entries=4, watch=False).snapshot()

    assert shown.docs == {} and [err.reason.startswith("more than 4 files and folders") for err in shown.errors] == [True]
