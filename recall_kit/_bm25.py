"""BM25F's formula and the index's read side, without numpy: what both indexes score with.

``FieldIndex`` (``_index``, numpy) applies these to whole arrays of postings at once; ``FrozenIndex``
(``_frozen_index``, the standard library) to one posting at a time. Each operation is written here
once and both evaluate it in the same order, so they give the same scores to the last bit.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

K1 = 1.2  # Lucene's default (rank-bm25 uses 1.5; the pin test passes k1 through)
B = 0.75  # the usual default, in rank-bm25 and Lucene alike

Posting = tuple[int, ...]  # term frequency in each field

# The saved index's arrays (``FieldIndex.state``), as typecodes of the array module; numpy reads the
# same codes. Document ids and term frequencies take the smallest unsigned type that holds them.
Code = Literal["B", "H", "I", "i", "q"]
UINT_CODES: dict[str, Code] = {"u1": "B", "u2": "H", "u4": "I"}
OFFSET_CODE: Code = "q"  # where each term's (or surface word's) postings start: int64
LENGTH_CODE: Code = "i"  # each document's length in each field: int32


def bm25_idf(n_docs: int, doc_freq: int) -> float:
    """Non-negative idf: a term in every document still counts a little (BM25Okapi's goes <= 0)."""
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def term_factor(n_docs: int, doc_freq: int, weight: float, k1: float) -> float:
    """What every posting of one query term is multiplied by: its idf, its weight in the query, k1 + 1."""
    return bm25_idf(n_docs, doc_freq) * weight * (k1 + 1.0)


def length_norms(field_b: Sequence[float], total_lengths: Sequence[int], n_docs: int) -> tuple[list[float], list[float]]:
    """Per field, the two parts of its length normalisation: ``1 - b`` and ``b / average length``."""
    keep = [1.0 - b for b in field_b]
    per_length = [b / (total / n_docs) if total else 0.0 for b, total in zip(field_b, total_lengths)]
    return keep, per_length


def field_tf(weight: Any, tf: Any, keep: Any, per_length: Any, length: Any) -> Any:
    """One field's share of tf~: its frequency, weighted and length-normalised. Numbers or numpy
    arrays alike; a document's tf~ is its fields' shares summed in field order."""
    return weight * tf / (keep + per_length * length)


def saturated(factor: Any, tf: Any, k1: float) -> Any:
    """A posting's score from its tf~ (BM25's saturation); numbers or numpy arrays alike. A
    document's score is its postings' summed from 0.0, in query-term order."""
    return factor * tf / (k1 + tf)


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


class ScoringIndex(Protocol):
    """What query analysis and the heuristic read of an index (FieldIndex and FrozenIndex alike)."""

    field_weights: tuple[float, ...]
    b: float | tuple[float, ...]
    ids: dict[str, int]

    def __len__(self) -> int: ...

    def doc_freq(self, term: str) -> int:
        """How many documents hold ``term``."""

    def idf(self, term: str) -> float:
        """``term``'s idf in this index."""

    def posting(self, term: str, ref: str) -> Posting | None:
        """Per-field frequencies of ``term`` in ``ref``, or None when it does not occur there."""

    def held_in(self, term: str, fields: Sequence[int]) -> bool:
        """Whether some document holds ``term`` in one of ``fields`` (field numbers)."""

    def surface_candidates(self, first: str, lengths: Iterable[int]) -> list[str]:
        """Surface words starting with ``first`` of the given lengths."""

    def surface_doc_count(self, word: str) -> int:
        """How many documents hold ``word`` as a surface word."""

    def score(self, query: Sequence[QueryTerm], *, limit: int = 50) -> tuple[list[Hit], int]:
        """The best ``limit`` documents for ``query`` (score desc, then ref), and how many were scored."""


def best_hits(scored: Iterable[tuple[float, str]], limit: int) -> list[Hit]:
    """The ``limit`` best of (score, ref) pairs: highest score first, ties by ref."""
    best = heapq.nsmallest(limit, ((-score, ref) for score, ref in scored))
    return [Hit(ref, -negative) for negative, ref in best]


class Shelves:
    """Words by first character, each shelf sorted by length: a run of lengths is one list slice."""

    def __init__(self, words: Iterable[str]) -> None:
        grouped: dict[str, list[str]] = {}
        for word in words:
            grouped.setdefault(word[:1], []).append(word)
        self._words = {first: sorted(shelf, key=len) for first, shelf in grouped.items()}
        self._lengths = {first: [len(word) for word in shelf] for first, shelf in self._words.items()}

    def add(self, word: str) -> None:
        """Shelve one more word."""
        words, lengths = self._words.setdefault(word[:1], []), self._lengths.setdefault(word[:1], [])
        at = bisect_right(lengths, len(word))
        words.insert(at, word)
        lengths.insert(at, len(word))

    def between(self, first: str, shortest: int, longest: int) -> list[str]:
        """The words starting with ``first`` of ``shortest`` to ``longest`` characters."""
        lengths = self._lengths.get(first)
        if not lengths:
            return []
        return self._words[first][bisect_left(lengths, shortest) : bisect_right(lengths, longest)]

    def candidates(self, first: str, lengths: Iterable[int]) -> list[str]:
        """The words starting with ``first`` of any of ``lengths``."""
        if isinstance(lengths, range) and lengths.step == 1:
            return self.between(first, lengths.start, lengths.stop - 1)
        return [word for length in lengths for word in self.between(first, length, length)]


class IndexReading:
    """What ``FieldIndex`` and ``FrozenIndex`` read alike, from their ``ids`` (ref -> doc id), ``terms``
    and ``surface_words`` and each one's own ``doc_freq``: stated once, so the two cannot drift."""

    ids: dict[str, int]
    terms: list[str]
    surface_words: list[str]
    _shelves: Shelves | None  # surface words by first character and length, built on first use

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, ref: object) -> bool:
        return ref in self.ids

    def doc_freq(self, term: str) -> int:
        """How many documents hold ``term``."""
        raise NotImplementedError

    def idf(self, term: str) -> float:
        """``term``'s idf in this index."""
        return bm25_idf(len(self.ids), self.doc_freq(term))

    def doc_freqs(self) -> dict[str, int]:
        """Every term some document holds, with its document frequency."""
        return {term: df for term in self.terms if (df := self.doc_freq(term))}

    def surface_candidates(self, first: str, lengths: Iterable[int]) -> list[str]:
        """Surface words starting with ``first`` of the given lengths (some may be held by no document)."""
        if self._shelves is None:
            self._shelves = Shelves(self.surface_words)
        return self._shelves.candidates(first, lengths)
