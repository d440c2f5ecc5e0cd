"""The fast heuristic: BM25F over memory fields, typo tolerance, and a confidence gate.

It answers from an index kept current off the query path (in the store's subscriber
callback). Pure CPU, no I/O; a query holds the index lock only while it scores.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from rapidfuzz import fuzz, process

from memory_store import MemoryDoc, Snapshot
from recall_kit._index import FieldIndex, QueryTerm, bm25_idf
from recall_kit._tokenize import analyze, stem

MAX_FAST_DOCS = 2
RANKED_LIMIT = 50

# Field order in the index; name, description and keywords are what a memory is "about".
FIELDS = ("name", "description", "keywords", "body")
HEAD_FIELDS = frozenset({0, 1, 2})
# Chosen on agent-memories + locomo-dev (bench delivery, see bench/bench_heuristic.py).
FIELD_WEIGHTS = (2.0, 2.0, 2.0, 1.0)

# Typo tolerance: only for unknown words long enough that one slip leaves them recognisable.
TYPO_MIN_LENGTH = 5
TYPO_MIN_SIMILARITY = 85.0  # rapidfuzz ratio, 0..100
TYPO_MAX_EXPANSIONS = 2
TYPO_WEIGHT = 0.8  # an expansion counts below an exact match
TYPO_LENGTH_SLACK = 2

# Confidence gate (store-size independent features; chosen by cross-validation in bench delivery).
MIN_COVERAGE = 0.5  # share of the query's idf mass the best document matches
MIN_MATCHED_TERMS = 1  # distinct query terms the best document matches
SECOND_SCORE_RATIO = 0.7  # the second document only when this close to the first
SECOND_MIN_COVERAGE = 0.5


@dataclass(frozen=True, slots=True)
class ScoredDoc:
    """A document and its heuristic score."""

    doc: MemoryDoc
    score: float


@dataclass(frozen=True, slots=True)
class FastResult:
    """What the fast stage decided: the gated docs, the ungated ranking, and its cost."""

    docs: tuple[ScoredDoc, ...]
    ranked: tuple[ScoredDoc, ...]
    strategy: Literal["heuristic", "none"]
    elapsed_ms: float
    docs_scanned: int


class _Subscribable(Protocol):
    def snapshot(self) -> Snapshot: ...

    def subscribe(self, callback: Callable[[Snapshot], None]) -> Callable[[], None]: ...


@dataclass(frozen=True, slots=True)
class _Slot:
    """One distinct query term: its idf mass and the terms that may match it, with credit."""

    mass: float
    matches: tuple[QueryTerm, ...]


class FastHeuristic:
    """Deterministic lexical recall over a store (kept current) or a fixed snapshot."""

    def __init__(self, source: _Subscribable | Snapshot) -> None:
        self._lock = threading.Lock()  # guards _index and _docs; held while scoring or applying
        self._update_lock = threading.Lock()  # serialises updates; never taken by a query
        self._index = FieldIndex(FIELD_WEIGHTS)
        self._docs: Mapping[str, MemoryDoc] = {}
        self._version = -1
        self._unsubscribe: Callable[[], None] | None = None
        if isinstance(source, Snapshot):
            self.apply(source)
        else:
            self._unsubscribe = source.subscribe(self.apply)
            self.apply(source.snapshot())

    @property
    def version(self) -> int:
        """The snapshot version the index reflects."""
        return self._version

    def close(self) -> None:
        """Stop following the store."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def apply(self, snapshot: Snapshot) -> None:
        """Bring the index to ``snapshot``: incrementally from the previous version, else rebuilt."""
        with self._update_lock:
            if snapshot.version <= self._version:
                return
            if snapshot.version == self._version + 1:
                refs = sorted(snapshot.changed)
                fields = {ref: _doc_fields(snapshot.docs[ref]) for ref in refs if ref in snapshot.docs}
                with self._lock:
                    for ref in sorted(snapshot.removed):
                        self._index.remove(ref)
                    for ref, (terms, surfaces) in fields.items():
                        self._index.add(ref, terms, surfaces)
                    self._docs = snapshot.docs
                    self._version = snapshot.version
                return
            index = FieldIndex(FIELD_WEIGHTS)
            for ref in sorted(snapshot.docs):
                terms, surfaces = _doc_fields(snapshot.docs[ref])
                index.add(ref, terms, surfaces)
            with self._lock:
                self._index, self._docs, self._version = index, snapshot.docs, snapshot.version

    def recall(self, query: str, *, exclude: Collection[str] = ()) -> FastResult:
        """Rank the store for ``query`` and gate the ranking down to at most two confident docs."""
        started = time.perf_counter()
        tokens = analyze(query)
        with self._lock:
            index, docs = self._index, self._docs
            slots = _query_slots(index, tokens)
            terms = _dedupe(match for slot in slots for match in slot.matches)
            hits, scanned = index.score(terms, limit=RANKED_LIMIT + len(exclude))
            hits = [hit for hit in hits if hit.ref not in exclude][:RANKED_LIMIT]
            coverage = [_coverage(index, slots, hit.ref) for hit in hits[:MAX_FAST_DOCS]]
        ranked = tuple(ScoredDoc(docs[hit.ref], hit.score) for hit in hits)
        chosen = _gate(ranked, coverage)
        return FastResult(
            docs=chosen,
            ranked=ranked,
            strategy="heuristic" if chosen else "none",
            elapsed_ms=(time.perf_counter() - started) * 1000.0,
            docs_scanned=scanned,
        )


