"""Tuning and low-level types of the fast stage: the confidence gate, its explanation, the evidence it
reads, the field schema and weights, the typo tolerance and the analyser.

An agent author needs none of this (the top level of ``recall_kit`` is the API). It serves tuning
the gate and the field weights, explaining a decision, and benchmarks::

    from recall_kit import FastHeuristic
    from recall_kit.tuning import GateSettings

    heuristic = FastHeuristic(snapshot, gate=GateSettings(min_coverage=0.3))
    ranked, evidence, _ = heuristic.rank("how do we deploy ledgerline?")
    for verdict in heuristic.gate.explain(ranked, evidence):
        print(verdict.rank, verdict.scored.doc.ref, verdict)  # "passed the gate", or why it is held

The constants are the defaults; the comment beside each in the source names the benchmark that
chose it (bench/bench_heuristic.py searches the gate and compares field weights). ``gate_features``
is the one place a document's figures are worked out, for the gate and for that search.
"""

from memory_store import fixup_module_metadata
from recall_kit._fields import FIELD_WEIGHTS, FIELDS
from recall_kit._gate import (
    CJK_UNKNOWN_WEIGHT,
    ENRICHMENT_HEAD_CREDIT,
    FEATURE_COUNT,
    GENERIC_WEIGHT,
    MIN_COVERAGE,
    MIN_HEAD_TERMS,
    MIN_PHRASE_TERMS,
    MIN_SPECIFIC_TERMS,
    PHRASE_MIN_COVERAGE,
    SECOND_MIN_COVERAGE,
    SECOND_SCORE_RATIO,
    TIE_MIN_HEAD_TERMS,
    TIE_RATIO,
    UNKNOWN_WEIGHT,
    Evidence,
    FeatureWeights,
    GateFeatures,
    GateRule,
    GateSettings,
    GateVerdict,
    HeldReason,
    ScoredDoc,
    SlotMatch,
    gate_features,
)
from recall_kit._query import (
    TYPO_LONG_WORD,
    TYPO_MAX_EDITS,
    TYPO_MAX_EDITS_LONG,
    TYPO_MAX_EXPANSIONS,
    TYPO_MIN_LENGTH,
    TYPO_WEIGHT,
)
from recall_kit._tokenize import tokenize

__all__ = [
    "CJK_UNKNOWN_WEIGHT",
    "ENRICHMENT_HEAD_CREDIT",
    "Evidence",
    "FEATURE_COUNT",
    "FIELDS",
    "FIELD_WEIGHTS",
    "FeatureWeights",
    "GENERIC_WEIGHT",
    "GateFeatures",
    "GateRule",
    "GateSettings",
    "GateVerdict",
    "HeldReason",
    "MIN_COVERAGE",
    "MIN_HEAD_TERMS",
    "MIN_PHRASE_TERMS",
    "MIN_SPECIFIC_TERMS",
    "PHRASE_MIN_COVERAGE",
    "SECOND_MIN_COVERAGE",
    "SECOND_SCORE_RATIO",
    "ScoredDoc",
    "SlotMatch",
    "TIE_MIN_HEAD_TERMS",
    "TIE_RATIO",
    "TYPO_LONG_WORD",
    "TYPO_MAX_EDITS",
    "TYPO_MAX_EDITS_LONG",
    "TYPO_MAX_EXPANSIONS",
    "TYPO_MIN_LENGTH",
    "TYPO_WEIGHT",
    "UNKNOWN_WEIGHT",
    "gate_features",
    "tokenize",
]
fixup_module_metadata(__name__, globals(), __all__)
