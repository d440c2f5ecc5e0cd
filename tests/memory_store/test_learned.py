"""The learned file: cleaning, merging, bounds, reading and writing it, and the store attaching it to docs."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import memory, next_millisecond, wait_until, write

from memory_store import (
    LEARNED_PATH,
    MAX_LEARNED_KEYS,
    MAX_LEARNED_TERM_CHARS,
    MAX_LEARNED_TERMS,
    MAX_SUPPRESSORS,
    DeferredDoc,
    Learned,
    LearnedEntry,
    LearnedTerm,
    LearningUpdate,
    MemoryDoc,
    MemoryRoot,
    MemoryStore,
    MemoryStoreError,
    Snapshot,
    clean_term,
    decode_doc,
    encode_doc,
)
from memory_store._learned_log import COMPACT_MIN_BYTES, MAX_KEPT_CHANGES
from memory_store._learned_format import merge_updates

Open = Callable[..., MemoryStore]


def scan(*roots: object, **options: object) -> Snapshot:
    with MemoryStore.open(*roots, watch=False, **options) as store:  # type: ignore[arg-type]
        return store.snapshot()


def lines(root: Path) -> list[Any]:
    return [json.loads(line) for line in (root / LEARNED_PATH).read_text().splitlines()]


# --- terms ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Staging", "staging"),
        ("straße", "strasse"),
        ("card-processor", "card-processor"),
        ("two words", None),
        ("tab\there", None),
        ("bell\x07", None),
        ("zero\u200bwidth", None),
        ("bidi\u202e", None),
        ("<system>", None),
        ("x" * MAX_LEARNED_TERM_CHARS, "x" * MAX_LEARNED_TERM_CHARS),
        ("x" * (MAX_LEARNED_TERM_CHARS + 1), None),
        ("x" * 10_000_000, None),
        ("", None),
        (42, None),
        (None, None),
    ],
)
def test_a_term_is_case_folded_or_dropped_never_repaired(raw: object, expected: str | None) -> None:
    assert clean_term(raw) == expected


def test_an_update_keeps_at_most_max_learned_terms_and_inspects_a_bounded_share(tmp_path: Path) -> None:
    files = MemoryRoot(tmp_path)
    files.record_learning([LearningUpdate("a.md", keys=tuple(f"t{i}" for i in range(1_000_000)))])
    (entry,) = files.read_learning()[0].values()
    assert {k.term for k in entry.keys} == {f"t{i}" for i in range(MAX_LEARNED_TERMS)}


# --- merging -------------------------------------------------------------------------------------


def test_keys_count_up_and_the_most_used_come_first(tmp_path: Path) -> None:
    files = MemoryRoot(tmp_path)
    files.record_learning([LearningUpdate("a.md", keys=("ship", "staging"))])
    files.record_learning([LearningUpdate("a.md", keys=("Staging",))])
    (entry,) = files.read_learning()[0].values()
    assert [(k.term, k.count) for k in entry.keys] == [("staging", 2), ("ship", 1)]
    assert entry.keys[0].seen >= entry.keys[1].seen > 0
    assert entry.learned == Learned(("staging", "ship"))


def test_the_least_used_key_is_dropped_first_then_the_oldest() -> None:
    entries: dict[str, LearnedEntry] = {}
    merge_updates(entries, [LearningUpdate("a.md", keys=("often",))] * 3, now=1.0)
    for i in range(MAX_LEARNED_KEYS):  # one new term at a time, each newer than the last
        merge_updates(entries, [LearningUpdate("a.md", keys=(f"k{i}",))], now=10.0 + i)
    terms = [k.term for k in entries["a.md"].keys]
    assert len(terms) == MAX_LEARNED_KEYS
    assert terms[0] == "often"  # counted three times: kept though it is the oldest
    assert "k0" not in terms and f"k{MAX_LEARNED_KEYS - 1}" in terms  # the oldest of the once-learned went


def test_suppressors_count_up_are_bounded_and_released_by_overlap() -> None:
    entries: dict[str, LearnedEntry] = {}
    no = frozenset({"deploy", "general", "question"})
    merge_updates(entries, [LearningUpdate("a.md", suppress=no)] * 2, now=1.0)
    assert entries["a.md"].suppressors == ((no, 2, 1.0),)
    for i in range(MAX_SUPPRESSORS):
        merge_updates(entries, [LearningUpdate("a.md", suppress=frozenset({f"s{i}", "x"}))], now=2.0 + i)
    sups = entries["a.md"].suppressors
    assert len(sups) == MAX_SUPPRESSORS and sups[0][0] == no
    assert frozenset({"s0", "x"}) not in {s[0] for s in sups}
    merge_updates(entries, [LearningUpdate("a.md", release=frozenset({"deploy", "general"}))], now=50.0)  # 2/3
    assert no not in {s[0] for s in entries["a.md"].suppressors}
    kept = frozenset({"s5", "x"})
    merge_updates(entries, [LearningUpdate("a.md", release=frozenset({"s5", "y", "z"}))], now=51.0)  # 1/4
    assert kept in {s[0] for s in entries["a.md"].suppressors}


def test_an_entry_left_with_nothing_is_removed() -> None:
    entries: dict[str, LearnedEntry] = {}
    merge_updates(entries, [LearningUpdate("a.md", suppress=frozenset({"x"}))])
    assert merge_updates(entries, [LearningUpdate("a.md", release=frozenset({"x"}))]) == {"a.md"}
    assert entries == {}
    assert merge_updates(entries, [LearningUpdate("b.md", keys=("two words", "\x00"))]) == set()


terms = st.text(min_size=0, max_size=60)
updates = st.builds(
    LearningUpdate,
    path=st.sampled_from(["a.md", "sub/b.md"]),
    keys=st.lists(terms, max_size=40).map(tuple),
    suppress=st.frozensets(terms, max_size=40),
    release=st.frozensets(terms, max_size=5),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(updates, max_size=60))
def test_whatever_is_fed_every_entry_stays_within_its_bounds(fed: list[LearningUpdate]) -> None:
    entries: dict[str, LearnedEntry] = {}
    for i, update in enumerate(fed):
        merge_updates(entries, [update], now=float(i))
    for entry in entries.values():
        assert 0 < len(entry.keys) + len(entry.suppressors)
        assert len(entry.keys) <= MAX_LEARNED_KEYS and len(entry.suppressors) <= MAX_SUPPRESSORS
        assert all(clean_term(k.term) == k.term for k in entry.keys)
        assert all(0 < len(s[0]) <= MAX_LEARNED_TERMS and all(clean_term(t) == t for t in s[0]) for s in entry.suppressors)


def test_an_invalid_path_raises_and_the_file_stays(tmp_path: Path) -> None:
    files = MemoryRoot(tmp_path)
    files.record_learning([LearningUpdate("a.md", keys=("kept",))])
    before = (tmp_path / LEARNED_PATH).read_bytes()
    for bad in ("../out.md", "/abs.md", "", "a/./b.md"):
        with pytest.raises(MemoryStoreError, match="invalid learning update"):
            files.record_learning([LearningUpdate("b.md", keys=("x",)), LearningUpdate(bad, keys=("x",))])
    assert (tmp_path / LEARNED_PATH).read_bytes() == before
    files.record_learning([LearningUpdate("b.md", keys=("next",))])  # the failed call left the kept parse whole
    assert sorted(files.read_learning()[0]) == ["a.md", "b.md"]


# --- the file ------------------------------------------------------------------------------------


def test_the_file_is_one_object_a_line_mode_0600_and_never_holds_more_than_terms(tmp_path: Path) -> None:
    path = MemoryRoot(tmp_path).record_learning(
        [LearningUpdate("a.md", keys=("staging",), suppress=frozenset({"b", "a"}))]
    )
    assert path == tmp_path / LEARNED_PATH
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    (obj,) = lines(tmp_path)
    assert set(obj) == {"path", "keys", "suppressors"} and obj["path"] == "a.md"
    ((term, count, seen),) = obj["keys"]
    assert (term, count) == ("staging", 1) and seen == round(seen, 3)  # to the millisecond: enough to order by
    assert [s[:2] for s in obj["suppressors"]] == [[["a", "b"], 1]]


def test_bad_lines_are_reported_by_number_and_bad_items_dropped(tmp_path: Path) -> None:
    good = {"path": "a.md", "keys": [["ok", 2, 5.0], ["two words", 1, 1.0], ["neg", -1, 1.0], ["inf", 1, "x"],
                                     ["nan", 1, float("nan")], ["bool", True, 1.0], "junk"],
            "suppressors": [[["p", "q"], 1, 2.0], [[], 1, 1.0], [["ok"], 0, 1.0]]}
    write(tmp_path / LEARNED_PATH, "{broken\n" + json.dumps(good) + "\n[1]\n" + json.dumps({"path": "../x"}) + "\n")
    entries, problems = MemoryRoot(tmp_path).read_learning()
    assert entries == {"a.md": LearnedEntry("a.md", (LearnedTerm("ok", 2, 5.0),), ((frozenset({"p", "q"}), 1, 2.0),))}
    assert [n for n, _ in problems] == [1, 3, 4]
    assert problems[1][1] == "expected a JSON object, got list"


def test_a_rewrite_drops_bad_lines_and_keeps_good_ones(tmp_path: Path) -> None:
    good = json.dumps({"path": "a.md", "keys": [["ok", 1, 1.0]]})
    write(tmp_path / LEARNED_PATH, "{broken\n" + good + "\n")
    MemoryRoot(tmp_path).record_learning([LearningUpdate("b.md", keys=("new",))])
    assert sorted(o["path"] for o in lines(tmp_path)) == ["a.md", "b.md"]
    assert MemoryRoot(tmp_path).read_learning()[1] == []


def test_live_paths_prune_and_clear_forgets_one_or_all(tmp_path: Path) -> None:
    files = MemoryRoot(tmp_path)
    files.record_learning([LearningUpdate(p, keys=("k",)) for p in ("a.md", "b.md", "c.md")])
    files.record_learning([], live_paths=["a.md", "b.md"])
    assert sorted(files.read_learning()[0]) == ["a.md", "b.md"]
    assert files.clear_learning(["b.md", "nope.md"]) == 1
    assert sorted(files.read_learning()[0]) == ["a.md"]
    assert files.clear_learning() == 1 and files.read_learning() == ({}, [])
    assert files.clear_learning() == 0


def test_clearing_a_root_that_learned_nothing_writes_nothing(tmp_path: Path) -> None:
    assert MemoryRoot(tmp_path).clear_learning() == 0
    assert not (tmp_path / ".recall-kit").exists()


def test_an_update_that_changes_nothing_does_not_rewrite(tmp_path: Path) -> None:
    files = MemoryRoot(tmp_path)
    files.record_learning([LearningUpdate("a.md", keys=("k",))])
    before = os.stat(tmp_path / LEARNED_PATH).st_ino
    files.record_learning([LearningUpdate("a.md", keys=("bad term",))], live_paths=["a.md"])
    assert os.stat(tmp_path / LEARNED_PATH).st_ino == before


def test_a_change_by_another_writer_is_read_not_the_kept_parse(tmp_path: Path) -> None:
    files = MemoryRoot(tmp_path)
    files.record_learning([LearningUpdate("a.md", keys=("mine",))])
    MemoryRoot(tmp_path).record_learning([LearningUpdate("b.md", keys=("theirs",))])  # its own kept parse
    files.record_learning([LearningUpdate("a.md", keys=("again",))])
    assert sorted(files.read_learning()[0]) == ["a.md", "b.md"]


# --- the file as a log ------------------------------------------------------------------------------


def test_an_update_appends_the_entries_it_changed_and_a_later_line_wins(tmp_path: Path) -> None:
    files = MemoryRoot(tmp_path)
    files.record_learning([LearningUpdate(p, keys=("k",)) for p in ("a.md", "b.md")])
    before = (tmp_path / LEARNED_PATH).read_bytes()
    inode = os.stat(tmp_path / LEARNED_PATH).st_ino
    next_millisecond()
    files.record_learning([LearningUpdate("a.md", keys=("more",))])
    after = (tmp_path / LEARNED_PATH).read_bytes()
    assert after.startswith(before) and os.stat(tmp_path / LEARNED_PATH).st_ino == inode
    (appended,) = after[len(before) :].splitlines()
    assert json.loads(appended)["path"] == "a.md"
    entries, problems = MemoryRoot(tmp_path).read_learning()  # a reader with nothing kept
    assert problems == [] and [k.term for k in entries["a.md"].keys] == ["more", "k"]  # the most recent first
    assert [k.term for k in entries["b.md"].keys] == ["k"]


def test_the_log_is_compacted_once_superseded_lines_are_half_of_it(tmp_path: Path) -> None:
    files = MemoryRoot(tmp_path)
    log = tmp_path / LEARNED_PATH
    files.record_learning([LearningUpdate("a.md", keys=("k",))])
    sizes = []
    for i in range(3000):  # each line supersedes the one before: the log passes COMPACT_MIN_BYTES
        files.record_learning([LearningUpdate("a.md", keys=(f"t{i}",))])
        sizes.append(log.stat().st_size)
    shrunk = [i for i in range(1, len(sizes)) if sizes[i] < sizes[i - 1]]
    assert shrunk and all(sizes[i - 1] > COMPACT_MIN_BYTES - 16 * 1024 for i in shrunk)  # only near the limit
    assert max(sizes) <= COMPACT_MIN_BYTES + 16 * 1024  # never far past it: one entry is under 16 KiB
    assert len(lines(tmp_path)) < len(sizes) - shrunk[-1] + 1  # at most the lines appended since
    (entry,) = MemoryRoot(tmp_path).read_learning()[0].values()
    assert sorted(entry.learned.keys) == sorted(files.read_learning()[0]["a.md"].learned.keys)
    assert len(entry.keys) == MAX_LEARNED_KEYS


def test_forgetting_a_memory_compacts_the_file_so_its_words_are_gone(tmp_path: Path) -> None:
    files = MemoryRoot(tmp_path)
    files.record_learning([LearningUpdate("a.md", keys=("secretproject",)), LearningUpdate("b.md", keys=("k",))])
    files.record_learning([LearningUpdate("a.md", keys=("again",))])
    assert files.clear_learning(["a.md"]) == 1
    assert b"secretproject" not in (tmp_path / LEARNED_PATH).read_bytes()
    assert [o["path"] for o in lines(tmp_path)] == ["b.md"]
    files.record_learning([LearningUpdate("b.md", keys=("x",))], live_paths=["c.md"])  # b.md was deleted
    assert (tmp_path / LEARNED_PATH).read_bytes() == b""


def test_another_writers_tail_is_read_on_its_own_and_unchanged_entries_stay_the_same(tmp_path: Path) -> None:
    mine = MemoryRoot(tmp_path)
    mine.record_learning([LearningUpdate(p, keys=("k",)) for p in ("a.md", "b.md")])
    first = mine.read_learning()[0]
    next_millisecond()
    MemoryRoot(tmp_path).record_learning([LearningUpdate("b.md", keys=("theirs",))])  # appended by another
    again = mine.read_learning()[0]
    assert again["a.md"] is first["a.md"]  # the earlier lines were not read again
    assert [k.term for k in again["b.md"].keys] == ["theirs", "k"]


def test_a_file_replaced_or_cut_short_by_someone_else_is_read_whole(tmp_path: Path) -> None:
    mine = MemoryRoot(tmp_path)
    mine.record_learning([LearningUpdate(p, keys=("k",)) for p in ("a.md", "b.md")])
    mine.read_learning()
    log = tmp_path / LEARNED_PATH
    kept = log.read_bytes().splitlines(keepends=True)[1]
    with log.open("r+b") as same_inode:
        same_inode.truncate(0)
        same_inode.write(kept)  # shorter than what was read: never taken for a tail
    assert sorted(mine.read_learning()[0]) == [json.loads(kept)["path"]]
    replacement = tmp_path / "elsewhere.jsonl"
    replacement.write_text(json.dumps({"path": "c.md", "keys": [["k", 1, 1]]}) * 1 + "\n" + kept.decode() * 3)
    os.replace(replacement, log)  # another inode, though longer
    assert sorted(mine.read_learning()[0]) == sorted({"c.md", json.loads(kept)["path"]})


def test_a_last_line_without_its_newline_is_read_and_the_next_update_ends_it(tmp_path: Path) -> None:
    write(tmp_path / LEARNED_PATH, json.dumps({"path": "a.md", "keys": [["k", 1, 1]]}))  # edited by hand
    files = MemoryRoot(tmp_path)
    assert list(files.read_learning()[0]) == ["a.md"]
    files.record_learning([LearningUpdate("b.md", keys=("k",))])
    assert sorted(o["path"] for o in lines(tmp_path)) == ["a.md", "b.md"]
    assert (tmp_path / LEARNED_PATH).read_bytes().endswith(b"\n")


_WRITER = """
import sys
from memory_store import LearningUpdate, MemoryRoot
root, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.stdin.read()  # start together
files = MemoryRoot(root)
for i in range(count):
    files.record_learning([LearningUpdate(f"{name}-{i}.md", keys=(f"k{i}",))])
