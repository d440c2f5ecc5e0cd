"""Structured fields (keywords, usage_scenarios) and enrichment in the index, and body phrases in the gate."""

from __future__ import annotations

import hashlib
from pathlib import Path

from memory_store import EnrichmentEntry, MemoryStore, sidecar_path, write_enrichment
from recall_kit import FastHeuristic
from recall_kit._fields import doc_fields
from recall_kit._index import FieldIndex, QueryTerm
from recall_kit._manifest import build_manifest
from recall_kit.limits import MAX_MANIFEST_SCENARIOS_BYTES as MAX_SCENARIOS_BYTES
from recall_kit._tokenize import analyze
from recall_kit.tuning import FIELDS, GateSettings, gate_features

MEMORIES = {
    "deploy.md": (
        "---\nname: Release train\ndescription: How the billing service ships\ntype: project\n---\n"
        "Releases are cut every second Tuesday from main.\n"
    ),
    "cooking.md": (
        "---\nname: Kitchen notes\ndescription: Recipes the user keeps\ntype: project\n---\n"
        "Sourdough starter is fed every morning.\n"
    ),
}


def write_root(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (root / rel).write_text(text, encoding="utf-8")
    return root


def enrich(root: Path, rel: str, keywords: tuple[str, ...], scenarios: tuple[str, ...] = (), *, stale: bool = False) -> None:
    digest = hashlib.sha256((root / rel).read_bytes() + (b"x" if stale else b"")).hexdigest()
    write_enrichment(sidecar_path(root), [EnrichmentEntry(rel, digest, keywords, scenarios)])


def recall_refs(root: Path, query: str, *, enrichment: bool = True) -> list[str]:
    with MemoryStore.open(("m", root), watch=False, enrichment=enrichment) as store:
        result = FastHeuristic(store.snapshot()).recall(query)
    return [scored.doc.ref for scored in result.docs]


def test_frontmatter_and_enrichment_terms_count_in_their_own_fields(tmp_path: Path) -> None:
    root = write_root(tmp_path / "m", {
        "a.md": "---\nname: A\ndescription: d\ntype: project\nkeywords: [rollout]\nusage_scenarios: [ship the canary]\n---\nbody\n"
    })
    enrich(root, "a.md", ("deployment",), ("promote a build to production",))
    with MemoryStore.open(("m", root), watch=False) as store:
        doc = store.snapshot().docs["m/a.md"]
    fields, _ = doc_fields(doc)
    term = {word: analyze(word)[0].term for word in ("rollout", "deployment", "canary", "production")}
    assert fields[FIELDS.index("keywords")] == [term["rollout"]]
    assert term["canary"] in fields[FIELDS.index("usage_scenarios")]
    assert fields[FIELDS.index("enriched_keywords")] == [term["deployment"]]
    assert term["production"] in fields[FIELDS.index("enriched_scenarios")]
    assert term["production"] not in fields[FIELDS.index("usage_scenarios")]
    assert fields[FIELDS.index("body")] == ["bodi"] or fields[FIELDS.index("body")] == [analyze("body")[0].term]


def test_enrichment_changes_the_ranking(tmp_path: Path) -> None:
    root = write_root(tmp_path / "m", MEMORIES)
    query = "how do we do a production rollout of billing"
    before = recall_refs(root, query)
    enrich(root, "deploy.md", ("production rollout", "deployment schedule", "ship to prod"))
    after = recall_refs(root, query)
    assert "m/deploy.md" not in before
    assert after[:1] == ["m/deploy.md"]
    assert recall_refs(root, query, enrichment=False) == before  # the sidecar, not the file, changed it


def test_stale_enrichment_is_ignored(tmp_path: Path) -> None:
    root = write_root(tmp_path / "m", MEMORIES)
    query = "how do we do a production rollout of billing"
    before = recall_refs(root, query)
    enrich(root, "deploy.md", ("production rollout", "deployment schedule"), stale=True)
    assert recall_refs(root, query) == before


def test_strong_body_phrase_is_delivered_and_scattered_words_are_not(tmp_path: Path) -> None:
    root = write_root(tmp_path / "m", {
        "release.md": (
            "---\nname: Billing release notes\ndescription: How releases are cut and announced\ntype: project\n---\n"
            "Run migrations behind a feature flag so a rollback never needs a down migration.\n"
        ),
        "flags.md": (
            "---\nname: Team directory\ndescription: Who is who on the team\ntype: project\n---\n"
            "Each profile shows a flag. A new feature of the page is the timezone.\n"
        ),
    })
    assert recall_refs(root, "migrations behind a feature flag?") == ["m/release.md"]
    assert "m/flags.md" not in recall_refs(root, "feature flag for the timezone")


def test_store_without_structured_fields_scores_as_the_four_field_index(developer_docs, make_snapshot) -> None:
    # Empty scenario, enrichment and learned fields add nothing: scores equal an index without those fields.
    heuristic = FastHeuristic(make_snapshot(*developer_docs))
    plain = FieldIndex((2.0, 2.0, 2.0, 1.0))
    empty = {"usage_scenarios", "enriched_keywords", "enriched_scenarios", "learned"}
    for doc in developer_docs:
        fields, surfaces = doc_fields(doc)
        assert all(fields[FIELDS.index(name)] == [] for name in empty)
        plain.add(doc.ref, [f for i, f in enumerate(fields) if FIELDS[i] not in empty], surfaces)
    for query in ("postgres migrations alembic", "deploy staging", "pgbouncer connection string"):
        terms = [QueryTerm(t.term) for t in analyze(query)]
        ranked, _, _ = heuristic.rank(query)
        expected, _ = plain.score(terms)
        assert [(s.doc.ref, round(s.score, 9)) for s in ranked] == [(h.ref, round(h.score, 9)) for h in expected]


def test_a_head_match_in_keywords_alone_counts_half_in_the_frontmatter_as_in_the_sidecar(tmp_path: Path) -> None:
    # One specific word in the name is enough; the same word only in keywords is not, wherever they are kept.
    memory = "---\nname: {name}\ndescription: Recipes the user keeps\ntype: project\n{extra}---\nStarter fed daily.\n"
    query = "sourdough starter hydration"
    named = write_root(tmp_path / "n", {"k.md": memory.format(name="Sourdough notes", extra=""), "o.md": MEMORIES["deploy.md"]})
    assert recall_refs(named, query) == ["m/k.md"]
    front = write_root(tmp_path / "f", {"k.md": memory.format(name="Kitchen notes", extra="keywords: [sourdough]\n"),
                                        "o.md": MEMORIES["deploy.md"]})
    assert recall_refs(front, query) == []
    side = write_root(tmp_path / "s", {"k.md": memory.format(name="Kitchen notes", extra=""), "o.md": MEMORIES["deploy.md"]})
    enrich(side, "k.md", ("sourdough",))
    assert recall_refs(side, query) == []
    (front / "k.md").write_text(memory.format(name="Kitchen notes", extra="keywords: [sourdough, starter]\n"), encoding="utf-8")
    enrich(side, "k.md", ("sourdough", "starter"))
    assert recall_refs(front, query) == recall_refs(side, query) == ["m/k.md"]  # two keyword words make one in the name


def test_a_word_matched_only_in_keywords_counts_in_coverage_when_its_entry_is_matched_whole_or_in_two_words(
    tmp_path: Path,
) -> None:
    memory = "---\nname: Release train\ndescription: How the billing service ships\ntype: project\n{extra}---\nCut on Tuesdays.\n"
    root = write_root(tmp_path / "m", {"r.md": memory.format(extra=""), "o.md": MEMORIES["cooking.md"]})

    def evidence(keywords: str, query: str, credit: float = 0.0) -> tuple[float, list[tuple[bool, bool]]]:
        (root / "r.md").write_text(memory.format(extra=f"keywords: [{keywords}]\n"), encoding="utf-8")
        with MemoryStore.open(("m", root), watch=False) as store:
            heuristic = FastHeuristic(store.snapshot(), gate=GateSettings(enrichment_coverage_credit=credit))
        ranked, found, _ = heuristic.rank(query)
        assert ranked[0].doc.ref == "m/r.md"
        slots = [(slot.enrichment_only, slot.in_entry) for slot in found[0].slots if slot.credit]
        return gate_features(found[0], heuristic.gate.weights).coverage, slots

    whole, slots = evidence("hotfix, rollback plan", "hotfix for billing")  # "hotfix" is a whole entry
    assert slots == [(True, True), (False, False)] and whole > 0.9
    two, slots = evidence("rollback plan", "plan the rollback for billing")  # two words of one entry
    assert slots == [(True, True), (True, True), (False, False)] and two > 0.9
    lone, slots = evidence("rollback plan", "rollback billing")  # one word of a two-word entry, alone
    assert slots == [(True, False), (False, False)] and 0.0 < lone < 0.6
    full, _ = evidence("rollback plan", "rollback billing", credit=1.0)
    assert full > 0.9  # at full credit the lone word counts as before


def test_manifest_shows_enriched_keywords_and_capped_scenarios(tmp_path: Path) -> None:
    root = write_root(tmp_path / "m", MEMORIES)
    enrich(root, "deploy.md", ("deployment schedule",), ("x" * 190, "y" * 190))
    with MemoryStore.open(("m", root), watch=False) as store:
        docs = list(store.snapshot().docs.values())
    line = next(line for line in build_manifest(docs, now=0.0).text.splitlines() if "deploy.md" in line)
    assert "keywords: deployment schedule" in line
    scenarios = line.split("scenarios: ", 1)[1]
    assert scenarios.startswith("x" * 70) and len(scenarios.encode()) <= MAX_SCENARIOS_BYTES
    assert "y" not in scenarios


def test_a_word_that_only_keywords_hold_counts_as_unknown_in_coverage_in_the_sidecar_as_in_the_frontmatter(
    tmp_path: Path,
) -> None:
    # "cadence" and "fortnightly" stand only in another memory's keywords: without enrichment no memory holds them
    # and they weigh double against coverage; with it they would be known words, and weigh less, unless the gate
    # counts a word known only through enrichment as unknown, as it does by default.
    memory = "---\nname: Release train\ndescription: How the billing service ships\ntype: project\n---\nCut on Tuesdays from main.\n"
    other = "---\nname: Kitchen notes\ndescription: Recipes the user keeps\ntype: project\n{extra}---\nStarter fed daily.\n"
    query = "billing release cadence fortnightly toaster"
    plain = write_root(tmp_path / "p", {"r.md": memory, "o.md": other.format(extra="")})
    side = write_root(tmp_path / "s", {"r.md": memory, "o.md": other.format(extra="")})
    enrich(side, "o.md", ("fortnightly cadence",))
    front = write_root(tmp_path / "f", {"r.md": memory, "o.md": other.format(extra="keywords: [fortnightly cadence]\n")})

    def recall(root: Path, weight: float | None = None) -> tuple[list[str], list[bool]]:
        gate = GateSettings() if weight is None else GateSettings(enrichment_vocabulary_weight=weight)
        with MemoryStore.open(("m", root), watch=False) as store:
            heuristic = FastHeuristic(store.snapshot(), gate=gate)
        ranked, found, _ = heuristic.rank(query)
        assert ranked[0].doc.ref == "m/r.md"
        return [s.doc.ref for s in heuristic.recall(query).docs], [slot.enrichment_vocabulary for slot in found[0].slots]

    assert recall(plain) == ([], [False] * 5)
    for root in (side, front):
        delivered, vocabulary = recall(root)
        assert delivered == [] and vocabulary == [False, False, True, True, False]
        assert recall(root, weight=1.0)[0][:1] == ["m/r.md"]  # counted as known words, they let the memory through


def test_a_word_in_some_memory_s_own_text_is_not_enrichment_vocabulary(tmp_path: Path) -> None:
    root = write_root(tmp_path / "m", MEMORIES)
    enrich(root, "cooking.md", ("billing sourdough",))  # both words stand in some memory's own text too
    with MemoryStore.open(("m", root), watch=False) as store:
        heuristic = FastHeuristic(store.snapshot())
    _, found, _ = heuristic.rank("billing sourdough starter")
    assert [slot.enrichment_vocabulary for slot in found[0].slots] == [False, False, False]


def test_keyword_words_agree_only_when_two_entries_each_hold_a_query_word_the_other_lacks(tmp_path: Path) -> None:
    memory = "---\nname: Release train\ndescription: How the billing service ships\ntype: project\n{extra}---\nCut on Tuesdays.\n"
    query = "rollback plan for the hotfix"

    def agrees(keywords: str) -> dict[str, list[bool]]:
        found = {}
        for place in ("front", "side"):
            root = write_root(tmp_path / place / keywords.replace(" ", "_"), {
                "r.md": memory.format(extra=f"keywords: [{keywords}]\n" if place == "front" else ""),
                "o.md": MEMORIES["cooking.md"],
            })
            if place == "side":
                enrich(root, "r.md", tuple(keywords.split(", ")))
            with MemoryStore.open(("m", root), watch=False) as store:
                heuristic = FastHeuristic(store.snapshot())
            ranked, evidence, _ = heuristic.rank(query)
            assert ranked[0].doc.ref == "m/r.md"
            found[place] = [slot.agrees for slot in evidence[0].slots if slot.credit]
        assert found["front"] == found["side"]
        return found["front"]

    assert agrees("rollback plan hotfix") == [False, False, False]  # one entry, three words: one piece of evidence
    assert agrees("rollback plan, hotfix") == [True, True, True]  # two entries, each with a word the other lacks
    assert agrees("rollback plan, rollback") == [False, False]  # the second entry adds no word of its own
