"""An incremental inverted index scored with BM25F (BM25 over weighted fields).

Per term and document (Robertson's BM25F, with rank-bm25's BM25Okapi as the one-field case):

    tf~(t, d) = sum over fields f of  weight_f * tf_f / (1 - b + b * len_f(d) / avglen_f)
    score(d)  = sum over query terms t of  idf(t) * tf~ * (k1 + 1) / (k1 + tf~)
    idf(t)    = log(1 + (N - n_t + 0.5) / (n_t + 0.5))      (never <= 0, unlike BM25Okapi's)

Documents are added and removed one at a time; N, df and the average lengths are running
totals, so an updated index scores exactly like one rebuilt from scratch. Scoring touches
only the postings of the query's terms, vectorised per term with numpy (rank-bm25's own
dependency). The index is not thread-safe: its owner serialises access (see FastHeuristic).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from itertools import chain, filterfalse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

K1 = 1.2  # Lucene's default (rank-bm25 uses 1.5; the pin test passes k1 through)
B = 0.75  # the usual default, in rank-bm25 and Lucene alike

Posting = tuple[int, ...]  # term frequency in each field
VECTORISE_MIN_POSTINGS = 200  # loop vs numpy: 0.16 vs 0.15 ms at 100-300 postings, 0.44 vs 0.19 at 600-1000
PATCH_MIN_POSTINGS = 512  # below this, rebuilding a term's arrays on demand is cheaper than patching


def bm25_idf(n_docs: int, doc_freq: int) -> float:
    """Non-negative idf: a term in every document still counts a little (BM25Okapi's goes <= 0)."""
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


@dataclass(frozen=True, slots=True)
class QueryTerm:
    """A term to score, with its weight in the query (1.0 exact, less for a typo expansion)."""

    term: str
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Hit:
    """One scored document: its ref and score."""

    ref: str
    score: float


class FieldIndex:
    """Postings per term, lengths per document and field, and the running totals BM25 needs."""

    def __init__(
        self,
        field_weights: Sequence[float],
        *,
        k1: float = K1,
        b: float = B,
        patch_min_postings: int = PATCH_MIN_POSTINGS,
        vectorise_min_postings: int = VECTORISE_MIN_POSTINGS,
    ) -> None:
        self.field_weights = tuple(field_weights)
        self.patch_min_postings = patch_min_postings
        self.vectorise_min_postings = vectorise_min_postings
        self.k1 = k1
        self.b = b
        self.postings: dict[str, dict[int, Posting]] = {}
        self.refs: list[str | None] = []  # doc id -> ref; None marks a free slot
        self.doc_terms: list[tuple[str, ...]] = []  # doc id -> its distinct terms, for removal
        self.ids: dict[str, int] = {}  # ref -> doc id
        self.total_lengths = [0] * len(self.field_weights)
        self.surfaces: Counter[str] = Counter()  # folded surface word -> documents holding it
        self.surface_buckets: dict[tuple[str, int], dict[str, None]] = {}  # (first char, length)
        self._lengths = np.zeros((16, len(self.field_weights)))  # doc id -> field lengths
        self._length_rows: list[tuple[int, ...]] = []  # the same, as tuples for the plain loop
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # term -> (ids, tf), lazily
        self._doc_surfaces: list[tuple[str, ...]] = []
        self._free: list[int] = []
        self._last_only = _LastFieldPostings(len(self.field_weights))

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, ref: object) -> bool:
        return ref in self.ids

    def add(self, ref: str, fields: Sequence[Sequence[str]], surfaces: Iterable[str] = ()) -> None:
        """Index one document given the terms of each field; replaces an existing ``ref``."""
        if ref in self.ids:
            self.remove(ref)
        counts = self._postings_of(fields)
        doc_id = self._free.pop() if self._free else self._grow()
        self.refs[doc_id] = ref
        self.ids[ref] = doc_id
        lengths = tuple(map(len, fields))
        self._lengths[doc_id] = lengths
        for field, length in enumerate(lengths):
            self.total_lengths[field] += length
        self._length_rows[doc_id] = lengths
        self.doc_terms[doc_id] = tuple(counts)
        postings = self.postings
        for term, posting in counts.items():
            try:
                postings[term][doc_id] = posting
            except KeyError:  # a term no document held yet
                postings[term] = {doc_id: posting}
        if self._arrays:  # only terms some query has already turned into arrays
            for term in self._arrays.keys() & counts.keys():
                self._patch_arrays(term, doc_id, counts[term])
        distinct_surfaces = tuple(dict.fromkeys(surfaces))
        self._doc_surfaces[doc_id] = distinct_surfaces
        new_surfaces = list(filterfalse(self.surfaces.__contains__, distinct_surfaces))
        self.surfaces.update(distinct_surfaces)
        for surface in new_surfaces:
            self.surface_buckets.setdefault(_bucket(surface), {})[surface] = None

    def _postings_of(self, fields: Sequence[Sequence[str]]) -> dict[str, Posting]:
        # Most terms occur only in the last field (the body): their postings come from one Counter
        # and a shared tuple per count, in C; only the few terms of the other fields are merged here.
        *head, last = fields
        counts: dict[str, Posting] = dict(
            zip(last_counts := Counter(last), map(self._last_only.__getitem__, last_counts.values()))
        )
        if any(head):
            head_counts = [Counter(terms) for terms in head]
            for term in dict.fromkeys(chain.from_iterable(head)):
                counts[term] = (*(c[term] for c in head_counts), last_counts[term])
        return counts

    def state(self) -> dict[str, Any]:
        """The index as plain dicts, lists, tuples, numbers and strings (for a persistent cache)."""
        return {
            "field_weights": self.field_weights,
            "k1": self.k1,
            "b": self.b,
            "postings": self.postings,
            "refs": self.refs,
            "doc_terms": self.doc_terms,
            "total_lengths": self.total_lengths,
            "surfaces": dict(self.surfaces),
            "length_rows": self._length_rows,
            "doc_surfaces": self._doc_surfaces,
            "free": self._free,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FieldIndex:
        """The index ``state()`` described; raises ValueError when its parts do not fit together."""
        index = cls(state["field_weights"], k1=state["k1"], b=state["b"])
        index.postings = state["postings"]
        index.refs = list(state["refs"])
        index.doc_terms = list(state["doc_terms"])
        index.total_lengths = list(state["total_lengths"])
        index.surfaces = Counter(state["surfaces"])
        index._length_rows = list(state["length_rows"])
        index._doc_surfaces = list(state["doc_surfaces"])
        index._free = list(state["free"])
        n_docs, n_fields = len(index.refs), len(index.field_weights)
        if not (len(index.doc_terms) == len(index._length_rows) == len(index._doc_surfaces) == n_docs):
            raise ValueError("index state: per-document lists differ in length")
        index.ids = {ref: doc_id for doc_id, ref in enumerate(index.refs) if ref is not None}
        lengths = np.zeros((max(16, n_docs), n_fields))
        for doc_id, row in enumerate(index._length_rows):
            if row:
                lengths[doc_id] = row
        index._lengths = lengths
        if [int(total) for total in lengths.sum(axis=0)] != index.total_lengths:
            raise ValueError("index state: field lengths do not add up")
        for surface in index.surfaces:
            index.surface_buckets.setdefault(_bucket(surface), {})[surface] = None
        return index

    def remove(self, ref: str) -> bool:
        """Drop one document; False when it was not indexed."""
        doc_id = self.ids.pop(ref, None)
        if doc_id is None:
            return False
        for term in self.doc_terms[doc_id]:
            docs = self.postings[term]
            del docs[doc_id]
            self._patch_arrays(term, doc_id, None)
            if not docs:
                del self.postings[term]
        for surface in self._doc_surfaces[doc_id]:
            left = self.surfaces[surface] - 1
            if left:
                self.surfaces[surface] = left
            else:
                del self.surfaces[surface]
                del self.surface_buckets[_bucket(surface)][surface]
        for field in range(len(self.field_weights)):
            self.total_lengths[field] -= int(self._lengths[doc_id, field])
        self._lengths[doc_id] = 0.0
        self._length_rows[doc_id] = ()
        self.refs[doc_id] = None
        self.doc_terms[doc_id] = ()
        self._doc_surfaces[doc_id] = ()
        self._free.append(doc_id)
        return True

    def doc_freq(self, term: str) -> int:
        return len(self.postings.get(term, ()))

    def idf(self, term: str) -> float:
        return bm25_idf(len(self.ids), self.doc_freq(term))

    def posting(self, term: str, ref: str) -> Posting | None:
        """Per-field frequencies of ``term`` in ``ref``, or None when it does not occur there."""
        doc_id = self.ids.get(ref)
        return None if doc_id is None else self.postings.get(term, {}).get(doc_id)

    def score(self, query: Sequence[QueryTerm], *, limit: int = 50) -> tuple[list[Hit], int]:
        """The best ``limit`` documents for ``query`` (score desc, then ref), and how many were scored."""
        n = len(self.ids)
        terms = [(q, self.postings[q.term]) for q in query if q.term in self.postings]
        postings = sum(len(docs) for _, docs in terms)
        if not n or not postings:
            return [], 0
        b_over_avg = [self.b / (total / n) if total else 0.0 for total in self.total_lengths]
        if postings < self.vectorise_min_postings:
            scored = self._score_loop(terms, b_over_avg)
            return self._best(scored, limit), len(scored)
        scores = self._score_vectorised(terms, b_over_avg)
        touched = np.flatnonzero(scores)
        scanned = len(touched)
        if scanned > limit:
            # Keep every document tied with the limit-th score, so the ref tie-break decides.
            cutoff = np.partition(scores[touched], scanned - limit)[scanned - limit]
            touched = touched[scores[touched] >= cutoff]
        return self._best({int(i): float(scores[i]) for i in touched}, limit), scanned

    def _score_loop(self, terms: list[tuple[QueryTerm, dict[int, Posting]]], b_over_avg: list[float]) -> dict[int, float]:
        # The same arithmetic, in the same order, as _score_vectorised: both give identical floats.
        n, k1, one_minus_b, weights = len(self.ids), self.k1, 1.0 - self.b, self.field_weights
        rows = self._length_rows
        scores: dict[int, float] = {}
        for qterm, docs in terms:
            factor = bm25_idf(n, len(docs)) * qterm.weight * (k1 + 1.0)
            for doc_id, posting in docs.items():
                lengths = rows[doc_id]
                tf = 0.0
                for field, count in enumerate(posting):
                    if count:
                        tf += weights[field] * count / (one_minus_b + b_over_avg[field] * lengths[field])
                scores[doc_id] = scores.get(doc_id, 0.0) + factor * tf / (k1 + tf)
        return scores

    def _score_vectorised(self, terms: list[tuple[QueryTerm, dict[int, Posting]]], b_over_avg: list[float]) -> np.ndarray:
        n, k1, one_minus_b = len(self.ids), self.k1, 1.0 - self.b
        scores = np.zeros(len(self.refs))
        for qterm, docs in terms:
            ids, tfs = self._term_arrays(qterm.term, docs)
            lengths = self._lengths[ids]
            tf = np.zeros(len(ids))
            for field, weight in enumerate(self.field_weights):
                tf += weight * tfs[:, field] / (one_minus_b + b_over_avg[field] * lengths[:, field])
            factor = bm25_idf(n, len(docs)) * qterm.weight * (k1 + 1.0)
            scores[ids] += factor * tf / (k1 + tf)
        return scores

    def _best(self, scores: dict[int, float], limit: int) -> list[Hit]:
        refs = self.refs
        best = heapq.nsmallest(limit, ((-score, refs[i]) for i, score in scores.items()))
        return [Hit(ref, -negative) for negative, ref in best]  # type: ignore[arg-type]

    def _patch_arrays(self, term: str, doc_id: int, posting: Posting | None) -> None:
        # Long posting lists are patched in place (a C-speed copy) so that the first query after
        # an update does not rebuild them in Python; short ones are simply rebuilt when next used.
        arrays = self._arrays.get(term)
        if arrays is None:
            return
        ids, tfs = arrays
        if len(ids) < self.patch_min_postings:
            del self._arrays[term]
        elif posting is None:
            keep = ids != doc_id
            self._arrays[term] = (ids[keep], tfs[keep])
        else:
            row = np.array([posting], dtype=np.float64)
            self._arrays[term] = (np.append(ids, doc_id), np.concatenate((tfs, row)))

    def _term_arrays(self, term: str, docs: dict[int, Posting]) -> tuple[np.ndarray, np.ndarray]:
        arrays = self._arrays.get(term)
        if arrays is None:
            ids = np.fromiter(docs.keys(), dtype=np.int64, count=len(docs))
            tfs = np.array(list(docs.values()), dtype=np.float64).reshape(len(docs), -1)
            arrays = self._arrays[term] = (ids, tfs)
        return arrays

    def _grow(self) -> int:
        doc_id = len(self.refs)
        if doc_id >= len(self._lengths):
            grown = np.zeros((2 * len(self._lengths), len(self.field_weights)))
            grown[: len(self._lengths)] = self._lengths
            self._lengths = grown
        self.refs.append(None)
        self._length_rows.append(())
        self.doc_terms.append(())
        self._doc_surfaces.append(())
        return doc_id


def _bucket(surface: str) -> tuple[str, int]:
    return surface[:1], len(surface)


class _LastFieldPostings(dict[int, Posting]):
    """count -> the posting of a term found only in the last field: one shared tuple per count."""

    def __init__(self, n_fields: int) -> None:
        super().__init__()
        self.zeros = (0,) * (n_fields - 1)

    def __missing__(self, count: int) -> Posting:
        posting = self[count] = (*self.zeros, count)
        return posting
