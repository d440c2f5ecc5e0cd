"""The confidence gate explains its decision: every verdict agrees with select, and names the rules that hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_store import MemoryStore
from recall_kit import FastHeuristic
from recall_kit.tuning import Evidence, GateSettings, GateVerdict, HeldReason, ScoredDoc, SlotMatch

DATASETS = Path(__file__).parents[3] / "bench" / "datasets"
GATES = {
    "default": GateSettings(),
    "tie rule on": GateSettings(tie_ratio=0.8, tie_min_head_terms=2.5),
    "strict": GateSettings(min_coverage=0.3, min_head_terms=2, second_score_ratio=0.5, min_phrase_terms=3),
    "unmatched-words rule eager": GateSettings(unmatched_share=0.2, unmatched_known_share=0.1),
}


def _matched(*, head: bool = True, phrase: bool = False, generic: bool = False, mass: float = 1.0) -> SlotMatch:
    return SlotMatch(mass, 1.0, True, generic, False, head, in_phrase=phrase, in_core=head)


def _missed(mass: float = 1.0) -> SlotMatch:
    return SlotMatch(mass, 0.0, True, False, False, False)


def _rules(verdict: GateVerdict) -> list[str]:
    return [reason.rule for reason in verdict.reasons]


@pytest.fixture
def scored(make_doc):
    def make(*scores: float) -> tuple[ScoredDoc, ...]:
        return tuple(ScoredDoc(make_doc(f"d{i}.md", f"Doc {i}", "x"), score) for i, score in enumerate(scores))

    return make


@pytest.mark.parametrize("gate_name", sorted(GATES))
@pytest.mark.parametrize(("dataset", "enrichment"), [
    ("agent-memories", True), ("agent-memories", False), ("multilingual", True), ("hard-cases", False),
])
def test_the_explanation_agrees_with_the_decision_on_every_dataset_query(dataset, enrichment, gate_name) -> None:
    gate = GATES[gate_name]
    with MemoryStore.open(DATASETS / dataset / "memories", watch=False, enrichment=enrichment) as store:
        heuristic = FastHeuristic(store.snapshot(), gate=gate)
    lines = (DATASETS / dataset / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    passed_any = held_any = 0
    for query in (json.loads(line)["query"] for line in lines if line.strip()):
        ranked, evidence, _ = heuristic.rank(query)
        verdicts = gate.explain(ranked, evidence)
        assert [verdict.scored for verdict in verdicts] == list(ranked)
        assert [verdict.rank for verdict in verdicts] == list(range(1, len(ranked) + 1))
        assert tuple(verdict.scored for verdict in verdicts if verdict.passed) == gate.select(ranked, evidence)
        for verdict in verdicts:
            assert (str(verdict) == "passed the gate") == verdict.passed
        passed_any += any(verdict.passed for verdict in verdicts)
        held_any += any(not verdict.passed for verdict in verdicts[:2])
    assert passed_any and held_any


def test_a_document_passed_by_the_body_phrase_rule_is_explained_as_passed(scored) -> None:
    gate = GateSettings()
    phrase_only = Evidence((_matched(head=False, phrase=True), _matched(head=False, phrase=True), _missed()))
    ranked = scored(3.0)
    assert gate.select(ranked, [phrase_only]) == ranked
    (verdict,) = gate.explain(ranked, [phrase_only])
    assert verdict.passed and verdict.reasons == () and str(verdict) == "passed the gate"


def test_a_second_document_passed_by_the_phrase_rule_is_held_only_for_its_score(scored) -> None:
    gate = GateSettings()
    head = Evidence((_matched(), _matched(), _missed()))
    phrase_only = Evidence((_matched(head=False, phrase=True), _matched(head=False, phrase=True), _missed()))
    ranked = scored(3.0, 1.5)
    best, second = gate.explain(ranked, [head, phrase_only])
    assert best.passed and _rules(second) == ["second_score"]
    assert str(second) == "score below 0.7 x the best" and second.reasons[0].has == 0.5


def test_each_confidence_rule_that_holds_the_best_document_is_named(scored) -> None:
    gate = GateSettings()
    ranked = scored(3.0)
    cases = {
        ("specific_terms",): Evidence((_matched(), _matched(generic=True), _missed(0.1))),
        ("coverage",): Evidence((_matched(), _matched(), *[_missed()] * 9)),
        ("head_terms", "phrase_terms"): Evidence((_matched(head=False), _matched(head=False))),
        ("head_terms", "phrase_coverage"): Evidence((
            _matched(head=False, phrase=True), _matched(head=False, phrase=True), *[_missed()] * 4,
        )),
        ("specific_terms", "coverage", "head_terms", "phrase_terms", "phrase_coverage"): Evidence((
            _matched(head=False), *[_missed()] * 5,
        )),
    }
    for rules, evidence in cases.items():
        (verdict,) = gate.explain(ranked, [evidence])
        assert tuple(_rules(verdict)) == rules and not verdict.passed
        assert gate.select(ranked, [evidence]) == ()


def test_the_reasons_read_as_the_rule_and_its_figures(scored) -> None:
    assert str(HeldReason("specific_terms", 1.0, 2)) == "matched 1.0 specific word(s), needs 2"
    assert str(HeldReason("coverage", 0.123, 0.2)) == "coverage 0.12 < 0.20"
    assert str(HeldReason("head_terms", 0.5, 1)) == "0.5 in name/description/keywords, needs 1"
    assert str(HeldReason("phrase_terms", 1, 2)) == "1 word(s) in a body phrase instead, needs 2"
    assert str(HeldReason("phrase_coverage", 0.3, 0.4)) == "coverage 0.30 < 0.40 for a body phrase instead"
    assert str(HeldReason("rank", 3, 2)) == "ranked #3; the gate passes only the top 2"
    assert str(HeldReason("best_held")) == "the best match did not pass"
    held = GateVerdict(scored(1.0)[0], 2, (HeldReason("coverage", 0.1, 0.2), HeldReason("best_held")))
    assert str(held) == "coverage 0.10 < 0.20; the best match did not pass"


def test_the_second_document_is_held_with_the_best_and_for_its_own_rules(scored) -> None:
    gate = GateSettings()
    good = Evidence((_matched(), _matched(), _missed()))
    weak = Evidence((_matched(), _missed(), _missed()))
    best, second, third = gate.explain(scored(3.0, 2.9, 2.8), [weak, good])
    assert _rules(best) == ["specific_terms"] and _rules(second) == ["best_held"]
    assert _rules(third) == ["rank"] and str(third) == "ranked #3; the gate passes only the top 2"
    best, second = gate.explain(scored(3.0, 1.0), [weak, weak])
    assert _rules(second) == ["second_score", "specific_terms", "best_held"]


def test_the_tie_rule_when_on_holds_a_best_that_does_not_stand_out(scored) -> None:
    evidence = [Evidence((_matched(), _matched(), _missed())), Evidence((_matched(), _matched(), _missed()))]
    ranked = scored(3.0, 2.9)
    assert [verdict.passed for verdict in GateSettings().explain(ranked, evidence)] == [True, True]
    tie = GateSettings(tie_ratio=0.9, tie_min_head_terms=3)
    best, second = tie.explain(ranked, evidence)
    assert _rules(best) == ["tie"] and best.reasons[0].has == 2 and best.reasons[0].needs == 3
    assert _rules(second) == ["best_held"] and tie.select(ranked, evidence) == ()


def test_the_tuning_types_live_in_recall_kit_tuning_not_at_the_top_level() -> None:
    import recall_kit
    import recall_kit.tuning

    for name in ("Evidence", "SlotMatch", "ScoredDoc", "GateSettings"):
        assert name not in recall_kit.__all__ and not hasattr(recall_kit, name)
        assert name in recall_kit.tuning.__all__
    assert all(hasattr(recall_kit.tuning, name) for name in recall_kit.tuning.__all__)
    assert recall_kit.tuning.__doc__ and "GateSettings" in recall_kit.tuning.__doc__


def test_an_answer_is_certain_only_for_one_unique_strong_match(scored) -> None:
    gate = GateSettings()
    strong = Evidence((_matched(), _matched(), _matched()))  # three head words, the whole query
    weak = Evidence((_matched(), _matched(), *[_missed()] * 4))  # passes the gate, a third of the query
    held = Evidence((_matched(), *[_missed()] * 3))  # one specific word: the gate holds it
    assert gate.certain(scored(3.0), [strong])
    assert gate.certain(scored(3.0, 1.0), [strong, held])  # the next scores a third of the best
    assert not gate.certain(scored(3.0, 2.9), [strong, held])  # ... not unique: the next comes close
    assert not gate.certain(scored(3.0, 2.5), [strong, strong])  # two pass the gate
    assert gate.select(scored(3.0), [weak]) and not gate.certain(scored(3.0), [weak])  # delivered, not strong
    assert not gate.certain(scored(3.0), [Evidence((_matched(head=False), _matched(head=False), _matched(head=False)))])
    assert not gate.certain((), [])
    loose = GateSettings(certain_min_coverage=0.3, certain_second_ratio=1.0, certain_min_head_terms=2)
    assert loose.certain(scored(3.0), [weak]) and loose.certain(scored(3.0, 2.9), [strong, held])


def test_a_missed_word_only_enrichment_holds_weighs_as_unknown_against_coverage(scored) -> None:
    # Two words matched (mass 1 each) and one missed word (mass 1) that only keywords or usage scenarios hold.
    vocabulary = SlotMatch(1.0, 0.0, True, False, False, False, enrichment_vocabulary=True)
    found = Evidence((_matched(), _matched(), vocabulary))
    assert found.coverage(2.0, 1.0, 0.0, enrichment_vocabulary_weight=2.0) == pytest.approx(2 / 4)
    assert found.coverage(2.0, 1.0, 0.0, enrichment_vocabulary_weight=1.0) == pytest.approx(2 / 3)
    assert Evidence((_matched(), _matched(), _missed())).coverage(2.0, 1.0, 0.0, enrichment_vocabulary_weight=2.0) == (
        pytest.approx(2 / 3)
    )  # a word some memory's own text holds is an ordinary known word


def _keyword(*, agrees: bool = False) -> SlotMatch:
    # a specific word matched only in one keyword the query matches in two words
    return SlotMatch(1.0, 1.0, True, False, False, True, enrichment_only=True, in_entry=True, agrees=agrees)


def test_a_best_that_passes_only_through_one_keyword_must_stand_out_from_the_next(scored) -> None:
    gate = GateSettings()
    lone = Evidence((_keyword(), _keyword(), _matched(head=False), _missed()))  # "command line" of one keyword
    close, apart = scored(10.0, 8.0), scored(10.0, 5.0)
    weak = Evidence((_missed(),))
    assert _rules(gate.explain(close, [lone, weak])[0]) == ["lone_entry"]
    assert str(gate.explain(close, [lone, weak])[0].reasons[0]).startswith("passes only through one keyword")
    assert gate.select(apart, [lone, weak]) == apart[:1]  # the next scores below 0.7 of it
    assert gate.select(close, [lone, weak]) == ()
    assert GateSettings(lone_entry_ratio=1.01).select(close, [lone, weak]) == close[:1]  # the rule off
    agreed = Evidence((_keyword(agrees=True), _keyword(agrees=True), _matched(head=False), _missed()))
    assert gate.select(close, [agreed, weak]) == close[:1]  # two keywords agree: no longer one entry
    own = Evidence((_keyword(), _matched(), _matched(), _missed()))  # it passes by its own name words too
    assert gate.select(close, [own, weak]) == close[:1]


def test_a_best_that_needs_its_keywords_and_misses_words_other_memories_hold_is_held(scored) -> None:
    # "how do I debug a memory leak in a Node.js process" against a memory whose keyword is "memory leak"
    gate = GateSettings()
    leak = _keyword(agrees=True)  # two keywords agree: the lone-entry rule lets it through
    body = _matched(head=False)
    process = SlotMatch(1.0, 0.0, True, False, False, False)  # missed; other memories hold it
    node = SlotMatch(1.0, 0.0, False, False, False, False)  # missed; no memory holds it
    apart, weak = scored(10.0, 2.0), Evidence((_missed(),))
    needs_keywords = Evidence((leak, leak, body, process, process, process))
    assert gate.explain(apart, [needs_keywords, weak])[0].reasons == (HeldReason("unmatched", 0.5, 0.4),)
    assert gate.select(apart, [needs_keywords, weak]) == ()
    assert GateSettings(unmatched_share=1.01).select(apart, [needs_keywords, weak]) == apart[:1]  # the rule off
    unknown_words = Evidence((leak, leak, body, node, node, node))  # what it misses, no memory holds
    assert gate.select(apart, [unknown_words, weak]) == apart[:1]
    own_words = Evidence((leak, _matched(), _matched(), process, process, process))  # it passes by its own text
    assert gate.select(apart, [own_words, weak]) == apart[:1]
    little_missed = Evidence((leak, leak, body, process))  # a quarter of the query missed
    assert gate.select(apart, [little_missed, weak]) == apart[:1]
    assert str(gate.explain(apart, [needs_keywords, weak])[0]).startswith("passes only through its keywords")
