"""A memory listing thousands of keywords, or one endless usage scenario, costs the gate a bounded look:
the entries it keeps per word and the terms it keeps per entry are capped (recall_kit.limits)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from memory_store import MemoryStore, format_memory
from recall_kit import FastHeuristic
from recall_kit._fields import doc_entries
from recall_kit.limits import ENTRIES_PER_TERM, ENTRY_TERMS


def test_thousands_of_keywords_and_an_endless_scenario_are_looked_at_within_their_bounds(tmp_path: Path) -> None:
    root = tmp_path / "m"
    root.mkdir()
    keywords = [f"word{i} thing{i} deploy" for i in range(4_000)]
    scenario = " ".join(f"w{i}" for i in range(10_000))
    (root / "big.md").write_text(format_memory(
        name="Notes", description="misc", type="project", body="x", keywords=keywords, usage_scenarios=[scenario],
    ))
    (root / "o.md").write_text(format_memory(name="Other", description="deploy pipeline", type="project", body="y"))
    with MemoryStore.open(("m", root), watch=False) as store:
        snapshot = store.snapshot()
    assert snapshot.errors == () and len(snapshot.docs) == 2
    big = snapshot.docs["m/big.md"]
    assert big.usage_scenarios == ()  # the store keeps no scenario over MAX_SCENARIO_CHARS
    entries = doc_entries(big)
    assert max(len(held) for held in entries.values()) == ENTRIES_PER_TERM  # "deploy" is in all it keeps
    # a doc that reaches the gate another way (a caller's own MemoryDoc) is bounded by the gate itself
    endless = doc_entries(dataclasses.replace(big, usage_scenarios=(scenario,)))
    assert max(len(entry) for held in endless.values() for entry in held) == ENTRY_TERMS
    assert "w40" not in endless  # past the scenario's first terms
    heuristic = FastHeuristic(snapshot)
    ranked, evidence, _ = heuristic.rank("word5 thing5 deploy rollout")
    assert ranked[0].doc.ref == "m/big.md"
    found = [slot.in_entry for slot in evidence[0].slots if slot.enrichment_only]
    assert found and all(found)  # "word5 thing5 deploy" is one of the entries kept for each of its words
