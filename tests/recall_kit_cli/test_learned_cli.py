"""`recall-kit learned`, `learned clear` and what `stats` counts of it, run as real subprocesses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import RunCli, assert_one_line_error, clean_environ, json_out
from store_helpers import memory, write

from memory_store import LEARNED_PATH, LearningUpdate, MemoryRoot


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Three memories; two learned something, and one entry is of a memory that is gone."""
    folder = tmp_path / "mem"
    write(folder / "deploy.md", memory(name="Deploy", description="how atlas deploys"))
    write(folder / "sub" / "tea.md", memory(name="Tea", description="green tea at four"))
    write(folder / "plain.md", memory(name="Plain"))
    files = MemoryRoot(folder)
    files.record_learning([
        LearningUpdate("deploy.md", keys=("staging", "ship"), suppress=frozenset({"general", "question"})),
        LearningUpdate("sub/tea.md", keys=("sencha",)),
        LearningUpdate("gone.md", keys=("old",)),
    ])
    files.record_learning([LearningUpdate("deploy.md", keys=("staging",), suppress=frozenset({"general", "question"}))])
    return folder  # deploy.md's suppressor, taught twice, is in effect


def test_learned_json_shows_keys_counts_times_and_suppressors_per_memory(run_cli: RunCli, root: Path) -> None:
    data = json_out(run_cli("learned", "--root", str(root), "--json"))
    assert [(m["ref"], [(k["term"], k["count"]) for k in m["keys"]], m["suppressors"]) for m in data["memories"]] == [
        ("mem/deploy.md", [("staging", 2), ("ship", 1)], 1),
        ("mem/sub/tea.md", [("sencha", 1)], 0),
    ]
    assert all(isinstance(k["seen"], float) for m in data["memories"] for k in m["keys"])
    assert data["stale_entries"] == 1 and data["problems"] == []
    assert data["roots"] == [{"scope": "mem", "path": str(root)}]


def test_learned_text_lists_each_memory_and_its_keys(run_cli: RunCli, root: Path) -> None:
    result = run_cli("learned", "--root", str(root))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"2 memories learned 3 keys, in mem ({root})"
    assert lines[1] == "  mem/deploy.md: 2 keys, 1 suppressor"
    assert lines[2].split()[:2] == ["staging", "2"] and lines[3].split()[:2] == ["ship", "1"]
    assert lines[4] == "  mem/sub/tea.md: 1 key, 0 suppressors"
    assert lines[-1] == "1 entry of memories not listed now (dropped at the next update once their file is gone; a file that fails to parse keeps its entry)"


def test_nothing_learned_says_that_learning_is_opt_in(run_cli: RunCli, tmp_path: Path) -> None:
    folder = tmp_path / "fresh"
    write(folder / "a.md", memory())
    result = run_cli("learned", "--root", str(folder))
    assert result.returncode == 0 and result.stdout.splitlines()[0] == f"nothing learned in fresh ({folder})"
    assert "opt-in" in result.stdout
    assert not (folder / ".recall-kit").exists()  # looking writes nothing


def test_a_corrupt_learned_file_is_shown_as_a_problem(run_cli: RunCli, root: Path) -> None:
    with open(root / LEARNED_PATH, "a") as handle:
        handle.write("{broken\n")
    data = json_out(run_cli("learned", "--root", str(root), "--json"))
    assert len(data["memories"]) == 2
    assert [p.split(": ", 1)[1] for p in data["problems"]] == ["not valid JSON"]


def test_clear_one_memory_by_ref_or_path_then_all(run_cli: RunCli, root: Path) -> None:
    result = run_cli("learned", "clear", "mem/deploy.md", "--root", str(root))
    assert (result.returncode, result.stdout) == (0, "forgot what was learned for mem/deploy.md\n"), result.stderr
    assert sorted(MemoryRoot(root).read_learning()[0]) == ["gone.md", "sub/tea.md"]
    again = run_cli("learned", "--root", str(root), "clear", "mem/deploy.md")  # the group's --root counts too
    assert again.stdout == "nothing was learned for mem/deploy.md\n"
    result = run_cli("learned", "clear", "sub/tea.md", "--root", str(root))
    assert result.stdout == "forgot what was learned for mem/sub/tea.md\n"
    result = run_cli("learned", "clear", "--root", str(root))
    assert result.stdout == "forgot what was learned for 1 memory\n"
    assert MemoryRoot(root).read_learning() == ({}, [])


def test_clear_an_unknown_ref_is_one_line_and_exit_2(run_cli: RunCli, root: Path) -> None:
    before = (root / LEARNED_PATH).read_bytes()
    assert_one_line_error(run_cli("learned", "clear", "mem/nope.md", "--root", str(root)), "no memory 'mem/nope.md'")
    assert (root / LEARNED_PATH).read_bytes() == before