@dataclass(frozen=True, slots=True)
class _Coverage:
    share: float  # matched idf mass / query idf mass
    terms: int  # distinct query slots matched
    in_head: bool  # some match in name, description or keywords


def _gate(ranked: tuple[ScoredDoc, ...], coverage: list[_Coverage]) -> tuple[ScoredDoc, ...]:
    if not ranked:
        return ()
    best = coverage[0]
    if best.share < MIN_COVERAGE or best.terms < MIN_MATCHED_TERMS:
        return ()
    chosen = [ranked[0]]
    if len(ranked) > 1:
        second = coverage[1]
        if (
            ranked[1].score >= SECOND_SCORE_RATIO * ranked[0].score
            and second.share >= SECOND_MIN_COVERAGE
        ):
            chosen.append(ranked[1])
    return tuple(chosen)


def _coverage(index: FieldIndex, slots: list[_Slot], ref: str) -> _Coverage:
    total = sum(slot.mass for slot in slots) or 1.0
    matched = 0.0
    terms = 0
    in_head = False
    for slot in slots:
        credit = 0.0
        for match in slot.matches:
            posting = index.posting(match.term, ref)
            if posting:
                credit = max(credit, match.weight)
                in_head = in_head or any(posting[field] for field in HEAD_FIELDS)
        if credit:
            matched += credit * slot.mass
            terms += 1
    return _Coverage(matched / total, terms, in_head)


def _query_slots(index: FieldIndex, tokens: list) -> list[_Slot]:
    n = len(index)
    slots: list[_Slot] = []
    seen: set[str] = set()
    for token in tokens:
        if token.term in seen:
            continue
        seen.add(token.term)
        df = index.doc_freq(token.term)
        if df:
            slots.append(_Slot(bm25_idf(n, df), (QueryTerm(token.term),)))
            continue
        if token.surface is None and not _is_cjk_bigram(token.term):
            continue  # an unknown whole identifier: its parts carry it
        expansions = _typo_expansions(index, token.surface) if token.surface else ()
        slots.append(_Slot(bm25_idf(n, 0), expansions))
    return slots


def _typo_expansions(index: FieldIndex, surface: str) -> tuple[QueryTerm, ...]:
    if len(surface) < TYPO_MIN_LENGTH or not surface.isalpha():
        return ()
    # Typos rarely hit the first letter; bucketing by it keeps this cheap at 50,000 documents.
    candidates: list[str] = []
    for length in range(len(surface) - TYPO_LENGTH_SLACK, len(surface) + TYPO_LENGTH_SLACK + 1):
        candidates.extend(index.surface_buckets.get((surface[0], length), ()))
    found = process.extract(
        surface,
        candidates,
        scorer=fuzz.ratio,
        score_cutoff=TYPO_MIN_SIMILARITY,
        limit=TYPO_MAX_EXPANSIONS,
    )
    found.sort(key=lambda item: (-item[1], item[0]))
    return tuple(QueryTerm(stem(word), TYPO_WEIGHT * score / 100.0) for word, score, _ in found)


def _is_cjk_bigram(term: str) -> bool:
    return len(term) == 2 and not term.isascii()


def _dedupe(terms) -> list[QueryTerm]:
    best: dict[str, float] = {}
    for term in terms:
        best[term.term] = max(best.get(term.term, 0.0), term.weight)
    return [QueryTerm(term, weight) for term, weight in best.items()]


def _doc_fields(doc: MemoryDoc) -> tuple[tuple[list[str], ...], list[str]]:
    texts = (doc.name, doc.description, " ".join(doc.keywords), doc.body)
    fields: list[list[str]] = []
    surfaces: list[str] = []
    for text in texts:
        tokens = analyze(text)
        fields.append([token.term for token in tokens])
        surfaces.extend(token.surface for token in tokens if token.surface)
    return tuple(fields), surfaces
