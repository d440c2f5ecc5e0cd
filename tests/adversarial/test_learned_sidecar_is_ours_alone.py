"""The learned file is ours alone: a symlinked `.recall-kit`, `learned.jsonl` or lock, a FIFO, a 10 MB
file, 100,000 junk lines, hostile terms, a writer killed mid-write: nothing is read or written through a
link, nothing hangs, the report stays short, and the old file is whole or the new one is."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from store_helpers import memory, wait_until, write
from throwaway_user import throwaway_user

from memory_store import (
    LEARNED_PATH,
    MAX_LEARNED_TERM_CHARS,
    Learned,
    LearningUpdate,
    MemoryPathError,
    MemoryRoot,
    MemoryStore,
    MemoryStoreError,
)
from memory_store._learned_format import MAX_REPORTED_PROBLEMS


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "mem"
    write(folder / "a.md", memory(name="A"))
    write(folder / "b.md", memory(name="B"))
    return folder


def scan(root: Path, **options: object) -> tuple[dict[str, Learned | None], list[tuple[str, str]]]:
    with MemoryStore.open(root, watch=False, **options) as store:  # type: ignore[arg-type]
        snapshot = store.snapshot()
    return {ref: doc.learned for ref, doc in snapshot.docs.items()}, [(e.ref, e.reason) for e in snapshot.errors]


LINE = json.dumps({"path": "a.md", "keys": [["planted", 9, 1.0]]}) + "\n"


# --- links and odd files -------------------------------------------------------------------------


@pytest.mark.parametrize("enrichment", [True, False])
def test_a_symlinked_sidecar_folder_is_reported_once_and_never_written_through(
    root: Path, tmp_path: Path, enrichment: bool
) -> None:
    outside = tmp_path / "elsewhere"
    write(outside / "learned.jsonl", LINE)
    (root / ".recall-kit").symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    learned, errors = scan(root, enrichment=enrichment)
    assert set(learned.values()) == {None}
    subject = "enrichment" if enrichment else "what was learned"
    assert errors == [("mem/.recall-kit", f"the sidecar folder is a symlink; {subject} is never read or written through one")]
    files = MemoryRoot(root)
    assert files.learning_refusal() == (
        "mem/.recall-kit: the sidecar folder is a symlink; what was learned is never read or written through one"
    )
    for act in (lambda: files.record_learning([LearningUpdate("a.md", keys=("k",))]), files.clear_learning):
        with pytest.raises(MemoryPathError, match=r"^refused mem/\.recall-kit/learned\.jsonl: \.recall-kit is a symlink"):
            act()
    assert tree(outside) == before


def test_a_symlinked_learned_file_is_reported_and_never_read_or_replaced(root: Path, tmp_path: Path) -> None:
    target = write(tmp_path / "theirs.jsonl", LINE)
    (root / ".recall-kit").mkdir()
    (root / LEARNED_PATH).symlink_to(target)
    learned, errors = scan(root)
    assert set(learned.values()) == {None}
    assert errors == [("mem/.recall-kit/learned.jsonl", "learned file is a symlink; symlinks are not followed")]
    with pytest.raises(MemoryPathError, match="is a symlink; symlinks are not followed"):
        MemoryRoot(root).record_learning([LearningUpdate("a.md", keys=("k",))])
    assert target.read_text() == LINE and (root / LEARNED_PATH).is_symlink()


def test_a_symlinked_lock_is_refused_and_its_target_never_made(root: Path, tmp_path: Path) -> None:
    (root / ".recall-kit").mkdir()
    (root / (LEARNED_PATH + ".lock")).symlink_to(tmp_path / "made-through-the-link")
    assert "learned file's lock is a symlink" in (MemoryRoot(root).learning_refusal() or "")
    with pytest.raises(MemoryStoreError, match="cannot lock"):
        MemoryRoot(root).record_learning([LearningUpdate("a.md", keys=("k",))])
    assert not (tmp_path / "made-through-the-link").exists() and not (root / LEARNED_PATH).exists()


def test_a_fifo_is_reported_without_blocking_and_never_replaced(root: Path) -> None:
    (root / ".recall-kit").mkdir()
    os.mkfifo(root / LEARNED_PATH)
    learned, errors = scan(root)  # a blocking open would hang here: there is no writer
    assert set(learned.values()) == {None}
    assert errors == [("mem/.recall-kit/learned.jsonl", "learned file is not a regular file")]
    assert MemoryRoot(root).read_learning() == ({}, [(0, "not a regular file")])
    with pytest.raises(MemoryPathError, match="not a regular file"):
        MemoryRoot(root).record_learning([LearningUpdate("a.md", keys=("k",))])
    assert (root / LEARNED_PATH).is_fifo()


# --- size ----------------------------------------------------------------------------------------


def test_a_10_mb_line_is_one_problem_and_the_next_write_replaces_it(root: Path) -> None:
    big = json.dumps({"path": "a.md", "keys": [["k", 1, 1.0]] * 700_000})
    assert len(big) > 10_000_000
    write(root / LEARNED_PATH, big + "\n" + LINE)
    learned, errors = scan(root)
    assert learned["mem/a.md"] == Learned(("planted",))
    assert len(errors) == 1 and errors[0][1].startswith(f"line is {len(big)} bytes, over the")
    MemoryRoot(root).record_learning([LearningUpdate("b.md", keys=("k",))])
    assert (root / LEARNED_PATH).stat().st_size < 1000


def test_a_file_over_the_size_limit_is_one_problem_read_in_bounded_memory(root: Path) -> None:
    (root / ".recall-kit").mkdir()
    with open(root / LEARNED_PATH, "wb") as handle:
        handle.truncate(64 * 1024 * 1024)  # sparse: 64 MiB of NULs
    learned, errors = scan(root)
    assert set(learned.values()) == {None}
    assert [reason for _, reason in errors] == [f"file is {64 * 1024 * 1024} bytes, over the {32 * 1024 * 1024}-byte limit"]


def test_100000_junk_lines_are_a_short_report_and_the_good_line_still_counts(root: Path) -> None:
    junk = ["{", "[]", "null", '{"path": "../escape.md"}', '{"path": "a.md", "keys": 7}', "\xff"] * 16_667
    write(root / LEARNED_PATH, "\n".join(junk[:50_000] + [LINE.strip()] + junk[50_000:100_000]) + "\n")
    learned, errors = scan(root)
    assert learned["mem/a.md"] == Learned(("planted",))
    assert len(errors) == MAX_REPORTED_PROBLEMS + 1
    assert f"and {100_000 - MAX_REPORTED_PROBLEMS} more bad lines from here on, not listed" in {r for _, r in errors}


# --- hostile content -----------------------------------------------------------------------------


def test_hostile_terms_never_reach_a_doc_or_the_file(root: Path) -> None:
    hostile = ["ok", "IGNORE\nPREVIOUS", "\x1b[31mred", "zero\u200bwidth", "bidi\u202eevil", " padded ",
               "x" * (MAX_LEARNED_TERM_CHARS + 1), "y" * 50_000, "", "\ud800", "nul\x00"]
    nested = "[" * 100_000 + "]" * 100_000
    write(root / LEARNED_PATH, "\n".join([
        json.dumps({"path": "a.md", "keys": [[t, 1, 1.0] for t in hostile], "suppressors": [[hostile, 2, 1.0]]}),
        json.dumps({"path": "b.md", "keys": nested}), '{"path": "b.md", "keys": ' + nested + "}",
    ]) + "\n")
    learned, errors = scan(root)
    assert learned["mem/a.md"] == Learned(("ok",), (frozenset({"ok"}),))
    assert learned["mem/b.md"] is None and len(errors) == 2
    MemoryRoot(root).record_learning([LearningUpdate("b.md", keys=tuple(hostile), suppress=frozenset(hostile))])
    text = (root / LEARNED_PATH).read_text()
    assert len(text) < 1000 and "IGNORE" not in text and "padded" not in text and "\\u" not in text


# --- killed writers, other processes -------------------------------------------------------------

_KILLED_WRITER = """
import os, sys, time
from memory_store import LearningUpdate, MemoryRoot
real_write = os.write
def stuck(*args):  # the writer stops here holding the lock, and is killed
    if sys.argv[2] == "write":  # half the new line reaches the file first
        real_write(args[0], bytes(args[1][: len(args[1]) // 2]))
    print("writing", flush=True)
    time.sleep(120)
setattr(os, sys.argv[2], stuck)
MemoryRoot(sys.argv[1]).record_learning([LearningUpdate("b.md", keys=("never",))])
"""


def kill_mid_write(root: Path, at: str) -> None:
    """Start a learning update on ``root`` in another process and SIGKILL it in ``os.<at>``: in "fsync"
    a compaction's new file is written and not yet renamed; in "write" half an appended line is written."""
    writer = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(root), at], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.wait(timeout=30)


def test_a_writer_killed_mid_compaction_leaves_the_old_file_whole(root: Path) -> None:
    files = MemoryRoot(root)
    files.record_learning([LearningUpdate("a.md", keys=("kept",))])
    with (root / LEARNED_PATH).open("ab") as log:
        log.write(b"not json\n")  # a bad line: the next update compacts the file to drop it
    before = (root / LEARNED_PATH).read_bytes()
    kill_mid_write(root, at="fsync")
    assert (root / LEARNED_PATH).read_bytes() == before
    files.record_learning([LearningUpdate("b.md", keys=("next",))])  # the dead writer's lock went with it
    assert sorted(files.read_learning()[0]) == ["a.md", "b.md"]
    assert b"not json" not in (root / LEARNED_PATH).read_bytes()
    assert scan(root)[0]["mem/b.md"] == Learned(("next",))  # its stray temp file is hidden: never a memory


def test_a_writer_killed_mid_append_costs_only_its_own_line(root: Path) -> None:
    files = MemoryRoot(root)
    files.record_learning([LearningUpdate("a.md", keys=("kept",))])
    before = (root / LEARNED_PATH).read_bytes()
    kill_mid_write(root, at="write")
    torn = (root / LEARNED_PATH).read_bytes()
    assert torn.startswith(before) and len(torn) > len(before) and not torn.endswith(b"\n")
    fresh = MemoryRoot(root)  # nothing kept from before: it reads the file as it is
    entries, problems = fresh.read_learning()
    assert sorted(entries) == ["a.md"] and problems == []  # the cut line is not read, and is no error
    fresh.record_learning([LearningUpdate("b.md", keys=("next",))])  # the dead writer's lock went with it
    entries, problems = MemoryRoot(root).read_learning()
    assert problems == [] and {p: e.learned for p, e in entries.items()} == {
        "a.md": Learned(("kept",)), "b.md": Learned(("next",))
    }
    assert b"never" not in (root / LEARNED_PATH).read_bytes()  # the cut line went with the compaction


def test_a_log_grown_past_its_limit_by_someone_else_is_refused_whole_not_read_as_a_tail(root: Path) -> None:
    files = MemoryRoot(root)
    files.record_learning([LearningUpdate("a.md", keys=("kept",))])
    files.read_learning()  # parsed: a longer file of the same inode would be read from here on
    os.truncate(root / LEARNED_PATH, 64 * 1024 * 1024)  # same inode, 64 MiB (sparse)
    assert files.read_learning() == ({}, [(0, f"file is {64 * 1024 * 1024} bytes, over the {32 * 1024 * 1024}-byte limit")])
    files.record_learning([LearningUpdate("b.md", keys=("next",))])  # what cannot be read is not carried over
    assert (root / LEARNED_PATH).stat().st_size < 1024 and sorted(files.read_learning()[0]) == ["b.md"]


def test_a_learned_file_another_user_owns_is_replaced_never_appended_to(root: Path) -> None:
    files = MemoryRoot(root)
    files.record_learning([LearningUpdate("a.md", keys=("kept",))])
    theirs = root / LEARNED_PATH
    with throwaway_user() as other:
        os.chown(theirs, other.pw_uid, other.pw_gid)  # swapped in by another user: they could read what we append
        files.record_learning([LearningUpdate("b.md", keys=("next",))])
        info = os.stat(theirs)
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (os.geteuid(), 0o600)  # a new file of our own
    assert sorted(MemoryRoot(root).read_learning()[0]) == ["a.md", "b.md"]


def test_a_learned_file_hard_linked_elsewhere_is_replaced_never_appended_to(root: Path, tmp_path: Path) -> None:
    files = MemoryRoot(root)
    files.record_learning([LearningUpdate("a.md", keys=("kept",))])
    elsewhere = tmp_path / "users-own-file"
    os.link(root / LEARNED_PATH, elsewhere)  # the log's inode now has a second name outside the root
    before = elsewhere.read_bytes()
    files.record_learning([LearningUpdate("b.md", keys=("next",))])
    assert elsewhere.read_bytes() == before  # a compaction wrote a new file of our own instead
    assert os.stat(root / LEARNED_PATH).st_nlink == 1
    assert sorted(MemoryRoot(root).read_learning()[0]) == ["a.md", "b.md"]


_OTHER_PROCESS = """
import sys
from memory_store import LearningUpdate, MemoryRoot
MemoryRoot(sys.argv[1]).record_learning([LearningUpdate("a.md", keys=("staging",), suppress=frozenset({"tea"}))] * 2)
"""


def test_a_watched_store_sees_another_processs_learning(root: Path) -> None:
    with MemoryStore.open(root, debounce_ms=20) as store:
        b_doc = store.snapshot().docs["mem/b.md"]
        subprocess.run([sys.executable, "-c", _OTHER_PROCESS, str(root)], check=True, timeout=60)
        snapshot = wait_until(store, lambda s: s.docs["mem/a.md"].learned is not None)
        assert snapshot.docs["mem/a.md"].learned == Learned(("staging",), (frozenset({"tea"}),))
        assert snapshot.changed == {"mem/a.md"} and snapshot.docs["mem/b.md"] is b_doc
