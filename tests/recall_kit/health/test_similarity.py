"""Near-duplicate search: the blocked search finds exactly the pairs an exhaustive one finds on the
labelled set, and the threshold separates its labelled pairs as the benchmark says."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from memory_store import MemoryStore
from recall_kit import FastHeuristic
from recall_kit.health import DUPLICATE_THRESHOLD, HEAD_WEIGHT, similar_pairs

REPO = Path(__file__).resolve().parents[3]
LABELLED = REPO / "bench" / "datasets" / "near-duplicates"


def exhaustive(heuristic: FastHeuristic, threshold: float) -> set[tuple[str, str]]:
    """Every pair's cosine by a dense matrix product, over the same vectors."""
    postings = heuristic.postings()
    tfs = postings.tfs
    head = tfs[:, :4].sum(axis=1).astype(float)
    body = tfs[:, 6].astype(float)
    value = HEAD_WEIGHT * np.where(head > 0, 1 + np.log(np.maximum(head, 1)), 0) + np.where(body > 0, 1 + np.log(np.maximum(body, 1)), 0)
    keep = value > 0
    terms, docs = postings.term_ids[keep], postings.doc_ids[keep]
    df = np.bincount(terms, minlength=len(postings.terms))
    matrix = np.zeros((len(postings.refs), len(postings.terms)))
    matrix[docs, terms] = value[keep] * np.log1p(len(postings.refs) / df[terms])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    cosine = matrix @ matrix.T
    return {tuple(sorted((postings.refs[i], postings.refs[j])))  # type: ignore[misc]
            for i, j in itertools.combinations(range(len(postings.refs)), 2) if cosine[i, j] >= threshold - 1e-9}


@pytest.mark.parametrize("dataset", ["near-duplicates", "agent-memories", "hard-cases"])
def test_the_blocked_search_finds_what_an_exhaustive_search_finds(dataset: str) -> None:
    with MemoryStore.open(REPO / "bench" / "datasets" / dataset / "memories", watch=False) as store:
        heuristic = FastHeuristic(store.snapshot())
    found = {(p.first, p.second) for p in similar_pairs(heuristic.postings(), DUPLICATE_THRESHOLD)}
    assert found == exhaustive(heuristic, DUPLICATE_THRESHOLD)


def test_the_threshold_finds_most_labelled_duplicates_and_few_same_topic_pairs() -> None:
    labels = [json.loads(line) for line in (LABELLED / "labels.jsonl").read_text().splitlines()]
    duplicates = {frozenset((f"memories/{d['a']}", f"memories/{d['b']}")) for row in labels for d in row["duplicates"]}
    with MemoryStore.open(LABELLED / "memories", watch=False) as store:
        pairs = similar_pairs(FastHeuristic(store.snapshot()).postings())
    found = {frozenset((p.first, p.second)) for p in pairs}
    # bench/bench_doctor.py, both halves: 19 of the 27 labelled pairs, 7 false ones within the halves
    assert len(found & duplicates) >= 18 and len(found - duplicates) <= 10
    copied = frozenset(("memories/copied-memory/stripe-webhooks.md", "memories/copied-memory/stripe-webhooks-2.md"))
    assert copied in found and next(p for p in pairs if frozenset((p.first, p.second)) == copied).similarity > 0.95
