"""The watched store: real inotify events through watchdog, waited on by version."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
from store_helpers import memory, wait_until, write

from memory_store import MemoryStore, Snapshot, atomic_write
from recall_kit import MemoryStoreError

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

Open = Callable[..., MemoryStore]


def names(snapshot: Snapshot) -> dict[str, str]:
    return {ref: doc.name for ref, doc in snapshot.docs.items()}


def test_created_file_becomes_visible_in_the_next_version(root: Path, open_store: Open) -> None:
    store = open_store(root)
    assert store.snapshot().version == 1
    write(root / "new.md", memory(name="New"))
    snapshot = wait_until(store, lambda s: "mem/new.md" in s.docs)
    assert snapshot.docs["mem/new.md"].name == "New"
    assert "mem/new.md" in snapshot.changed and not snapshot.removed


def test_modified_file_is_reread_and_reported_changed(root: Path, open_store: Open) -> None:
    write(root / "a.md", memory(name="Before"))
    write(root / "b.md", memory(name="Other"))
    store = open_store(root)
    write(root / "a.md", memory(name="After"))
    snapshot = wait_until(store, lambda s: names(s)["mem/a.md"] == "After")
    assert snapshot.changed == {"mem/a.md"} and not snapshot.removed


def test_unchanged_docs_are_the_same_objects_after_an_update(root: Path, open_store: Open) -> None:
    write(root / "a.md", memory(name="A"))
    write(root / "b.md", memory(name="B"))
    store = open_store(root)
    first = store.snapshot()
    write(root / "a.md", memory(name="A2"))
    second = wait_until(store, lambda s: names(s)["mem/a.md"] == "A2")
    assert second.docs["mem/b.md"] is first.docs["mem/b.md"]  # only the changed file was re-read
    assert first.docs["mem/a.md"].name == "A"  # the old snapshot is untouched


def test_deleted_file_is_removed(root: Path, open_store: Open) -> None:
    write(root / "a.md", memory())
    write(root / "b.md", memory())
    store = open_store(root)
    (root / "a.md").unlink()
    snapshot = wait_until(store, lambda s: "mem/a.md" not in s.docs)
    assert snapshot.removed == {"mem/a.md"} and set(snapshot.docs) == {"mem/b.md"}


def test_versions_increase_by_one_per_published_snapshot(root: Path, open_store: Open) -> None:
    store = open_store(root)
    seen: list[int] = []
    store.subscribe(lambda s: seen.append(s.version))
    for i in range(3):
        write(root / f"f{i}.md", memory())
        wait_until(store, lambda s, i=i: f"mem/f{i}.md" in s.docs)
    assert seen == list(range(2, store.snapshot().version + 1))


def test_rename_within_and_move_in_and_out_of_the_tree(root: Path, tmp_path: Path, open_store: Open) -> None:
    write(root / "a.md", memory(name="A"))
    outside = write(tmp_path / "elsewhere" / "in.md", memory(name="In"))
    store = open_store(root)
    (root / "a.md").rename(root / "renamed.md")
    wait_until(store, lambda s: set(s.docs) == {"mem/renamed.md"})
    outside.rename(root / "in.md")
    wait_until(store, lambda s: names(s).get("mem/in.md") == "In")
    (root / "renamed.md").rename(tmp_path / "elsewhere" / "out.md")
    wait_until(store, lambda s: set(s.docs) == {"mem/in.md"})


def test_editor_save_via_temp_file_and_rename(root: Path, open_store: Open) -> None:
    target = write(root / "note.md", memory(name="v1"))
    store = open_store(root)
    # vim/VS Code style: write a sibling temp file, then rename it over the original.
    temp = write(root / "note.md.swp~", memory(name="v2"))
    os.replace(temp, target)
    snapshot = wait_until(store, lambda s: names(s).get("mem/note.md") == "v2")
    assert set(snapshot.docs) == {"mem/note.md"} and not snapshot.errors
    atomic_write(target, memory(name="v3"))  # our own writer: hidden temp file + rename
    snapshot = wait_until(store, lambda s: names(s).get("mem/note.md") == "v3")
    assert set(snapshot.docs) == {"mem/note.md"}


def test_file_turning_bad_moves_from_docs_to_errors_and_back(root: Path, open_store: Open) -> None:
    write(root / "a.md", memory())
    store = open_store(root)
    write(root / "a.md", "no frontmatter\n")
    snapshot = wait_until(store, lambda s: not s.docs)
    assert snapshot.removed == {"mem/a.md"}
    assert [(e.path, e.reason.split(" (")[0]) for e in snapshot.errors] == [("a.md", "missing frontmatter")]
    write(root / "a.md", memory())
    snapshot = wait_until(store, lambda s: "mem/a.md" in s.docs)
    assert not snapshot.errors and snapshot.changed == {"mem/a.md"}


def test_subfolder_moved_in_out_and_deleted(root: Path, tmp_path: Path, open_store: Open) -> None:
    for i in range(5):
        write(tmp_path / "staging" / "proj" / "deep" / f"m{i}.md", memory(name=f"m{i}"))
    store = open_store(root)
    (tmp_path / "staging" / "proj").rename(root / "proj")
    wait_until(store, lambda s: len(s.docs) == 5)
    assert set(store.snapshot().docs) == {f"mem/proj/deep/m{i}.md" for i in range(5)}
    (root / "proj").rename(root / "renamed")
    wait_until(store, lambda s: set(s.docs) == {f"mem/renamed/deep/m{i}.md" for i in range(5)})
    (root / "renamed").rename(tmp_path / "away")
    wait_until(store, lambda s: not s.docs)
    shutil.copytree(tmp_path / "away", root / "copy")
    wait_until(store, lambda s: len(s.docs) == 5)
    shutil.rmtree(root / "copy")
    snapshot = wait_until(store, lambda s: not s.docs)
    assert not snapshot.errors


def test_hidden_folders_stay_invisible_while_watching(root: Path, open_store: Open) -> None:
    store = open_store(root)
    write(root / ".git" / "objects" / "x.md", memory())  # a hidden folder appears, with a memory-like file
    (root / ".git" / "objects").rename(root / ".git" / "moved")
    write(root / "sub" / ".cache" / "y.md", memory())
    write(root / "visible.md", memory())  # events arrive in order: once this shows, the rest was applied
    snapshot = wait_until(store, lambda s: "mem/visible.md" in s.docs)
    assert set(snapshot.docs) == {"mem/visible.md"} and not snapshot.errors


def test_files_written_into_a_brand_new_folder_are_all_seen(root: Path, open_store: Open) -> None:
    store = open_store(root)
    folder = root / "a" / "b" / "c"
    folder.mkdir(parents=True)
    for i in range(20):  # written before the watcher can have added a watch on the new folder
        write(folder / f"x{i}.md", memory())
    wait_until(store, lambda s: len(s.docs) == 20)


def test_root_deleted_and_recreated(root: Path, open_store: Open) -> None:
    write(root / "a.md", memory(name="A"))
    store = open_store(root)
    shutil.rmtree(root)
    snapshot = wait_until(store, lambda s: not s.docs)
    assert [e.reason for e in snapshot.errors] == ["root folder does not exist"]
    write(root / "b.md", memory(name="B"))
    snapshot = wait_until(store, lambda s: names(s) == {"mem/b.md": "B"})
    assert not snapshot.errors
    write(root / "c.md", memory(name="C"))  # the re-created root is watched again
    wait_until(store, lambda s: set(s.docs) == {"mem/b.md", "mem/c.md"})


def test_root_that_does_not_exist_yet_is_picked_up_when_it_appears(tmp_path: Path, open_store: Open) -> None:
    root = tmp_path / "later" / "deeper" / "mem"
    store = open_store(root, allow_missing=True)
    assert not store.snapshot().docs and store.snapshot().errors
    write(root / "first.md", memory(name="First"))  # creates three folder levels, then the file
    wait_until(store, lambda s: names(s) == {"mem/first.md": "First"} and not s.errors)
    write(root / "sub" / "second.md", memory())
    wait_until(store, lambda s: len(s.docs) == 2)


def test_symlinked_memory_follows_edits_to_its_target(root: Path, open_store: Open) -> None:
    target = write(root / "real" / "a.txt", memory(name="v1"))  # no memory itself: the link is its one memory
    (root / "alias.md").symlink_to(root / "dangling.md")
    store = open_store(root)
    assert [e.path for e in store.snapshot().errors] == ["alias.md"]
    (root / "alias.md").unlink()
    (root / "alias.md").symlink_to(target)
    wait_until(store, lambda s: names(s).get("mem/alias.md") == "v1")
    write(target, memory(name="v2"))  # the event names the target, not the link
    snapshot = wait_until(store, lambda s: names(s).get("mem/alias.md") == "v2")
    assert names(snapshot) == {"mem/alias.md": "v2"} and not snapshot.errors


def test_a_symlink_to_a_memory_of_the_root_follows_it_as_that_one_memory(root: Path, open_store: Open) -> None:
    target = write(root / "real" / "a.md", memory(name="v1"))
    (root / "alias.md").symlink_to(target)
    store = open_store(root)
    assert names(store.snapshot()) == {"mem/real/a.md": "v1"}  # one file, one memory: the file itself
    write(target, memory(name="v2"))
    snapshot = wait_until(store, lambda s: names(s).get("mem/real/a.md") == "v2")
    assert names(snapshot) == {"mem/real/a.md": "v2"} and not snapshot.errors


def test_symlinked_root_is_watched_through_its_target(tmp_path: Path, open_store: Open) -> None:
    real, other, link = tmp_path / "dotfiles" / "mem", tmp_path / "other", tmp_path / "mem"
    real.mkdir(parents=True)
    link.symlink_to(real, target_is_directory=True)
    store = open_store(link)
    write(real / "a.md", memory(name="A"))
    wait_until(store, lambda s: names(s) == {"mem/a.md": "A"})
    assert store.snapshot().docs["mem/a.md"].abspath == link / "a.md"
    write(other / "b.md", memory(name="B"))
    link.unlink()
    link.symlink_to(other, target_is_directory=True)  # re-pointed: now another folder is the root
    wait_until(store, lambda s: names(s) == {"mem/b.md": "B"})
    write(other / "c.md", memory(name="C"))
    wait_until(store, lambda s: set(s.docs) == {"mem/b.md", "mem/c.md"})


def test_two_roots_are_watched_independently(tmp_path: Path, open_store: Open) -> None:
    project, user = tmp_path / "project", tmp_path / "user"
    project.mkdir()
    user.mkdir()
    store = open_store(("p", project), ("u", user))
    write(project / "x.md", memory(name="project x"))
    write(user / "x.md", memory(name="user x"))
    wait_until(store, lambda s: names(s) == {"p/x.md": "project x", "u/x.md": "user x"})


def test_sibling_roots_sharing_a_parent_survive_one_being_deleted(tmp_path: Path, open_store: Open) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write(first / "a.md", memory(name="first a"))
    write(second / "a.md", memory(name="second a"))
    store = open_store(first, second)
    shutil.rmtree(first)
    wait_until(store, lambda s: names(s) == {"second/a.md": "second a"})
    write(second / "b.md", memory(name="second b"))  # the other root is still watched
    wait_until(store, lambda s: "second/b.md" in s.docs)
    write(first / "c.md", memory(name="first c"))
    wait_until(store, lambda s: set(s.docs) == {"second/a.md", "second/b.md", "first/c.md"})


def test_subscriber_gets_each_snapshot_off_the_reader_path(root: Path, open_store: Open) -> None:
    store = open_store(root)
    got: list[tuple[int, str]] = []
    unsubscribe = store.subscribe(lambda s: got.append((s.version, threading.current_thread().name)))
    write(root / "a.md", memory())
    wait_until(store, lambda s: "mem/a.md" in s.docs)
    assert got and got[-1][0] == store.snapshot().version
    assert all(name != threading.main_thread().name for _, name in got)
    unsubscribe()
    count = len(got)
    write(root / "b.md", memory())
    wait_until(store, lambda s: "mem/b.md" in s.docs)
    assert len(got) == count


def test_failing_subscriber_does_not_stop_updates(root: Path, open_store: Open) -> None:
    store = open_store(root)

    def broken(snapshot: Snapshot) -> None:
        raise RuntimeError("subscriber bug")

    store.subscribe(broken)
    write(root / "a.md", memory())
    wait_until(store, lambda s: "mem/a.md" in s.docs)
    write(root / "b.md", memory())
    wait_until(store, lambda s: "mem/b.md" in s.docs)


def test_wait_for_version_times_out_with_timeout_error(root: Path, open_store: Open) -> None:
    store = open_store(root)
    try:
        store.wait_for_version(99, timeout=0.05)
    except TimeoutError as exc:
        assert "version 99" in str(exc)
    else:
        raise AssertionError("expected TimeoutError")


def test_wait_for_version_on_a_one_shot_store_fails_at_once(root: Path) -> None:
    with MemoryStore.open(root, watch=False) as store:
        assert store.wait_for_version(1, timeout=0).version == 1
        started = time.monotonic()
        try:
            store.wait_for_version(2, timeout=30)
        except MemoryStoreError as exc:
            assert "not watching" in str(exc)
        else:
            raise AssertionError("expected MemoryStoreError")
        assert time.monotonic() - started < 1


def test_close_stops_every_watcher_thread(root: Path) -> None:
    before = set(threading.enumerate())
    with MemoryStore.open(root, debounce_ms=10) as store:
        assert store.watching
        assert set(threading.enumerate()) - before
        write(root / "a.md", memory())
        wait_until(store, lambda s: "mem/a.md" in s.docs)
    assert set(threading.enumerate()) - before == set()
    assert not store.watching and "mem/a.md" in store.snapshot().docs
    store.close()  # idempotent