"""


def test_concurrent_writers_keep_each_others_entries(tmp_path: Path) -> None:
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), f"w{n}", "30"], stdin=subprocess.PIPE, text=True)
        for n in range(3)
    ]
    for writer in writers:
        writer.stdin.close()  # type: ignore[union-attr]
    assert [writer.wait(timeout=60) for writer in writers] == [0, 0, 0]
    entries, problems = MemoryRoot(tmp_path).read_learning()
    assert problems == [] and sorted(entries) == sorted(f"w{n}-{i}.md" for n in range(3) for i in range(30))


# --- the store -----------------------------------------------------------------------------------


def test_docs_carry_what_was_learned_for_their_path_and_none_without(root: Path) -> None:
    write(root / "a.md", memory(name="A"))
    write(root / "b.md", memory(name="B"))
    MemoryRoot(root).record_learning([LearningUpdate("a.md", keys=("ship",), suppress=frozenset({"tea"}))] * 2)
    snapshot = scan(root)
    assert snapshot.docs["mem/a.md"].learned == Learned(("ship",), (frozenset({"tea"}),))
    assert snapshot.docs["mem/b.md"].learned is None
    assert snapshot.learned() == {"mem/a.md": Learned(("ship",), (frozenset({"tea"}),))}
    assert scan(root, learned=False).docs["mem/a.md"].learned is None


def test_a_store_that_is_not_watching_shows_its_own_learning_at_once(root: Path) -> None:
    write(root / "a.md", memory())
    write(root / "gone.md", memory())
    MemoryRoot(root).record_learning([LearningUpdate("gone.md", keys=("old",))])
    (root / "gone.md").unlink()
    seen: list[int] = []
    with MemoryStore.open(root, watch=False) as store:
        store.subscribe(lambda s: seen.append(s.version))
        store.record_learning("mem", [LearningUpdate("a.md", keys=("ship",))])
        snapshot = store.snapshot()
        assert snapshot.version == 2 and snapshot.changed == {"mem/a.md"} and seen == [2]
        assert snapshot.docs["mem/a.md"].learned == Learned(("ship",))
        assert sorted(store.learned_entries("mem")) == ["a.md"]  # the deleted memory's entry was pruned
        MemoryRoot(root).record_learning([LearningUpdate("a.md", keys=("deploy",))])  # another writer
        assert store.refresh_learned().docs["mem/a.md"].learned == Learned(("deploy", "ship"))
        assert store.refresh_learned().version == 3  # nothing changed: no new version
        assert store.clear_learning() == 1
        assert store.snapshot().docs["mem/a.md"].learned is None


def test_a_store_reads_only_what_changed_and_everything_once_it_lost_track(root: Path) -> None:
    for name in ("a", "b", "c"):
        write(root / f"{name}.md", memory(name))
    with MemoryStore.open(root, watch=False) as store:
        files = store.root("mem")  # the store's own: its kept parse is the one the store reads from
        store.record_learning("mem", [LearningUpdate("a.md", keys=("one",))])
        before = store.snapshot()
        files.record_learning([LearningUpdate("b.md", keys=("two",))])  # not re-read by the store yet
        after = store.refresh_learned()
        assert after.changed == {"mem/b.md"} and after.docs["mem/a.md"] is before.docs["mem/a.md"]
        for i in range(MAX_KEPT_CHANGES + 5):  # more changes than the kept parse can tell
            files.record_learning([LearningUpdate("c.md" if i % 2 else "a.md", keys=(f"k{i}",))])
        files.clear_learning(["b.md"])
        late = store.refresh_learned()
        assert late.changed == {"mem/a.md", "mem/b.md", "mem/c.md"}
        assert late.docs["mem/b.md"].learned is None
        assert late.docs["mem/c.md"].learned is not None and "k1" in late.docs["mem/c.md"].learned.keys
        assert {ref: doc.learned for ref, doc in late.docs.items()} == {
            ref: doc.learned for ref, doc in scan(root).docs.items()
        }


def test_clear_learning_of_one_root_and_one_path(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    for folder in (root, other):
        write(folder / "a.md", memory())
        write(folder / "b.md", memory())
        MemoryRoot(folder).record_learning([LearningUpdate(p, keys=("k",)) for p in ("a.md", "b.md")])
    with MemoryStore.open(root, other, watch=False) as store:
        assert store.clear_learning("mem", ["a.md"]) == 1
        assert store.clear_learning("other") == 2
        assert sorted(store.snapshot().learned()) == ["mem/b.md"]
        with pytest.raises(MemoryStoreError, match="unknown root"):
            store.clear_learning("nope")


def test_learned_keys_survive_an_edit_and_a_watched_store_republishes_only_the_changed_doc(
    root: Path, open_store: Open
) -> None:
    write(root / "a.md", memory(name="A"))
    write(root / "b.md", memory(name="B"))
    store = open_store(root)
    b_doc = store.snapshot().docs["mem/b.md"]
    store.record_learning("mem", [LearningUpdate("a.md", keys=("ship",))])
    snapshot = wait_until(store, lambda s: s.docs["mem/a.md"].learned is not None)
    assert snapshot.changed == {"mem/a.md"} and snapshot.docs["mem/b.md"] is b_doc
    write(root / "a.md", memory(name="A edited"))
    snapshot = wait_until(store, lambda s: s.docs["mem/a.md"].name == "A edited")
    assert snapshot.docs["mem/a.md"].learned == Learned(("ship",))
    (root / LEARNED_PATH).unlink()
    snapshot = wait_until(store, lambda s: s.docs["mem/a.md"].learned is None)
    assert snapshot.changed == {"mem/a.md"}


def test_a_watched_store_reports_a_corrupt_learned_file_then_clears_it(root: Path, open_store: Open) -> None:
    write(root / "a.md", memory())
    store = open_store(root)
    write(root / LEARNED_PATH, "not json\n")
    wait_until(store, lambda s: [e.ref for e in s.errors] == ["mem/.recall-kit/learned.jsonl:1"])
    MemoryRoot(root).record_learning([LearningUpdate("a.md", keys=("k",))])
    snapshot = wait_until(store, lambda s: s.docs["mem/a.md"].learned is not None)
    assert snapshot.errors == ()


def test_a_store_without_learning_ignores_the_file(root: Path, open_store: Open) -> None:
    write(root / "a.md", memory())
    store = open_store(root, learned=False)
    MemoryRoot(root).record_learning([LearningUpdate("a.md", keys=("k",))])
    write(root / "b.md", memory())  # a later event to wait on
    snapshot = wait_until(store, lambda s: "mem/b.md" in s.docs)
    assert snapshot.docs["mem/a.md"].learned is None


class _Cache:
    """A caller's cache handing the store deferred docs."""

    def __init__(self, root: Path) -> None:
        self.docs = {str(doc.abspath): doc for doc in scan(root, learned=False).docs.values()}

    def reuse(self, abspath: str, info: os.stat_result) -> DeferredDoc[MemoryDoc] | None:
        doc = self.docs.get(abspath)
        return None if doc is None else DeferredDoc(doc.content_hash, lambda d: d, doc)


