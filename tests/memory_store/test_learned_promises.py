"""What the learned file promises the user: forgetting takes the words off the disk at once,
what the user wrote there is kept, a planted entry cannot wedge learning, and the file is theirs alone."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from pathlib import Path
from typing import Callable

import pytest
from store_helpers import WAIT_S, memory, next_millisecond, wait_until, write

from memory_store import (
    LEARNED_PATH,
    MAX_LEARNED_KEYS,
    MAX_SUPPRESSORS,
    EnrichmentEntry,
    LearningUpdate,
    MemoryRoot,
    MemoryStore,
    Snapshot,
)

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


# --- the file is the user's alone -----------------------------------------------------------------


def test_a_learned_file_others_may_read_is_replaced_by_a_new_0600_file_never_appended_to(root: Path) -> None:
    files = MemoryRoot(root)
    files.record_learning([LearningUpdate("a.md", keys=("first",))])
    log = root / LEARNED_PATH
    log.chmod(0o644)  # as a git checkout leaves a file shipped in a repository
    before = log.stat().st_ino
    next_millisecond()
    files.record_learning([LearningUpdate("a.md", keys=("second",))])
    after = log.stat()
    assert stat.S_IMODE(after.st_mode) == 0o600 and after.st_ino != before
    assert [k.term for k in files.read_learning()[0]["a.md"].keys] == ["second", "first"]


def git(repo: Path, *args: str) -> str:
    env = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo), "PATH": os.environ["PATH"]}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_git_add_all_in_a_repository_holding_the_root_never_commits_the_sidecars(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    folder = repo / "memories"
    write(folder / "a.md", memory())
    git(repo, "init", "-q")
    files = MemoryRoot(folder)
    files.record_learning([LearningUpdate("a.md", keys=("swordfish",))])
    files.record_enrichment([EnrichmentEntry("a.md", "0" * 64, ("kw",))])
    assert (folder / ".recall-kit" / ".gitignore").read_bytes() == b"*\n"
    git(repo, "add", "-A")
    assert git(repo, "ls-files").split() == ["memories/a.md"]


def test_the_sidecar_folders_gitignore_is_written_once_and_the_users_own_is_kept(root: Path) -> None:
    files = MemoryRoot(root)
    files.record_learning([LearningUpdate("a.md", keys=("first",))])
    ignore = root / ".recall-kit" / ".gitignore"
    ignore.write_text("# mine: I commit enrichment\n!enrichment.jsonl\n*\n")
    files.record_learning([LearningUpdate("a.md", keys=("second",))])
    assert ignore.read_text() == "# mine: I commit enrichment\n!enrichment.jsonl\n*\n"


# --- what the user wrote is kept ----------------------------------------------------------------


def test_an_in_place_edit_that_drops_a_suppressor_is_read_whole_and_never_written_back(
    root: Path, open_store: Open
) -> None:
    write(root / "a.md", memory())
    write(root / "b.md", memory())
    store = open_store(root)
    store.record_learning("mem", [LearningUpdate("a.md", keys=("deploy",), suppress=frozenset({"tea", "green"}))])
    store.record_learning("mem", [LearningUpdate("b.md", keys=("first",))])
    wait_until(store, lambda s: s.docs["mem/b.md"].learned is not None and s.docs["mem/a.md"].learned is not None)
    log = root / LEARNED_PATH
    before = log.stat()
    text = log.read_text()
    kept = [line for line in text.splitlines(keepends=True) if '"a.md"' not in line]
    a_line = json.loads(next(line for line in text.splitlines() if '"a.md"' in line))
    a_line["suppressors"] = []  # the user drops the suppressor, and adds a line of their own
    edited = json.dumps(a_line) + "\n" + "".join(kept) + '{"path":"b.md","keys":[["mine",7,1.0],["first",1,1.0]]}\n'
    assert len(edited) > len(text) and '"green"' not in edited
    with log.open("r+b") as same_inode:  # as nano saves: the same file, rewritten from the start, longer
        same_inode.write(edited.encode())
        same_inode.truncate()
    assert log.stat().st_ino == before.st_ino and log.stat().st_size > before.st_size
    shown = wait_until(store, lambda s: "mine" in s.docs["mem/b.md"].learned.keys)  # type: ignore[union-attr]
    assert shown.docs["mem/a.md"].learned.suppressors == ()  # type: ignore[union-attr]
    store.record_learning("mem", [LearningUpdate("a.md", keys=("later",))])
    data = log.read_bytes()
    assert b"green" not in data and b"mine" in data
    entries = MemoryRoot(root).read_learning()[0]
    assert entries["a.md"].suppressors == () and [k.term for k in entries["b.md"].keys] == ["mine", "first"]


def test_a_memory_that_fails_to_parse_keeps_what_it_learned_while_another_learns(root: Path, open_store: Open) -> None:
    write(root / "a.md", memory(name="Alpha"))
    write(root / "b.md", memory(name="Beta"))
    store = open_store(root)
    store.record_learning("mem", [LearningUpdate("a.md", keys=("alphaword",)), LearningUpdate("b.md", keys=("x",))])
    write(root / "a.md", memory(name="[Alpha"))  # a YAML typo: the parser refuses it
    wait_until(store, lambda s: "mem/a.md" not in s.docs)
    store.record_learning("mem", [LearningUpdate("b.md", keys=("betaword",))])
    assert "a.md" in MemoryRoot(root).read_learning()[0]
    write(root / "a.md", memory(name="Alpha"))  # the typo fixed
    shown = wait_until(store, lambda s: "mem/a.md" in s.docs)
    assert shown.docs["mem/a.md"].learned is not None and shown.docs["mem/a.md"].learned.keys == ("alphaword",)
    (root / "a.md").unlink()  # a file really gone is pruned
    wait_until(store, lambda s: "mem/a.md" not in s.docs)
    store.record_learning("mem", [LearningUpdate("b.md", keys=("again",))])
    assert "a.md" not in MemoryRoot(root).read_learning()[0]


def test_a_planted_full_entry_with_huge_counts_still_lets_new_words_in(root: Path) -> None:
    log = root / LEARNED_PATH
    log.parent.mkdir()
    planted = {"path": "a.md", "keys": [[f"planted{i}", 10**9, 1.0] for i in range(MAX_LEARNED_KEYS)],
               "suppressors": [[[f"p{i}"], 10**9, 1.0] for i in range(MAX_SUPPRESSORS)]}
    log.write_text(json.dumps(planted) + "\n")
    files = MemoryRoot(root)
    files.record_learning([LearningUpdate("a.md", keys=("newword", "other"), suppress=frozenset({"quiet", "now"}))])
    entry = files.read_learning()[0]["a.md"]
    terms = [k.term for k in entry.keys]
    assert len(terms) == MAX_LEARNED_KEYS and {"newword", "other"} <= set(terms)
    assert len(entry.suppressors) == MAX_SUPPRESSORS and frozenset({"quiet", "now"}) in {s[0] for s in entry.suppressors}
    assert terms[:2] == ["planted0", "planted1"]  # still ordered most used first
