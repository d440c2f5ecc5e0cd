"""Forgetting through the library: a memory removed, or what was learned for it cleared, leaves no
index cache holding its words (recall_kit.cache.forget_memory / forget_learning)."""

from __future__ import annotations

from pathlib import Path

from store_helpers import memory, write

from memory_store import LEARNED_PATH, LearningUpdate, MemoryStore
from recall_kit import open_recaller
from recall_kit.cache import forget_learning, forget_memory


def _cache_holding(cache: Path, word: bytes) -> list[Path]:
    return [path for path in cache.glob("index-*.bin") if word in path.read_bytes()]


def _indexed(root: Path, cache: Path) -> None:
    open_recaller([root], watch=False, cache_dir=cache).close()  # an agent's one-shot recall writes a cache


def test_forgetting_a_memory_drops_every_cache_that_holds_it(tmp_path: Path) -> None:
    root, other, cache = tmp_path / "mem", tmp_path / "other", tmp_path / "cache"
    write(root / "tea.md", memory(name="Tea", description="sencha at four"))
    write(other / "x.md", memory(name="Other"))
    _indexed(root, cache)
    _indexed(other, cache)
    assert len(_cache_holding(cache, b"sencha")) == 1
    with MemoryStore.open(root, watch=False) as store:
        forgotten = forget_memory(store, "mem/tea.md", cache_dir=cache)
    assert forgotten.caches_dropped == 1 and forgotten.cache_problem is None
    assert not (root / "tea.md").exists() and not _cache_holding(cache, b"sencha")
    assert len(list(cache.glob("index-*.bin"))) == 1  # another root set's cache stays


def test_forgetting_what_was_learned_drops_the_caches_and_a_foreign_folder_is_said_not_used(tmp_path: Path) -> None:
    root, cache = tmp_path / "mem", tmp_path / "cache"
    write(root / "tea.md", memory(name="Tea", description="green tea"))
    with MemoryStore.open(root, watch=False) as store:
        store.record_learning("mem", [LearningUpdate("tea.md", keys=("oolong",))])
    _indexed(root, cache)
    assert _cache_holding(cache, b"oolong")
    with MemoryStore.open(root, watch=False) as store:
        assert forget_learning(store, cache_dir=cache).learned_entries == 1
        assert forget_learning(store, cache_dir=cache).caches_dropped == 0  # nothing left to forget: no cache touched
    assert b"oolong" not in (root / LEARNED_PATH).read_bytes() and not _cache_holding(cache, b"oolong")
    link = tmp_path / "cache-link"
    link.symlink_to(cache)  # a cache folder that is a symlink is never used: the forgetting stands, and says so
    with MemoryStore.open(root, watch=False) as store:
        store.record_learning("mem", [LearningUpdate("tea.md", keys=("matcha",))])
        forgotten = forget_learning(store, cache_dir=link)
    assert forgotten.learned_entries == 1 and forgotten.cache_problem is not None
    assert forgotten.cache_problem.startswith("index cache not cleared: ") and "symlink" in forgotten.cache_problem


def test_a_cache_made_through_a_symlink_or_a_folder_around_the_root_is_dropped_too(tmp_path: Path) -> None:
    root, cache = tmp_path / "mem", tmp_path / "cache"
    write(root / "work" / "tea.md", memory(name="Tea", description="sencha at four"))
    write(tmp_path / "other" / "x.md", memory(name="Other"))
    (tmp_path / "link").symlink_to(root, target_is_directory=True)
    with MemoryStore.open(root, watch=False) as store:
        store.record_learning("mem", [LearningUpdate("work/tea.md", keys=("oolong",))])
    for reached in (tmp_path / "link", root / "work", tmp_path / "other"):  # the same files, by other roots
        _indexed(reached, cache)
    _indexed(root, cache)
    assert len(_cache_holding(cache, b"oolong")) == 2 and len(_cache_holding(cache, b"sencha")) == 3
    with MemoryStore.open(root, watch=False) as store:
        assert forget_learning(store, cache_dir=cache).caches_dropped == 3
        assert not _cache_holding(cache, b"oolong")
        forget_memory(store, "mem/work/tea.md", cache_dir=cache)
    assert not _cache_holding(cache, b"sencha")
    assert len(list(cache.glob("index-*.bin"))) == 1  # the other root's cache stays


def test_forgetting_removes_what_a_cache_writer_killed_mid_write_left(tmp_path: Path) -> None:
    import subprocess
    import sys

    root, cache = tmp_path / "mem", tmp_path / "cache"
    write(root / "tea.md", memory(name="Tea", description="sencha at four"))
    killed = (
        "import os, signal, sys\n"
        "from recall_kit import open_recaller\n"
        "os.replace = lambda source, target: os.kill(os.getpid(), signal.SIGKILL)  # kill -9 before the rename\n"
        "open_recaller([sys.argv[1]], watch=False, cache_dir=sys.argv[2]).close()\n"
    )
    run = subprocess.run([sys.executable, "-c", killed, str(root), str(cache)], capture_output=True, timeout=60)
    assert run.returncode == -9, run.stderr
    assert [path.name for path in cache.iterdir() if b"sencha" in path.read_bytes()]  # the cut write, words and all
    with MemoryStore.open(root, watch=False) as store:
        forget_memory(store, "mem/tea.md", cache_dir=cache)
    assert not [path.name for path in cache.iterdir() if path.is_file() and b"sencha" in path.read_bytes()]