def test_clear_through_a_symlinked_sidecar_folder_is_refused_in_one_line(
    run_cli: RunCli, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    (root / ".recall-kit").rename(outside)
    (root / ".recall-kit").symlink_to(outside, target_is_directory=True)
    before = (outside / "learned.jsonl").read_bytes()
    assert_one_line_error(run_cli("learned", "clear", "--root", str(root)), ".recall-kit is a symlink")
    assert (outside / "learned.jsonl").read_bytes() == before


def test_stats_counts_memories_with_learned_keys_keys_and_suppressors(run_cli: RunCli, root: Path) -> None:
    data = json_out(run_cli("stats", "--root", str(root), "--json"))
    assert data["learned"] == {"memories": 2, "keys": 3, "suppressors": 1}
    text = run_cli("stats", "--root", str(root)).stdout
    assert "learned: 2/3 memories, 3 keys, 1 suppressors" in text
    run_cli("learned", "clear", "--root", str(root))
    assert json_out(run_cli("stats", "--root", str(root), "--json"))["learned"] == {
        "memories": 0, "keys": 0, "suppressors": 0
    }


def test_learned_json_is_one_object_even_when_terms_are_odd(run_cli: RunCli, root: Path) -> None:
    MemoryRoot(root).record_learning([LearningUpdate("plain.md", keys=("naïve", "日本語", "a\"b", "<b>"))])
    data = json_out(run_cli("learned", "--root", str(root), "--json"))
    plain = next(m for m in data["memories"] if m["ref"] == "mem/plain.md")
    assert sorted(k["term"] for k in plain["keys"]) == sorted(["naïve", "日本語", "a\"b"])  # markup is never a term
    assert json.loads(run_cli("learned", "--root", str(root), "--json").stdout) == data


def test_clear_takes_the_word_out_of_the_index_caches_that_hold_the_root(run_cli: RunCli, root: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = clean_environ(RECALL_KIT_CACHE_DIR=str(cache))
    other = tmp_path / "other"
    write(other / "x.md", memory(name="Other"))
    for folder in (root, other):
        assert run_cli("query", "staging deploy", "--root", str(folder), "--fast-only", env=env).returncode == 0
    holding = [path for path in cache.glob("index-*.bin") if b"sencha" in path.read_bytes()]
    assert len(holding) == 1 and len(list(cache.glob("index-*.bin"))) == 2
    result = run_cli("learned", "clear", "--root", str(root), env=env)
    assert result.returncode == 0, result.stderr
    assert not [path for path in cache.glob("index-*.bin") if b"sencha" in path.read_bytes()]
    assert len(list(cache.glob("index-*.bin"))) == 1  # the other root set's cache stays


def test_rm_takes_the_memorys_learned_words_off_the_disk_and_out_of_the_caches(
    run_cli: RunCli, root: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    env = clean_environ(RECALL_KIT_CACHE_DIR=str(cache))
    assert run_cli("query", "green tea", "--root", str(root), "--fast-only", env=env).returncode == 0
    assert [path for path in cache.glob("index-*.bin") if b"sencha" in path.read_bytes()]
    result = run_cli("rm", "mem/sub/tea.md", "--root", str(root), "--yes", env=env)
    assert result.returncode == 0, result.stderr
    assert b"sencha" not in (root / LEARNED_PATH).read_bytes()
    assert b"staging" in (root / LEARNED_PATH).read_bytes()
    assert not [path for path in cache.glob("index-*.bin") if b"sencha" in path.read_bytes()]


@pytest.mark.parametrize("seen", ["1e20", "-1e20", "1e308", "99999999999999999999999"])
def test_an_absurd_last_seen_or_count_in_the_file_is_a_clean_table_never_a_traceback(
    run_cli: RunCli, root: Path, seen: str
) -> None:
    with open(root / LEARNED_PATH, "a") as handle:
        handle.write('{"path":"plain.md","keys":[["planted",1,%s],["huge",1e20,1.0],["big",%s,1.0],["fine",2,1.0]]}\n'
                     % (seen, "9" * 40))
    result = run_cli("learned", "--root", str(root))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    plain = next(m for m in json_out(run_cli("learned", "--root", str(root), "--json"))["memories"]
                 if m["ref"] == "mem/plain.md")
    assert [(k["term"], k["count"]) for k in plain["keys"]] == [("big", 1_000_000_000), ("fine", 2)]
    assert "  mem/plain.md: 2 keys, 0 suppressors" in result.stdout.splitlines()
