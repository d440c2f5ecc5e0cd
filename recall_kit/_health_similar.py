"""Near-duplicates: pairs of memories whose words, weighed by rarity, say the same thing.

Each memory is a tf-idf vector over the index's own terms (the fast stage's analysis, read from its
postings, so nothing is analysed twice): the words its author wrote in name, description, keywords
and usage scenarios count ``HEAD_WEIGHT`` times a body word (enrichment and learned words are not
what a memory states), tf sublinear, idf ``log(1 + N / df)``. Two memories are near-duplicates when
the cosine of their vectors reaches ``DUPLICATE_THRESHOLD``.

Pairs are not all scored (50 million at 10,000 memories): a pair is a candidate when the two share
``MIN_SHARED`` of their ``BLOCK_TERMS`` heaviest words (words in at most ``BLOCK_MAX_DF`` memories;
all of a memory's when it has fewer), and candidates are scored exactly. On the labelled set and on
80 near-duplicates planted in a generated store of 1,000 memories this finds every pair an
exhaustive search finds (bench/bench_doctor.py measures it again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recall_kit._fields import BODY_FIELD, CORE_FIELDS
from recall_kit._index import TermPostings

# Chosen by bench/bench_doctor.py on the dev half of bench/datasets/near-duplicates (grid over the
# head weight and the threshold, best F1, ties to the higher threshold): dev P 0.900 R 0.750, held-out
# P 0.625 R 0.667 (2026-12-02). Same-topic memories that state different facts (staging vs production
# URL, a retention period vs its stream) reach 0.41-0.47, paraphrases with no word in common 0.02-0.18:
# the lexical measure cannot tell those apart, which is what --model-check is for.
DUPLICATE_THRESHOLD = 0.389
HEAD_WEIGHT = 2.0
# Blocking, measured against an exhaustive search (bench/bench_doctor.py, 2026-12-02): sharing one of
# 8 words found all 80 planted pairs but made 269,039 candidates at 10,000 memories (5.6 s to score);
# two of 8 missed 2 of the 80; two of 12 found them all with 14,896 candidates (three of 16: 3,815).
BLOCK_TERMS = 12
MIN_SHARED = 2
BLOCK_MAX_DF = 200  # a word in more memories blocks nothing: capping at 50, 200 or none changed no pair
_CHUNK = 4_000_000  # entries gathered per step of the exact scoring: bounds its memory (~200 MB)


@dataclass(frozen=True, slots=True)
class SimilarPair:
    """Two memories (refs, in order) and the cosine of their vectors."""

    first: str
    second: str
    similarity: float


def doc_vectors(postings: TermPostings, head_weight: float = HEAD_WEIGHT, body_weight: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(term id, doc id, weight) of every non-zero entry of the memories' unit tf-idf vectors."""
    tfs = postings.tfs
    head = tfs[:, sorted(CORE_FIELDS)].sum(axis=1).astype(np.float64)
    body = tfs[:, BODY_FIELD].astype(np.float64)
    with np.errstate(divide="ignore"):
        value = head_weight * np.where(head > 0, 1.0 + np.log(np.maximum(head, 1.0)), 0.0)
        value += body_weight * np.where(body > 0, 1.0 + np.log(np.maximum(body, 1.0)), 0.0)
    keep = value > 0
    terms, docs, value = postings.term_ids[keep].astype(np.int64), postings.doc_ids[keep].astype(np.int64), value[keep]
    n_docs = len(postings.refs)
    if not len(terms):
        return terms, docs, value
    df = np.bincount(terms, minlength=len(postings.terms))
    weight = value * np.log1p(n_docs / df[terms])
    norms = np.sqrt(np.bincount(docs, weights=weight * weight, minlength=n_docs))
    return terms, docs, weight / norms[docs]


def similar_pairs(
    postings: TermPostings, threshold: float = DUPLICATE_THRESHOLD, *, head_weight: float = HEAD_WEIGHT,
    body_weight: float = 1.0,
) -> list[SimilarPair]:
    """Every candidate pair of memories whose cosine is at least ``threshold``, most similar first."""
    terms, docs, weight = doc_vectors(postings, head_weight, body_weight)
    n_docs = len(postings.refs)
    if n_docs < 2 or not len(terms):
        return []
    first, second = _candidates(terms, docs, weight, n_docs, len(postings.terms))
    similarity = _cosines(first, second, terms, docs, weight, len(postings.terms))
    keep = similarity >= threshold - 1e-9
    refs = postings.refs
    pairs = []
    for a, b, value in zip(first[keep].tolist(), second[keep].tolist(), similarity[keep].tolist()):
        one, other = sorted((refs[a], refs[b]))
        pairs.append(SimilarPair(one, other, min(1.0, value)))
    return sorted(pairs, key=lambda p: (-p.similarity, p.first, p.second))


