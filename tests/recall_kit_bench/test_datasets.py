"""The shipped datasets are valid and meet their minimum sizes; the validator catches bad data."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from memory_store import MEMORY_TYPES, EnrichmentEntry, parse_memory, sidecar_path, write_enrichment
from recall_kit_bench import DatasetError, load_dataset, memory_text, write_eval_dataset

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "memories"
AGENT = REPO / "bench" / "datasets" / "agent-memories"
MULTILINGUAL = REPO / "bench" / "datasets" / "multilingual"


def _load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_datasets", REPO / "bench" / "check_datasets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


checker = _load_checker()


def _queries(folder: Path) -> list[dict[str, object]]:
    lines = (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_a_written_dataset_reads_back_as_written(tmp_path: Path) -> None:
    # YAML would read these unquoted as a list, a comment and a key: the writer quotes them
    name, description = "[draft] cache notes", "Fixed it: the cache # was stale"
    queries = [("q1", "why was the cache stale?", ["notes/cache.md"], "lexical"), ("q2", "sourdough", [], "negative")]
    dataset = load_dataset(write_eval_dataset(tmp_path / "mini", {"notes/cache.md": (name, description, "Flush it.")}, queries))
    assert dataset.snapshot.errors == ()
    doc = dataset.snapshot.docs["memories/notes/cache.md"]
    assert (doc.name, doc.description, doc.type, doc.body) == (name, description, "project", "Flush it.\n")
    assert [(q.id, q.query, q.relevant, q.kind) for q in dataset.queries] == [
        ("q1", "why was the cache stale?", frozenset({"memories/notes/cache.md"}), "lexical"),
        ("q2", "sourdough", frozenset(), "negative"),
    ]


@pytest.mark.parametrize("folder", [EXAMPLES, AGENT, MULTILINGUAL], ids=lambda p: p.name)
def test_dataset_folder_passes_validator(folder: Path) -> None:
    report = checker.check_path(folder)
    assert report.problems == []


def test_example_store_has_twenty_memories_of_every_type_and_an_index() -> None:
    memories = checker.load_store(EXAMPLES, checker.Report())
    assert len(memories) >= 20
    assert {m.type for m in memories.values()} == MEMORY_TYPES
    assert (EXAMPLES / "MEMORY.md").is_file()
    assert {path.split("/")[1] for path in memories if path.startswith("projects/")} >= {"ledgerline", "tidepool"}


def test_agent_memories_meets_issue_minimums() -> None:
    report = checker.check_path(AGENT)
    queries = _queries(AGENT)
    kinds = Counter(str(q["kind"]) for q in queries)
    assert report.memories >= 60
    assert len(queries) >= 220
    assert set(kinds) == {"lexical", "paraphrase", "typo", "multi", "semantic", "negative"}
    assert 0.18 <= kinds["negative"] / len(queries) <= 0.30
    assert kinds["semantic"] >= 20 and kinds["multi"] >= 30 and kinds["typo"] >= 30
    assert all(len(q["relevant"]) == 2 for q in queries if q["kind"] == "multi")


def test_agent_memories_has_near_duplicate_topics_across_projects() -> None:
    projects = {p.parent.name for p in (AGENT / "memories" / "projects").rglob("*.md")}
    assert len(projects) >= 4
    for topic in ("database", "deploy", "ci", "running-tests"):
        twins = list((AGENT / "memories" / "projects").glob(f"*/{topic}.md"))
        assert len(twins) >= 2, topic


def test_multilingual_meets_issue_minimums() -> None:
    report = checker.check_path(MULTILINGUAL)
    queries = _queries(MULTILINGUAL)
    kinds = Counter(str(q["kind"]) for q in queries)
    negatives = [str(q["query"]).strip() for q in queries if q["kind"] == "negative"]
    assert report.memories >= 20
    assert len(queries) >= 50
    assert {"zh", "ja", "ko", "mixed", "fullwidth", "negative"} <= set(kinds)
    assert len(negatives) >= 10
    assert any(len(q) == 1 and checker.CJK.match(q) for q in negatives), "a lone CJK character"
    assert any(len(q) == 2 and q.isascii() and q.isalpha() for q in negatives), "a two-letter word"


def _write_dataset(root: Path, queries: list[dict[str, object]]) -> Path:
    memory = root / "memories" / "projects" / "deploy.md"
    memory.parent.mkdir(parents=True)
    memory.write_text(
        "---\nname: Deploying the app\ndescription: Run fly deploy from main\ntype: project\n---\n"
        "Use the staging app first.\n",
        encoding="utf-8",
    )
    lines = "".join(json.dumps(q) + "\n" for q in queries)
    (root / "queries.jsonl").write_text(lines, encoding="utf-8")
    return root


def test_validator_rejects_semantic_query_sharing_a_stemmed_word(tmp_path: Path) -> None:
    folder = _write_dataset(tmp_path, [
        {"id": "s1", "query": "ship it by deploying", "relevant": ["projects/deploy.md"], "kind": "semantic"},
    ])
    problems = checker.check_path(folder).problems
    assert len(problems) == 1 and "deploy" in problems[0]


def test_validator_rejects_missing_path_duplicate_id_and_unknown_kind(tmp_path: Path) -> None:
    folder = _write_dataset(tmp_path, [
        {"id": "q1", "query": "fly deploy", "relevant": ["projects/nope.md"], "kind": "lexical"},
        {"id": "q1", "query": "other", "relevant": [], "kind": "negative"},
        {"id": "q2", "query": "x", "relevant": [], "kind": "vibes"},
    ])
    problems = "\n".join(checker.check_path(folder).problems)
    assert "nope.md" in problems and "queries.jsonl:2: the id 'q1' is given twice" in problems and "vibes" in problems


def test_validator_rejects_memory_with_unknown_type(tmp_path: Path) -> None:
    bad = tmp_path / "note.md"
    bad.write_text("---\nname: n\ndescription: d\ntype: diary\n---\nbody\n", encoding="utf-8")
    problems = checker.check_path(tmp_path).problems
    assert any("note.md" in p and "diary" in p for p in problems)


def test_validator_exits_non_zero_on_a_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _write_dataset(tmp_path, [
        {"id": "n1", "query": "hello", "relevant": ["projects/deploy.md"], "kind": "negative"},
    ])
    assert checker.main([str(folder)]) == 1
    assert "PROBLEM" in capsys.readouterr().out


def test_validator_reads_memories_as_the_store_does(tmp_path: Path) -> None:
    # an unquoted ": " in a description is not strict YAML, but the store loads it: so must the checker
    (tmp_path / "note.md").write_text(
        "---\nname: Cache\ndescription: Fixed it: the cache was stale\ntype: project\n---\nbody\n", encoding="utf-8"
    )
    (tmp_path / "empty.md").write_text("---\nname: e\ndescription: d\ntype: user\n---\n\n", encoding="utf-8")
    report = checker.check_path(tmp_path)
    assert report.memories == 1
    assert len(report.problems) == 1 and "empty.md" in report.problems[0] and "empty body" in report.problems[0]


def _enriched_mini(root: Path) -> Path:
    """A small dataset with a sidecar for one memory, an author keyword and a file the store skips."""
    memories = {"db/cache.md": ("Cache notes", "the cache is Redis", "Flush with care."),
                "tea.md": ("Tea", "green tea at four", "Sencha.")}
    dataset = write_eval_dataset(root, memories, [("q1", "purge the key-value store", ["db/cache.md"], "semantic")])
    cache = dataset / "memories" / "db" / "cache.md"
    cache.write_text(cache.read_text(encoding="utf-8").replace("type: project\n", "type: project\nkeywords: [redis]\nowner: priya\n"))
    (dataset / "memories" / "broken.md").write_text("no frontmatter here\n", encoding="utf-8")
    entry = EnrichmentEntry("db/cache.md", hashlib.sha256(cache.read_bytes()).hexdigest(),
                            ("key-value store", "redis"), ("purge the key-value store",), "test")
    write_enrichment(sidecar_path(dataset / "memories"), [entry])
    return dataset


def test_frontmatter_placement_reads_the_sidecars_words_from_each_memorys_own_frontmatter(tmp_path: Path) -> None:
    dataset = _enriched_mini(tmp_path / "mini")
    before = {path: path.read_bytes() for path in (dataset / "memories").rglob("*") if path.is_file()}
    side = load_dataset(dataset)
    front = load_dataset(dataset, placement="frontmatter")
    assert front.root == dataset and [q.id for q in front.queries] == ["q1"]
    doc, was = front.snapshot.docs["memories/db/cache.md"], side.snapshot.docs["memories/db/cache.md"]
    assert was.enrichment is not None and doc.enrichment is None  # no sidecar read: the words are the file's
    assert doc.keywords == ("redis", "key-value store")  # its own first, each once
    assert doc.usage_scenarios == ("purge the key-value store",)
    assert (doc.name, doc.description, doc.body, dict(doc.extra)) == (was.name, was.description, was.body, {"owner": "priya"})
    assert front.snapshot.docs["memories/tea.md"].keywords == ()  # no sidecar entry: the file as it was
    assert [e.path for e in front.snapshot.errors] == [e.path for e in side.snapshot.errors] == ["broken.md"]
    after = {path: path.read_bytes() for path in (dataset / "memories").rglob("*") if path.is_file()}
    assert after == before  # the dataset itself is never written


def test_frontmatter_placement_without_enrichment_reads_the_plain_memories(tmp_path: Path) -> None:
    dataset = _enriched_mini(tmp_path / "mini")
    plain = load_dataset(dataset, enrichment=False, placement="frontmatter")
    assert plain.snapshot.docs["memories/db/cache.md"].keywords == ("redis",)
    with pytest.raises(DatasetError, match="placement"):
        load_dataset(dataset, placement="body")  # type: ignore[arg-type]


def test_memory_text_round_trips_through_the_store_with_the_added_words(tmp_path: Path) -> None:
    dataset = _enriched_mini(tmp_path / "mini")
    doc = load_dataset(dataset).snapshot.docs["memories/db/cache.md"]
    assert doc.enrichment is not None
    parsed = parse_memory(memory_text(doc, doc.enrichment), scope="m", path="db/cache.md")
    assert parsed.keywords == ("redis", "key-value store") and parsed.extra == {"owner": "priya"}
    assert memory_text(doc) == memory_text(doc, None) and "key-value" not in memory_text(doc)


def test_the_frontmatter_copy_never_writes_through_a_symlink_into_the_dataset(tmp_path: Path) -> None:
    dataset = _enriched_mini(tmp_path / "mini")
    memories = dataset / "memories"
    cache = memories / "db" / "cache.md"
    (memories / "alias.md").symlink_to(cache)  # absolute, inside the root: the copy keeps it pointing here
    entries = [EnrichmentEntry(path, hashlib.sha256(cache.read_bytes()).hexdigest(), ("key-value store",), (), "t")
               for path in ("db/cache.md", "alias.md")]
    write_enrichment(sidecar_path(memories), entries)
    before = cache.read_bytes()
    front = load_dataset(dataset, placement="frontmatter")
    assert cache.read_bytes() == before and (memories / "alias.md").is_symlink()
    enriched = [doc for doc in front.snapshot.docs.values() if "key-value store" in doc.keywords]
    assert enriched  # the words reached the copy
