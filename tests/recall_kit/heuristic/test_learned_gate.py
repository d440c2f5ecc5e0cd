"""The gate's learned rules on hand-made rankings: suppressors hold a document for the prompt the
model turned it down for (and its near repeats), and only it: the documents behind it face the gate
as they would have."""

from __future__ import annotations

import dataclasses

from memory_store import Learned
from recall_kit.tuning import GateSettings, ScoredDoc
from selector_helpers import make_doc

WORDS = frozenset({"postgres", "pgbouncer", "settings", "atlas"})


def _scored(path: str, score: float, learned: Learned | None = None) -> ScoredDoc:
    return ScoredDoc(dataclasses.replace(make_doc(path, path), learned=learned), score)


def test_without_anything_learned_the_ranking_is_kept_as_it_is() -> None:
    ranked = [_scored("a.md", 3.0), _scored("b.md", 2.0)]
    assert GateSettings().unsuppressed(ranked, WORDS) == tuple(ranked)


def test_a_suppressed_best_match_is_held_for_the_same_prompt_and_a_near_repeat_and_only_it() -> None:
    ranked = [_scored("a.md", 3.0, Learned(suppressors=(WORDS,))), _scored("b.md", 2.0)]
    gate = GateSettings()
    assert gate.unsuppressed(ranked, WORDS) == (ranked[1],)  # the next faces the gate: it is never silenced
    assert gate.unsuppressed(ranked, WORDS | {"please"}) == (ranked[1],)  # 4 of 5 words: a near repeat
    assert gate.unsuppressed(ranked, frozenset({"postgres", "atlas", "alembic", "migrations"})) == tuple(ranked)


def test_a_suppressed_second_match_leaves_the_best_in_place() -> None:
    ranked = [_scored("a.md", 3.0), _scored("b.md", 2.0, Learned(suppressors=(WORDS,))), _scored("c.md", 1.0)]
    assert GateSettings().unsuppressed(ranked, WORDS) == (ranked[0], ranked[2])


def test_the_overlap_that_counts_as_a_repeat_is_a_setting() -> None:
    ranked = [_scored("a.md", 3.0, Learned(suppressors=(WORDS,))), _scored("b.md", 2.0)]
    near = WORDS | {"please"}
    assert GateSettings(suppress_overlap=0.9).unsuppressed(ranked, near) == tuple(ranked)
