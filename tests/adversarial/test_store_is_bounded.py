"""Folders nested far below a root: reported and skipped by the scan and by the watcher alike, at one
depth limit; watching goes on (a 1,100-level tree killed `watch` with a RecursionError)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import pytest

from memory_store import MAX_FOLDER_DEPTH, MemoryStore

from cli_support import RECALL_KIT, clean_environ
from store_helpers import wait_until

LEVELS = 1100  # what the probe nested; deeper than Python's recursion limit
WAIT_S = 30.0
REASON = f"folder nested more than {MAX_FOLDER_DEPTH} levels deep: not read"


def memory(name: str) -> str:
    return f"---\nname: {name}\ndescription: the {name} memory\ntype: user\n---\nBody of {name}.\n"


def nest(top: Path, levels: int, name: str = "d") -> Path:
    """``levels`` folders, each inside the last, below ``top``; a memory in the deepest. Returns the deepest."""
    top.mkdir(parents=True, exist_ok=True)
    deepest = top
    for _ in range(levels):  # not os.makedirs: it recurses once per level too
        deepest = deepest / name
        deepest.mkdir()
    (deepest / "deep.md").write_text(memory("deep"))
    return deepest


def remove_tree(top: Path) -> None:
    """Remove ``top`` without recursing (shutil.rmtree, and so pytest's own cleanup, recurse per level)."""
    folders, pending = [], [top]
    while pending:
        folder = pending.pop()
        folders.append(folder)
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
            else:
                os.unlink(entry.path)
    for folder in reversed(folders):
        folder.rmdir()


def frontier(name: str = "d") -> str:
    """The first folder of a nest the store does not enter, relative to the root."""
    return "/".join([name] * (MAX_FOLDER_DEPTH + 1))


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "mem"
    (root / "user").mkdir(parents=True)
    (root / "user" / "a.md").write_text(memory("a"))
    nest(root, LEVELS)
    yield root
    remove_tree(root)


def test_the_one_shot_scan_reports_the_first_folder_too_deep_and_reads_what_is_above_it(root: Path) -> None:
    nest(root / "user", MAX_FOLDER_DEPTH - 1, "ok")  # its folder is MAX_FOLDER_DEPTH levels down: read
    with MemoryStore.open(root, watch=False) as store:
        snapshot = store.snapshot()
    assert sorted(snapshot.docs) == ["mem/user/a.md", "mem/" + "/".join(["user", *["ok"] * (MAX_FOLDER_DEPTH - 1), "deep.md"])]
    assert [(e.path, e.reason) for e in snapshot.errors] == [(frontier(), REASON)]


@pytest.fixture
def watched(root: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(root, watch=True, debounce_ms=20) as store:
        yield store


def test_a_watched_store_opens_on_a_deep_tree_and_keeps_watching(
    root: Path, watched: MemoryStore, recwarn: pytest.WarningsRecorder
) -> None:
    snapshot = watched.snapshot()
    assert sorted(snapshot.docs) == ["mem/user/a.md"]
    assert [(e.path, e.reason) for e in snapshot.errors] == [(frontier(), REASON)]

    nest(root / "later", LEVELS, "n")  # made while watching, faster than the events for it arrive
    (root / "user" / "b.md").write_text(memory("b"))
    snapshot = wait_until(watched, lambda s: "mem/user/b.md" in s.docs and len(s.errors) == 2, WAIT_S)
    assert sorted((e.path, e.reason) for e in snapshot.errors) == [
        (frontier(), REASON), ("/".join(["later", *["n"] * MAX_FOLDER_DEPTH]), REASON)
    ]
    assert sorted(snapshot.docs) == ["mem/user/a.md", "mem/user/b.md"]

    deep_dir = root.joinpath(*["d"] * (MAX_FOLDER_DEPTH + 3))
    (deep_dir / "edited.md").write_text(memory("edited"))  # below the limit: nothing of it is read
    (root / "user" / "c.md").write_text(memory("c"))
    snapshot = wait_until(watched, lambda s: "mem/user/c.md" in s.docs, WAIT_S)
    assert not any("edited" in ref or "deep" in ref for ref in snapshot.docs)
    assert [str(w.message)[:80] for w in recwarn] == []  # watchdog watched no folder twice


class Watch:
    """A running `recall-kit watch`, its stdout read line by line on a thread."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [str(RECALL_KIT), "watch", "--root", str(root), "--json", "--debounce-ms", "20"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_environ(),
        )
        self.lines: queue.Queue[dict[str, object]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def next(self) -> dict[str, object]:
        return self.lines.get(timeout=WAIT_S)

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=WAIT_S)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


def test_recall_kit_watch_reports_the_deep_folder_and_follows_changes(root: Path) -> None:
    watch = Watch(root)
    try:
        first = watch.next()
        (root / "user" / "b.md").write_text(memory("b"))
        second = watch.next()
    finally:
        code, stderr = watch.stop()
    assert (code, stderr) == (0, "")
    assert first["docs"] == 1 and first["errors"] == [
        {"ref": f"mem/{frontier()}", "scope": "mem", "path": frontier(), "reason": REASON}
    ]
    assert second["docs"] == 2 and second["changed"] == ["mem/user/b.md"]


def watched_inodes(pid: int) -> set[int]:
    """The inodes a process's inotify instances watch, as the kernel lists them in /proc."""
    found: set[int] = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:  # closed since the listing
            continue
        found |= {int(ino, 16) for ino in re.findall(r"^inotify wd:\S+ ino:([0-9a-f]+)", info, re.MULTILINE)}
    return found


def test_folders_made_while_watched_are_watched_once_and_no_deeper_than_the_scan_reads(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    (root / "user").mkdir(parents=True)
    (root / "user" / "a.md").write_text(memory("a"))
    deepest = nest(root, MAX_FOLDER_DEPTH)  # its memory is read: the deepest folder the scan enters
    watch = Watch(root)
    try:
        assert watch.next()["docs"] == 2
        # Stopped, the watcher reads every event below only once the tree is in its final state.
        watch.proc.send_signal(signal.SIGSTOP)
        (deepest / "below").mkdir()  # created in a watched folder, one level deeper than the scan reads
        again = root / "again"
        again.mkdir()
        again.rmdir()
        again.mkdir()  # two creation events for one folder, the first read when it is already made again
        (again / "inner").mkdir()
        (root / "user" / "marker.md").write_text(memory("marker"))
        watch.proc.send_signal(signal.SIGCONT)
        while "mem/user/marker.md" not in watch.next()["changed"]:  # events are read in order: all are in
            pass
        watched = watched_inodes(watch.proc.pid)
    finally:
        code, stderr = watch.stop()
    assert (code, stderr) == (0, "")  # no RuntimeWarning for the folders watched a second time
    assert {os.stat(p).st_ino for p in (root, deepest, again, again / "inner")} <= watched
    assert os.stat(deepest / "below").st_ino not in watched