def test_deferred_docs_carry_learned_keys_without_being_built(root: Path) -> None:
    write(root / "a.md", memory())
    MemoryRoot(root).record_learning([LearningUpdate("a.md", keys=("ship",))])
    snapshot = scan(root, reuse=_Cache(root).reuse)
    stored = snapshot.docs.stored("mem/a.md")  # type: ignore[attr-defined]
    assert isinstance(stored, DeferredDoc) and not stored.built and stored.learned == Learned(("ship",))
    assert snapshot.learned() == {"mem/a.md": Learned(("ship",))} and not stored.built
    assert snapshot.docs["mem/a.md"].learned == Learned(("ship",))


def test_the_index_cache_codec_never_keeps_learned_keys(root: Path) -> None:
    write(root / "a.md", memory())
    MemoryRoot(root).record_learning([LearningUpdate("a.md", keys=("ship",))])
    doc = scan(root).docs["mem/a.md"]
    assert doc.learned is not None
    assert decode_doc(encode_doc(doc)).learned is None


def test_a_watched_store_prunes_by_the_memories_it_shows_now(root: Path, open_store: Open) -> None:
    write(root / "a.md", memory())
    store = open_store(root)
    store.record_learning("mem", [LearningUpdate("a.md", keys=("first",))])
    write(root / "new.md", memory())
    wait_until(store, lambda s: "mem/new.md" in s.docs)
    store.record_learning("mem", [LearningUpdate("new.md", keys=("later",))])
    assert sorted(store.learned_entries("mem")) == ["a.md", "new.md"]
    (root / "a.md").unlink()
    wait_until(store, lambda s: "mem/a.md" not in s.docs)
    store.record_learning("mem", [])
    assert sorted(store.learned_entries("mem")) == ["new.md"]
