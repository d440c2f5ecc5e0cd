"""Index caches do not pile up (140 files and 26 MB in one afternoon): each use is recorded, caches
unused for a month and the least recently used beyond a bound go when another is written, and
`recall-kit cache list|clear` shows and removes them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from recall_kit import open_indexed
from recall_kit.cache import list_cache_files
from recall_kit.limits import CACHE_MAX_FILES, CACHE_MAX_UNUSED_DAYS

from cli_support import assert_one_line_error, clean_environ, run_recall_kit

DAY = 86400.0


def make_root(parent: Path, name: str) -> Path:
    root = parent / name
    root.mkdir(parents=True)
    (root / "note.md").write_text(f"---\nname: {name}\ndescription: the {name} note\ntype: user\n---\nBody.\n")
    return root


def stamp_of(cache_dir: Path, root: Path) -> Path:
    (cache,) = [c for c in list_cache_files(cache_dir) if c.roots == (str(root),)]
    return cache.path.with_suffix(".used")


def age(stamp: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(stamp, (then, then))


def test_a_used_cache_records_its_use(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    root = make_root(tmp_path, "a")
    open_indexed([root], cache_dir=cache_dir)
    age(stamp_of(cache_dir, root), 10)
    assert open_indexed([root], cache_dir=cache_dir).reused == 1  # a hit: the file is not written again
    (cache,) = list_cache_files(cache_dir)
    assert time.time() - cache.last_used < 60 and cache.roots == (str(root),)


def test_writing_a_cache_removes_those_unused_for_a_month_and_the_least_recent_beyond_the_bound(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    roots = [make_root(tmp_path, f"r{i:02}") for i in range(CACHE_MAX_FILES + 2)]
    for i, root in enumerate(roots[:-1]):
        open_indexed([root], cache_dir=cache_dir)
        age(stamp_of(cache_dir, root), 1 + (CACHE_MAX_FILES - i) / 100)  # r00 the least recently used
    stale = roots[5]
    age(stamp_of(cache_dir, stale), CACHE_MAX_UNUSED_DAYS + 1)
    open_indexed([roots[-1]], cache_dir=cache_dir)
    left = {cache.roots[0] for cache in list_cache_files(cache_dir) if cache.roots}
    assert len(left) == CACHE_MAX_FILES == len(list(cache_dir.glob("index-*.bin")))
    assert str(stale) not in left and str(roots[0]) not in left  # a month unused; then the least recent
    assert {str(root) for root in roots[1:] if root != stale} == left
    assert not [p for p in cache_dir.iterdir() if p.suffix not in (".bin", ".lock", ".used")]


def test_cache_list_shows_each_cache_its_roots_size_and_last_use(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    env = clean_environ(RECALL_KIT_CACHE_DIR=str(cache_dir))
    a, b = make_root(tmp_path, "a"), make_root(tmp_path, "b")
    for roots in ([a], [a, b]):
        args = [arg for root in roots for arg in ("--root", str(root))]
        assert run_recall_kit("query", "the a note", *args, "--fast-only", cwd=tmp_path, env=env).returncode == 0
    listed = run_recall_kit("cache", "list", "--json", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    assert report["folder"] == str(cache_dir)
    assert sorted(c["roots"] for c in report["caches"]) == [[str(a)], [str(a), str(b)]]
    assert all(c["bytes"] > 0 and c["regular"] and c["last_used"] for c in report["caches"])
    text = run_recall_kit("cache", "list", cwd=tmp_path, env=env)
    lines = text.stdout.splitlines()
    assert text.returncode == 0 and lines[0].startswith(f"2 cache files, ") and lines[0].endswith(f" in {cache_dir}")
    assert sum(f"{a}, {b}" in line for line in lines[1:]) == 1 and len(lines) == 3


def test_cache_clear_removes_the_caches_of_a_root_or_all_of_them(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    env = clean_environ(RECALL_KIT_CACHE_DIR=str(cache_dir))
    a, b, c = (make_root(tmp_path, name) for name in "abc")
    for roots in ([a], [a, b], [c]):
        open_indexed(roots, cache_dir=cache_dir)
    os.mkfifo(cache_dir / ("index-" + "0" * 32 + ".bin"))  # something left at a cache's name
    (cache_dir / "index-dead.bin.x1.tmp").write_bytes(b"a writer died")

    cleared = run_recall_kit("cache", "clear", "--root", str(a), "--json", cwd=tmp_path, env=env)
    assert cleared.returncode == 0, cleared.stderr
    assert sorted(r["roots"] for r in json.loads(cleared.stdout)["removed"]) == [[str(a)], [str(a), str(b)]]
    assert [cache.roots for cache in list_cache_files(cache_dir)].count((str(c),)) == 1

    everything = run_recall_kit("cache", "clear", cwd=tmp_path, env=env)
    assert everything.returncode == 0 and everything.stdout.startswith("removed 2 cache files")
    assert list(cache_dir.iterdir()) == []
    assert open_indexed([c], cache_dir=cache_dir).reused == 0  # rebuilt when next needed


def test_cache_list_with_a_root_shows_just_what_cache_clear_with_it_removes(tmp_path: Path) -> None:
    cache_dir = tmp_path / "cache"
    env = clean_environ(RECALL_KIT_CACHE_DIR=str(cache_dir))
    a, b, c = (make_root(tmp_path, name) for name in "abc")
    for roots in ([a], [a, b], [c]):
        open_indexed(roots, cache_dir=cache_dir)
    listed = run_recall_kit("cache", "list", "--root", str(a), "--json", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert sorted(r["roots"] for r in json.loads(listed.stdout)["caches"]) == [[str(a)], [str(a), str(b)]]
    text = run_recall_kit("cache", "list", "--root", str(c), "--root", str(tmp_path / "none"), cwd=tmp_path, env=env)
    assert text.returncode == 0 and text.stdout.startswith("1 cache files, ") and len(text.stdout.splitlines()) == 2
    cleared = run_recall_kit("cache", "clear", "--root", str(a), "--json", cwd=tmp_path, env=env)
    assert json.loads(cleared.stdout)["removed"] == json.loads(listed.stdout)["caches"]
    assert [cache.roots for cache in list_cache_files(cache_dir)] == [(str(c),)]


def test_cache_commands_refuse_a_folder_others_could_swap_in_one_line(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "cache").mkdir(parents=True)
    os.chmod(shared, 0o777)
    env = clean_environ(RECALL_KIT_CACHE_DIR=str(shared / "cache"))
    for command in (["cache", "list"], ["cache", "clear"], ["cache", "list", "--json"]):
        assert_one_line_error(run_recall_kit(*command, cwd=tmp_path, env=env), "writable by others")


def test_a_bad_option_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(run_recall_kit("cache", "clear", "--bogus", cwd=tmp_path), "--bogus")
