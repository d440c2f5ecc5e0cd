"""The persistent index cache: a hit equals a fresh build, changes are picked up, bad files are rebuilt."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memory_store import DeferredDoc
from recall_kit import open_indexed
from recall_kit._cache_file import _MAGIC, _SIZES_LINE, _SIZES_LEN, _VERSION_LINE, aligned as _aligned, load as _load

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "memories"
QUERIES = ["deploy to kubernetes with helm", "python tooling uv ruff", "postgres migrations", "sourdough"]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLES, tmp_path / "memories"))


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def rankings(indexed) -> list[list[tuple[str, float]]]:
    return [[(s.doc.ref, s.score) for s in indexed.heuristic.rank(q)[0]] for q in QUERIES]


def assert_same_as_fresh(indexed, store: Path) -> None:
    fresh = open_indexed([store], use_cache=False)
    assert dict(indexed.snapshot.docs) == dict(fresh.snapshot.docs)
    assert rankings(indexed) == rankings(fresh)


def cache_file(cache_dir: Path) -> Path:
    (path,) = cache_dir.glob("index-*.bin")
    return path


def test_cache_hit_reads_no_file_and_ranks_like_a_fresh_build(store: Path, cache_dir: Path) -> None:
    first = open_indexed([store], cache_dir=cache_dir)
    second = open_indexed([store], cache_dir=cache_dir)
    assert first.reused == 0
    assert second.reused == len(second.snapshot.docs) > 20
    assert rankings(first)[0]  # the queries do match something
    assert_same_as_fresh(second, store)


def test_changed_added_and_deleted_files_are_picked_up(store: Path, cache_dir: Path) -> None:
    n = len(open_indexed([store], cache_dir=cache_dir).snapshot.docs)
    changed = next(store.rglob("*.md"))
    while changed.name == "MEMORY.md":
        changed = next(p for p in store.rglob("*.md") if p.name != "MEMORY.md")
    changed.write_text(changed.read_text().replace("---\n\n", "---\nsourdough starter\n", 1) + "\nsourdough starter\n")
    info = changed.stat()
    os.utime(changed, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
    deleted = next(p for p in store.rglob("*.md") if p.name != "MEMORY.md" and p != changed)
    deleted.unlink()
    (store / "added.md").write_text("---\nname: Bread\ndescription: sourdough starter feeding\ntype: user\n---\nrye\n")
    again = open_indexed([store], cache_dir=cache_dir)
    assert again.reused == n - 2
    refs = set(again.snapshot.docs)
    assert "memories/added.md" in refs and f"memories/{deleted.relative_to(store)}" not in refs
    assert_same_as_fresh(again, store)
    assert rankings(again)[3][0][0] in {"memories/added.md", f"memories/{changed.relative_to(store)}"}
    assert open_indexed([store], cache_dir=cache_dir).reused == n  # the update was saved


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flipped(data: bytes) -> bytes:  # in the sections: found by the check that runs beside the scan
    return data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:]


def _flipped_in_table(data: bytes) -> bytes:  # found before the table is read
    at = len(_MAGIC) + len(_VERSION_LINE) + _SIZES_LEN + 40
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


def _foreign_version(data: bytes) -> bytes:
    return data.replace(_MAGIC + _VERSION_LINE, _MAGIC + b"999 py9.9 marshal9\n", 1)


@pytest.mark.parametrize(
    "damage", [_truncated, _flipped, _flipped_in_table, _foreign_version, lambda data: b"", lambda data: os.urandom(4096)]
)
def test_a_damaged_or_foreign_cache_is_ignored_and_rebuilt(store: Path, cache_dir: Path, damage) -> None:
    open_indexed([store], cache_dir=cache_dir)
    path = cache_file(cache_dir)
    path.write_bytes(damage(path.read_bytes()))
    rebuilt = open_indexed([store], cache_dir=cache_dir)
    assert rebuilt.reused == 0
    assert_same_as_fresh(rebuilt, store)
    assert open_indexed([store], cache_dir=cache_dir).reused == len(rebuilt.snapshot.docs)


def write_checksummed(path: Path, table: object, raw: bytes) -> None:
    """A cache file whose header and CRC check out, holding ``table`` and ``raw`` as given."""
    import marshal
    import zlib

    start = len(_MAGIC) + len(_VERSION_LINE) + _SIZES_LEN
    packed = marshal.dumps(table)
    sections = bytes(_aligned(start + len(packed)) - start - len(packed)) + raw
    sizes = _SIZES_LINE.format(table_crc=zlib.crc32(packed), crc=zlib.crc32(sections), table=len(packed)).encode()
    path.write_bytes(_MAGIC + _VERSION_LINE + sizes + packed + sections)


def test_a_checksummed_payload_of_the_wrong_shape_is_ignored(store: Path, cache_dir: Path) -> None:
    open_indexed([store], cache_dir=cache_dir)
    write_checksummed(cache_file(cache_dir), {"files": {str(store / "x.md"): ("a", "b")}, "index": {"refs": 3}}, b"")
    rebuilt = open_indexed([store], cache_dir=cache_dir)
    assert rebuilt.reused == 0
    assert_same_as_fresh(rebuilt, store)


def test_offsets_outside_the_file_are_never_followed(store: Path, cache_dir: Path) -> None:
    open_indexed([store], cache_dir=cache_dir)
    path = cache_file(cache_dir)
    loaded = _load(path)
    assert loaded is not None and loaded.check.passed()
    table, raw = loaded.table, loaded.sections
    some = sorted(table["files"])[:3]
    for abspath in some:  # blobs past the end, before the start, or of a negative length
        entry = table["files"][abspath]
        table["files"][abspath] = (*entry[:5], [(len(raw), 10), (-5, 3), (0, -1)][some.index(abspath)])
    table["arrays"]["term_docs"] = (len(raw) - 4, 64)  # the index's postings cut short
    write_checksummed(path, table, bytes(raw))
    rebuilt = open_indexed([store], cache_dir=cache_dir)
    assert rebuilt.reused == len(rebuilt.snapshot.docs) - 3  # those three files were read
    assert_same_as_fresh(rebuilt, store)


def test_a_hit_builds_only_the_docs_a_query_looks_at(store: Path, cache_dir: Path) -> None:
    open_indexed([store], cache_dir=cache_dir)
    hit = open_indexed([store], cache_dir=cache_dir)
    docs = hit.snapshot.docs
    stored = [docs.stored(ref) for ref in docs]  # type: ignore[attr-defined]
    assert all(isinstance(doc, DeferredDoc) and not doc.built for doc in stored)
    ranked = hit.heuristic.rank(QUERIES[0])[0]
    assert ranked and {s.doc.ref for s in ranked} == {ref for ref, doc in zip(docs, stored) if doc.built}


def test_processes_writing_at_once_leave_one_valid_cache(store: Path, cache_dir: Path) -> None:
    code = "import sys; from recall_kit import open_indexed; open_indexed([sys.argv[1]], cache_dir=sys.argv[2])"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(store), str(cache_dir)]) for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    assert sorted(p.suffix for p in cache_dir.iterdir()) == [".bin", ".lock", ".used"]  # no temp file left
    hit = open_indexed([store], cache_dir=cache_dir)
    assert hit.reused == len(hit.snapshot.docs)
    assert_same_as_fresh(hit, store)


def test_no_cache_neither_reads_nor_writes_the_cache(store: Path, cache_dir: Path) -> None:
    bypassed = open_indexed([store], use_cache=False, cache_dir=cache_dir)
    assert bypassed.cache_file is None and not cache_dir.exists()


def test_cache_dir_defaults_to_the_environment_variable(store: Path, cache_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("RECALL_KIT_CACHE_DIR", str(cache_dir))
    indexed = open_indexed([store])
    assert indexed.cache_file is not None and indexed.cache_file.parent == cache_dir
    assert cache_file(cache_dir).stat().st_mode & 0o077 == 0  # private to the user


def test_a_sidecar_changed_under_unchanged_files_is_picked_up(store: Path, cache_dir: Path) -> None:
    from memory_store import EnrichmentEntry, sidecar_path, write_enrichment

    target = next(p for p in sorted(store.rglob("*.md")) if p.name != "MEMORY.md")
    rel = target.relative_to(store).as_posix()
    sha = __import__("hashlib").sha256(target.read_bytes()).hexdigest()
    scenario_file = store / "user" / "scenarios.md"
    scenario_file.parent.mkdir(exist_ok=True)
    scenario_file.write_text("---\nname: n\ndescription: d\ntype: user\nusage_scenarios: [when the espresso machine leaks]\n---\n")
    first = open_indexed([store], cache_dir=cache_dir)
    assert first.heuristic.rank("zanzibar quokka")[0] == ()
    write_enrichment(sidecar_path(store), [EnrichmentEntry(rel, sha, ("zanzibar", "quokka"), ())])
    second = open_indexed([store], cache_dir=cache_dir)
    assert [s.doc.path for s in second.heuristic.rank("zanzibar quokka")[0]][:1] == [rel]
    assert second.reused == len(second.snapshot.docs) - 1  # only the newly enriched doc was re-analysed
    assert second.snapshot.docs["memories/user/scenarios.md"].usage_scenarios == ("when the espresso machine leaks",)
    assert_same_as_fresh(second, store)
    third = open_indexed([store], cache_dir=cache_dir)
    assert third.reused == len(third.snapshot.docs)
    assert_same_as_fresh(third, store)
