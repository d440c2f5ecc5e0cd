"""Delivery metrics, dataset loading and the plain baseline, on a small dataset on disk; the generated
enriched store the latency bench reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memory_store import sidecar_path
from recall_kit import FastHeuristic
from recall_kit_bench import (
    EvalQuery,
    HeadSize,
    PlainBaseline,
    QueryOutcome,
    fast_deliver,
    fold_of,
    load_dataset,
    metrics,
    metrics_by_kind,
    percentiles,
    read_generated_store,
    run,
    write_enriched_store,
)

MEMORIES = {
    "projects/db.md": (
        "Postgres for routewise",
        "routewise keeps trips in PostgreSQL behind pgbouncer",
        "Run alembic upgrade head for migrations.",
    ),
    "projects/deploy.md": (
        "Deploying routewise",
        "routewise deploys to Fly.io with flyctl",
        "flyctl deploy from main; roll back with flyctl releases.",
    ),
    "user/editor.md": ("Editor", "Neovim with lazy.nvim, tabs of width 4", "No format on save."),
}
QUERIES = [
    {"id": "q1", "query": "routewise pgbouncer postgres connection", "relevant": ["projects/db.md"], "kind": "lexical"},
    {"id": "q2", "query": "roll back a flyctl deploy of routewise", "relevant": ["projects/deploy.md"], "kind": "lexical"},
    {"id": "q3", "query": "bake sourdough bread at home", "relevant": [], "kind": "negative", "near_miss": []},
]


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    for rel, (name, description, body) in MEMORIES.items():
        file = tmp_path / "memories" / rel
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(f"---\nname: {name}\ndescription: {description}\ntype: project\n---\n{body}\n")
    (tmp_path / "memories" / "MEMORY.md").write_text("# index\n")
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    return tmp_path


def outcome(kind: str, relevant: set[str], delivered: tuple[str, ...], qid: str = "x") -> QueryOutcome:
    return QueryOutcome(EvalQuery(qid, "q", frozenset(relevant), kind), delivered, 1.0, 1.0)


def test_metrics_follow_design_section_6() -> None:
    outcomes = [
        outcome("lexical", {"a"}, ("a", "b")),  # strict hit, precision 1/2
        outcome("lexical", {"c"}, ("d",)),  # loose only
        outcome("lexical", {"e"}, ()),  # nothing
        outcome("negative", set(), ()),  # silent
        outcome("negative", set(), ("a",)),  # not silent
    ]
    m = metrics(outcomes)
    assert (m.queries, m.answerable, m.negatives) == (5, 3, 2)
    assert m.strict_delivery == pytest.approx(1 / 3)
    assert m.loose_delivery == pytest.approx(2 / 3)
    assert m.negative_silence == pytest.approx(1 / 2)
    assert m.precision == pytest.approx(1 / 4)
    by_kind = metrics_by_kind(outcomes)
    assert by_kind["negative"].strict_delivery is None and by_kind["lexical"].negative_silence is None


def test_loading_a_dataset_maps_relevant_paths_to_refs(dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    assert sorted(dataset.snapshot.docs) == [f"memories/{rel}" for rel in sorted(MEMORIES)]
    assert dataset.queries[0].relevant == frozenset({"memories/projects/db.md"})
    assert dataset.queries[2].extra == {"near_miss": []}


def test_not_a_dataset_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_dataset(tmp_path)


def test_fast_path_and_baseline_through_the_pluggable_deliver(dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    ours = metrics(run(dataset, fast_deliver(FastHeuristic(dataset.snapshot))))
    assert ours.strict_delivery == 1.0 and ours.negative_silence == 1.0
    baseline = PlainBaseline(dataset.snapshot)
    refs, wait_ms = baseline.deliver("flyctl deploy")
    assert refs[0] == "memories/projects/deploy.md" and wait_ms >= 0
    assert baseline.deliver("sourdough")[0] == []  # top 2 with a score above 0 only


def test_deliver_may_report_its_wait_without_a_fast_time(dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    outcomes = run(dataset, lambda query: (["memories/projects/db.md"], 5.0))
    assert [o.wait_ms for o in outcomes] == [5.0, 5.0, 5.0] == [o.fast_ms for o in outcomes]
    assert metrics(outcomes).strict_delivery == 0.5


def test_folds_are_stable_and_percentiles_use_nearest_rank() -> None:
    assert fold_of("lex-001", 5) == fold_of("lex-001", 5)
    assert {fold_of(f"q{i}", 5) for i in range(100)} == set(range(5))
    assert percentiles([float(i) for i in range(1, 101)]).as_dict() == {"p50": 50.0, "p99": 99.0, "max": 100.0}
    assert percentiles([]).as_dict() == {"p50": 0.0, "p99": 0.0, "max": 0.0}


def _enrichment_only_words(root: Path, snapshot_docs: dict[str, set[str]]) -> dict[str, set[str]]:
    """Single-word keywords no memory file holds -> the refs whose enrichment has them."""
    in_files = {word for file in root.rglob("*.md") for word in re.findall(r"\w+", file.read_text().lower())}
    holders: dict[str, set[str]] = {}
    for ref, keywords in snapshot_docs.items():
        for keyword in keywords:
            if " " not in keyword and keyword not in in_files:
                holders.setdefault(keyword, set()).add(ref)
    return holders


def test_generated_enrichment_reaches_the_index_through_the_sidecar(tmp_path: Path) -> None:
    write_enriched_store(tmp_path, 40)
    plain, enriched = read_generated_store(tmp_path, enrichment=False), read_generated_store(tmp_path, enrichment=True)
    assert sidecar_path(tmp_path).is_file() and set(plain.docs) == set(enriched.docs) and len(enriched.docs) == 40
    assert all(doc.enrichment is None and not doc.keywords for doc in plain.docs.values())
    assert all(doc.enrichment is not None and len(doc.enrichment.usage_scenarios) == 3 for doc in enriched.docs.values())
    holders = _enrichment_only_words(
        tmp_path, {ref: set(doc.enrichment.keywords) for ref, doc in enriched.docs.items() if doc.enrichment}
    )
    word, refs = min(holders.items(), key=lambda item: (len(item[1]), item[0]))
    heuristic = FastHeuristic(enriched)
    sidecar_path(tmp_path).unlink()  # what was read at open is in the index: no query reads the sidecar
    ranked, evidence, _ = heuristic.rank(word)
    assert {scored.doc.ref for scored in ranked} == refs
    slot = evidence[0].slots[0]
    assert slot.credit == 1.0 and slot.in_head and not slot.in_core  # matched in the sidecar's fields only
    _, plain_evidence, _ = FastHeuristic(plain).rank(word)
    assert all(found.slots[0].credit < 1.0 for found in plain_evidence)  # at best a typo's near neighbour


def test_generated_enrichment_makes_head_fields_about_three_times_longer(tmp_path: Path) -> None:
    write_enriched_store(tmp_path, 60)
    plain = HeadSize.of(read_generated_store(tmp_path, enrichment=False))
    enriched = HeadSize.of(read_generated_store(tmp_path, enrichment=True))
    assert 2.5 <= enriched.words / plain.words <= 4.0
    assert 2.5 <= enriched.chars / plain.chars <= 5.0


def test_generated_enrichment_in_frontmatter_counts_as_in_the_sidecar(tmp_path: Path) -> None:
    write_enriched_store(tmp_path / "side", 20)
    write_enriched_store(tmp_path / "front", 20, placement="frontmatter")
    assert not sidecar_path(tmp_path / "front").exists()
    side, front = (read_generated_store(tmp_path / name, enrichment=True) for name in ("side", "front"))
    for ref, doc in front.docs.items():
        assert doc.enrichment is None and side.docs[ref].enrichment is not None
        assert (doc.keywords, doc.usage_scenarios) == (
            side.docs[ref].enrichment.keywords, side.docs[ref].enrichment.usage_scenarios,
        )
    word = sorted(front.docs.values(), key=lambda doc: doc.ref)[0].keywords[0].split()[0]
    ranked, evidence, _ = FastHeuristic(front).rank(word)
    slot = evidence[0].slots[0]
    assert ranked and slot.in_head and slot.enrichment_only and not slot.in_core  # keywords, wherever they are kept


def test_generated_enriched_store_is_the_same_bytes_each_time(tmp_path: Path) -> None:
    write_enriched_store(tmp_path / "a", 15)
    write_enriched_store(tmp_path / "b", 15)
    assert sidecar_path(tmp_path / "a").read_bytes() == sidecar_path(tmp_path / "b").read_bytes()