def _candidates(terms: np.ndarray, docs: np.ndarray, weight: np.ndarray, n_docs: int, n_terms: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (first < second by doc id) sharing MIN_SHARED of their BLOCK_TERMS heaviest blocking words
    (or all of them, for a memory with fewer)."""
    df = np.bincount(terms, minlength=n_terms)
    usable = np.flatnonzero((df[terms] > 1) & (df[terms] <= BLOCK_MAX_DF))
    by_weight = usable[np.lexsort((-weight[usable], docs[usable]))]
    owner = docs[by_weight]
    place = np.arange(len(by_weight)) - np.searchsorted(owner, owner)
    chosen = by_weight[place < BLOCK_TERMS]
    chosen = chosen[np.lexsort((docs[chosen], terms[chosen]))]
    group_terms, group_docs = terms[chosen], docs[chosen]
    group_end = np.searchsorted(group_terms, group_terms, side="right")
    later = group_end - (np.arange(len(chosen)) + 1)  # partners after each entry in its word's group
    total = int(later.sum())
    if not total:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    rows = np.repeat(np.arange(len(chosen)), later)
    partners = rows + 1 + (np.arange(total) - np.repeat(np.cumsum(later) - later, later))
    keys, shared = np.unique(group_docs[rows] * n_docs + group_docs[partners], return_counts=True)
    first, second = keys // n_docs, keys % n_docs
    blocking = np.bincount(group_docs, minlength=n_docs)  # each memory's blocking words
    enough = shared >= np.minimum(MIN_SHARED, np.minimum(blocking[first], blocking[second]))
    return first[enough], second[enough]


def _cosines(
    first: np.ndarray, second: np.ndarray, terms: np.ndarray, docs: np.ndarray, weight: np.ndarray, n_terms: int
) -> np.ndarray:
    """The dot product of each pair's unit vectors: the second's entries looked up among the first's
    (one sorted array of (doc, term) keys), in chunks."""
    keys = docs * n_terms + terms
    order = np.argsort(keys, kind="stable")
    sorted_keys, sorted_weight = keys[order], weight[order]
    by_doc = np.argsort(docs, kind="stable")
    doc_start = np.searchsorted(docs[by_doc], np.arange(int(docs.max()) + 1), side="left")
    doc_end = np.searchsorted(docs[by_doc], np.arange(int(docs.max()) + 1), side="right")
    out = np.zeros(len(first))
    counts = doc_end[second] - doc_start[second]
    ends = np.cumsum(counts)
    start = 0
    while start < len(first):
        stop = max(int(np.searchsorted(ends, (ends[start - 1] if start else 0) + _CHUNK, side="right")), start + 1)
        c = counts[start:stop]
        total = int(c.sum())
        owner = np.repeat(np.arange(start, stop), c)
        at = by_doc[np.repeat(doc_start[second[start:stop]], c) + (np.arange(total) - np.repeat(np.cumsum(c) - c, c))]
        wanted = first[owner] * n_terms + terms[at]
        found = np.minimum(np.searchsorted(sorted_keys, wanted), len(sorted_keys) - 1)
        hit = sorted_keys[found] == wanted
        out[start:stop] = np.bincount(owner[hit] - start, weights=sorted_weight[found[hit]] * weight[at[hit]], minlength=stop - start)
        start = stop
    return out


def groups_of(pairs: Sequence[SimilarPair]) -> list[list[SimilarPair]]:
    """The pairs joined into groups that share a memory (connected components), largest similarity first."""
    parent: dict[str, str] = {}

    def find(ref: str) -> str:
        while parent.setdefault(ref, ref) != ref:
            parent[ref] = parent[parent[ref]]
            ref = parent[ref]
        return ref

    for pair in pairs:
        parent[find(pair.first)] = find(pair.second)
    grouped: dict[str, list[SimilarPair]] = {}
    for pair in pairs:
        grouped.setdefault(find(pair.first), []).append(pair)
    return sorted(grouped.values(), key=lambda g: (-max(p.similarity for p in g), g[0].first))
