"""An incremental inverted index scored with BM25F (BM25 over weighted fields).

Per term and document (Robertson's BM25F, with rank-bm25's BM25Okapi as the one-field case):

    tf~(t, d) = sum over fields f of  weight_f * tf_f / (1 - b + b * len_f(d) / avglen_f)
    score(d)  = sum over query terms t of  idf(t) * tf~ * (k1 + 1) / (k1 + tf~)
    idf(t)    = log(1 + (N - n_t + 0.5) / (n_t + 0.5))      (never <= 0, unlike BM25Okapi's)

Documents are added and removed one at a time; N, df and the average lengths are running
totals, so an updated index scores exactly like one rebuilt from scratch. Scoring touches
only the postings of the query's terms. The index is not thread-safe: its owner serialises
access (see ``FastHeuristic``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

K1 = 1.2  # rank-bm25's default
B = 0.75  # rank-bm25's default

Posting = tuple[tuple[int, int], ...]  # (field index, term frequency) for the fields holding the term


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

    def __init__(self, field_weights: Sequence[float], *, k1: float = K1, b: float = B) -> None:
        self.field_weights = tuple(field_weights)
        self.k1 = k1
        self.b = b
        self.postings: dict[str, dict[int, Posting]] = {}
        self.refs: list[str | None] = []  # doc id -> ref; None marks a free slot
        self.lengths: list[tuple[int, ...]] = []  # doc id -> length of each field
        self.doc_terms: list[tuple[str, ...]] = []  # doc id -> its distinct terms, for removal
        self.ids: dict[str, int] = {}  # ref -> doc id
        self.total_lengths = [0] * len(self.field_weights)
        self.surfaces: dict[str, int] = {}  # folded surface word -> documents holding it
        self.surfaces_by_length: dict[int, dict[str, None]] = {}  # for typo look-ups
        self._doc_surfaces: list[tuple[str, ...]] = []
        self._free: list[int] = []

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, ref: object) -> bool:
        return ref in self.ids

    def add(
        self, ref: str, fields: Sequence[Sequence[str]], surfaces: Iterable[str] = ()
    ) -> None:
        """Index one document given the terms of each field; replaces an existing ``ref``."""
        if ref in self.ids:
            self.remove(ref)
        counts: dict[str, dict[int, int]] = {}
        for field, terms in enumerate(fields):
            for term in terms:
                per_field = counts.setdefault(term, {})
                per_field[field] = per_field.get(field, 0) + 1
        doc_id = self._free.pop() if self._free else self._grow()
        self.refs[doc_id] = ref
        lengths = tuple(len(terms) for terms in fields)
        self.lengths[doc_id] = lengths
        self.doc_terms[doc_id] = tuple(counts)
        distinct_surfaces = tuple(dict.fromkeys(surfaces))
        self._doc_surfaces[doc_id] = distinct_surfaces
        self.ids[ref] = doc_id
        for field, length in enumerate(lengths):
            self.total_lengths[field] += length
        for term, per_field in counts.items():
            self.postings.setdefault(term, {})[doc_id] = tuple(sorted(per_field.items()))
        for surface in distinct_surfaces:
            count = self.surfaces.get(surface, 0)
            self.surfaces[surface] = count + 1
            if not count:
                self.surfaces_by_length.setdefault(len(surface), {})[surface] = None

    def remove(self, ref: str) -> bool:
        """Drop one document; False when it was not indexed."""
        doc_id = self.ids.pop(ref, None)
        if doc_id is None:
            return False
        for term in self.doc_terms[doc_id]:
            docs = self.postings[term]
            del docs[doc_id]
            if not docs:
                del self.postings[term]
        for surface in self._doc_surfaces[doc_id]:
            left = self.surfaces[surface] - 1
            if left:
                self.surfaces[surface] = left
            else:
                del self.surfaces[surface]
                del self.surfaces_by_length[len(surface)][surface]
        for field, length in enumerate(self.lengths[doc_id]):
            self.total_lengths[field] -= length
        self.refs[doc_id] = None
        self.doc_terms[doc_id] = ()
        self._doc_surfaces[doc_id] = ()
        self._free.append(doc_id)
        return True

    def idf(self, term: str) -> float:
        return bm25_idf(len(self.ids), len(self.postings.get(term, ())))

    def term_score(self, term_idf: float, posting: Posting, doc_id: int) -> float:
        """One term's BM25F contribution to one document (the formula in the module docstring)."""
        n = len(self.ids)
        lengths = self.lengths[doc_id]
        tf = 0.0
        for field, count in posting:
            average = self.total_lengths[field] / n or 1.0
            norm = 1.0 - self.b + self.b * lengths[field] / average
            tf += self.field_weights[field] * count / norm
        return term_idf * tf * (self.k1 + 1.0) / (self.k1 + tf)

    def score(self, query: Sequence[QueryTerm], *, limit: int = 50) -> tuple[list[Hit], int]:
        """The best ``limit`` documents for ``query`` (score desc, then ref) and postings visited."""
        n = len(self.ids)
        if not n:
            return [], 0
        weights = self.field_weights
        k1 = self.k1
        one_minus_b = 1.0 - self.b
        b_over_avg = [self.b / (total / n) if total else 0.0 for total in self.total_lengths]
        lengths = self.lengths
        scores: dict[int, float] = {}
        visited = 0
        for qterm in query:
            docs = self.postings.get(qterm.term)
            if not docs:
                continue
            factor = bm25_idf(n, len(docs)) * qterm.weight * (k1 + 1.0)
            visited += len(docs)
            for doc_id, posting in docs.items():
                doc_lengths = lengths[doc_id]
                tf = 0.0
                for field, count in posting:
                    tf += weights[field] * count / (one_minus_b + b_over_avg[field] * doc_lengths[field])
                scores[doc_id] = scores.get(doc_id, 0.0) + factor * tf / (k1 + tf)
        refs = self.refs
        best = heapq.nsmallest(
            limit, scores.items(), key=lambda item: (-item[1], refs[item[0]])
        )
        return [Hit(refs[doc_id], score) for doc_id, score in best], visited  # type: ignore[arg-type]

    def matched_fields(self, term: str, ref: str) -> frozenset[int]:
        """The fields of ``ref`` that hold ``term`` (empty when none)."""
        doc_id = self.ids.get(ref)
        posting = self.postings.get(term, {}).get(doc_id) if doc_id is not None else None
        return frozenset(field for field, _ in posting or ())

    def _grow(self) -> int:
        self.refs.append(None)
        self.lengths.append(())
        self.doc_terms.append(())
        self._doc_surfaces.append(())
        return len(self.refs) - 1


def build_index(
    docs: Mapping[str, Sequence[Sequence[str]]], field_weights: Sequence[float]
) -> FieldIndex:
    """An index over ``docs`` (ref -> terms per field), added in ref order for determinism."""
    index = FieldIndex(field_weights)
    for ref in sorted(docs):
        index.add(ref, docs[ref])
    return index
