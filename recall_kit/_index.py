"""An incremental inverted index scored with BM25F (BM25 over weighted fields).

Per term and document (Robertson's BM25F, with rank-bm25's BM25Okapi as the one-field case):

    tf~(t, d) = sum over fields f of  weight_f * tf_f / (1 - b + b * len_f(d) / avglen_f)
    score(d)  = sum over query terms t of  idf(t) * tf~ * (k1 + 1) / (k1 + tf~)
    idf(t)    = log(1 + (N - n_t + 0.5) / (n_t + 0.5))      (never <= 0, unlike BM25Okapi's)

Each step of it is written once, in ``_bm25``, which ``FrozenIndex`` (a read-only twin without
numpy, for one-shot queries over a small cached index) applies in the same order.

Terms and surface words are integer ids. Postings live in two parts: a packed base (numpy arrays
sorted by term, then document: built in bulk, saved and loaded as bytes) and a small delta of
documents added one at a time since. A removed base document is only marked dead. When the delta
or the dead grow past a share of the base, both are folded into a new base (``compact``), so an
updated index scores exactly like one rebuilt from scratch. Scoring touches only the postings of
the query's terms, vectorised over all of them at once. The index is not thread-safe: its owner serialises access
(see FastHeuristic).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, cast

import numpy as np

from recall_kit._bm25 import (
    B,
    K1,
    LENGTH_CODE,
    OFFSET_CODE,
    UINT_CODES,
    Hit,
    IndexReading,
    Posting,
    QueryTerm,
    best_hits,
    field_tf,
    length_norms,
    saturated,
    term_factor,
)
from recall_kit._corpus import Corpus

# The delta is folded into the base past this many postings or 1/8 of the base's, whichever is more:
# a query converts the delta's postings of its terms in Python, a fold costs about 0.1 s per 1M postings.
COMPACT_MIN_POSTINGS = 20_000
COMPACT_SHARE = 8


@dataclass(frozen=True, slots=True)
class TermPostings:
    """Every posting of an index as arrays, one row per (term, document): for whole-store analyses."""

    refs: tuple[str, ...]  # document id -> ref
    terms: tuple[str, ...]  # term id -> term
    term_ids: np.ndarray  # per posting
    doc_ids: np.ndarray  # per posting
    tfs: np.ndarray  # per posting, the term's frequency in each field


@dataclass(frozen=True, slots=True)
class _Packed:
    """Sorted (key, document) pairs grouped by key: key k's documents are docs[ptr[k]:ptr[k + 1]]."""

    ptr: np.ndarray  # int64, one more than the keys
    docs: np.ndarray  # int32, ascending within a key
    values: np.ndarray | None  # per pair (term frequencies per field), or None

    @staticmethod
    def build(
        n_keys: int, keys: np.ndarray, docs: np.ndarray, values: np.ndarray | None = None, *, presorted: bool = False
    ) -> _Packed:
        """Pack distinct (key, document) pairs, sorting them by key, then document, unless ``presorted``."""
        ptr = np.zeros(n_keys + 1, dtype=np.int64)
        np.cumsum(np.bincount(keys, minlength=n_keys), out=ptr[1:])
        if not presorted:
            order = np.lexsort((docs, keys))
            docs, values = docs[order], None if values is None else values[order]
        return _Packed(ptr, docs.astype(np.int32), values)

    def span(self, key: int) -> tuple[int, int]:
        if key >= len(self.ptr) - 1:
            return 0, 0
        return int(self.ptr[key]), int(self.ptr[key + 1])


class FieldIndex(IndexReading):
    """Postings per term, lengths per document and field, and the running totals BM25 needs."""

    def __init__(
        self,
        field_weights: Sequence[float],
        *,
        k1: float = K1,
        b: float | Sequence[float] = B,
        compact_min_postings: int = COMPACT_MIN_POSTINGS,
    ) -> None:
        """``b``: the length normalisation, one for all fields or one per field (0: a field's length
        does not count, for a field most documents leave empty)."""
        n_fields = len(field_weights)
        self.field_weights = tuple(field_weights)
        self.k1 = k1
        self.b = b if isinstance(b, (int, float)) else tuple(b)
        field_b = (float(b),) * n_fields if isinstance(b, (int, float)) else tuple(float(x) for x in b)
        if len(field_b) != n_fields:
            raise ValueError(f"b: {len(field_b)} given, one per field ({n_fields})")
        self._field_b = np.array(field_b, dtype=np.float64)
        self.compact_min_postings = compact_min_postings
        self.terms: list[str] = []  # term id -> term
        self.term_ids: dict[str, int] = {}
        self.surface_words: list[str] = []  # surface id -> folded word as typed in some document
        self.surface_ids: dict[str, int] = {}
        self.refs: list[str | None] = []  # doc id -> ref; None once removed
        self.ids: dict[str, int] = {}  # ref -> doc id
        self.total_lengths = [0] * n_fields
        self._weights = np.array(self.field_weights, dtype=np.float64)
        self._lengths = np.zeros((16, n_fields))  # doc id -> field lengths
        self._alive = np.zeros(16, dtype=bool)
        self._base = _Packed(np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros((0, n_fields), np.int32))
        self._base_surfaces = _Packed(np.zeros(1, np.int64), np.zeros(0, np.int32), None)
        self._base_size = 0  # doc ids below this were packed into the base
        self._base_dead = 0  # base documents removed since
        self._delta: dict[int, dict[int, Posting]] = {}  # term id -> doc id -> posting
        self._delta_surfaces: dict[int, dict[int, None]] = {}  # surface id -> doc ids
        self._delta_docs: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}  # doc id -> term, surface ids
        self._delta_postings = 0
        self._shelves = None

    # --- building -------------------------------------------------------------

    @classmethod
    def from_corpus(cls, field_weights: Sequence[float], corpus: Corpus, **options: Any) -> FieldIndex:
        """An index of every document in ``corpus``, packed in one pass (refs must be distinct)."""
        index = cls(field_weights, **options)
        n_docs, n_fields = len(corpus.refs), len(index.field_weights)
        if len(corpus.field_tokens) != n_fields:
            raise ValueError(f"corpus has {len(corpus.field_tokens)} fields, the index {n_fields}")
        if not n_docs:
            return index
        lengths = np.zeros((n_docs, n_fields), dtype=np.int64)
        keys = []
        for field, (docs, term_ids) in enumerate(corpus.field_tokens):
            lengths[:, field] = np.bincount(docs, minlength=n_docs)
            keys.append((term_ids * n_docs + docs) * n_fields + field)
        # One sort of (term, doc, field) keys counts every posting: runs of equal keys are frequencies.
        keyed, counts = _runs(np.concatenate(keys), len(corpus.terms) * n_docs * n_fields)
        pairs, fields = keyed // n_fields, keyed % n_fields
        first = np.empty(len(pairs), dtype=bool)
        first[:1], first[1:] = True, pairs[1:] != pairs[:-1]
        tfs = np.zeros((int(first.sum()), n_fields), dtype=np.int32)
        tfs[np.cumsum(first) - 1, fields] = counts
        pairs = pairs[first]
        surface_docs, surface_ids = corpus.surface_pairs
        surface_pairs, _ = _runs(surface_ids * n_docs + surface_docs, len(corpus.surfaces) * n_docs)
        index._set_base(
            refs=list(corpus.refs),
            terms=corpus.terms,
            surfaces=corpus.surfaces,
            lengths=lengths,
            postings=_Packed.build(len(corpus.terms), pairs // n_docs, pairs % n_docs, tfs, presorted=True),
            surface_docs=_Packed.build(len(corpus.surfaces), surface_pairs // n_docs, surface_pairs % n_docs, presorted=True),
        )
        return index

    def _set_base(
        self, *, refs: list[str], terms: list[str], surfaces: list[str], lengths: np.ndarray,
        postings: _Packed, surface_docs: _Packed,
    ) -> None:
        n_docs = len(refs)
        self.refs = list(refs)
        self.ids = dict(zip(refs, range(n_docs)))
        if len(self.ids) != n_docs:
            raise ValueError("index: a ref occurs twice")
        self.terms, self.term_ids = terms, dict(zip(terms, range(len(terms))))
        self.surface_words, self.surface_ids = surfaces, dict(zip(surfaces, range(len(surfaces))))
        capacity = max(16, n_docs)
        self._lengths = np.zeros((capacity, len(self.field_weights)))
        self._lengths[:n_docs] = lengths
        self.total_lengths = [int(total) for total in lengths.sum(axis=0)] if n_docs else [0] * len(self.field_weights)
        self._alive = np.zeros(capacity, dtype=bool)
        self._alive[:n_docs] = True
        self._base, self._base_surfaces = postings, surface_docs
        self._base_size, self._base_dead = n_docs, 0
        self._delta, self._delta_surfaces, self._delta_docs, self._delta_postings = {}, {}, {}, 0
        self._shelves = None

    def add(self, ref: str, fields: Sequence[Sequence[str]], surfaces: Iterable[str] = ()) -> None:
        """Index one document given the terms of each field; replaces an existing ``ref``."""
        if ref in self.ids:
            self.remove(ref)
        counts = _postings_of(fields)
        doc_id = self._grow()
        self.refs[doc_id] = ref
        self.ids[ref] = doc_id
        lengths = tuple(map(len, fields))
        self._lengths[doc_id] = lengths
        self._alive[doc_id] = True
        for field, length in enumerate(lengths):
            self.total_lengths[field] += length
        term_ids = tuple(map(self._term_id, counts))
        for term_id, posting in zip(term_ids, counts.values()):
            self._delta.setdefault(term_id, {})[doc_id] = posting
        surface_ids = tuple(map(self._surface_id, dict.fromkeys(surfaces)))
        for surface_id in surface_ids:
            self._delta_surfaces.setdefault(surface_id, {})[doc_id] = None
        self._delta_docs[doc_id] = (term_ids, surface_ids)
        self._delta_postings += len(term_ids)
        self._compact_if_due()

    def remove(self, ref: str) -> bool:
        """Drop one document; False when it was not indexed."""
        doc_id = self.ids.pop(ref, None)
        if doc_id is None:
            return False
        delta = self._delta_docs.pop(doc_id, None)
        if delta is None:
            self._base_dead += 1
        else:
            term_ids, surface_ids = delta
            for term_id in term_ids:
                _discard(self._delta, term_id, doc_id)
            for surface_id in surface_ids:
                _discard(self._delta_surfaces, surface_id, doc_id)
            self._delta_postings -= len(term_ids)
        for field in range(len(self.field_weights)):
            self.total_lengths[field] -= int(self._lengths[doc_id, field])
        self._lengths[doc_id] = 0.0
        self._alive[doc_id] = False
        self.refs[doc_id] = None
        self._compact_if_due()
        return True

    def compact(self) -> None:
        """Fold the delta and the dead into a new packed base; ids are renumbered, scores unchanged."""
        n_fields = len(self.field_weights)
        alive = self._alive[: len(self.refs)]
        new_ids = np.cumsum(alive) - 1
        base_terms = np.repeat(np.arange(len(self._base.ptr) - 1), np.diff(self._base.ptr))
        keep = alive[self._base.docs]
        delta = [(term_id, doc_id, posting) for term_id, docs in self._delta.items() for doc_id, posting in docs.items()]
        term_keys = np.concatenate((base_terms[keep], np.fromiter((t for t, _, _ in delta), np.int64, len(delta))))
        docs = np.concatenate((self._base.docs[keep], np.fromiter((d for _, d, _ in delta), np.int64, len(delta))))
        assert self._base.values is not None
        tfs = np.concatenate(
            (self._base.values[keep], np.array([p for _, _, p in delta], dtype=np.int32).reshape(-1, n_fields))
        )
        base_surfaces = np.repeat(np.arange(len(self._base_surfaces.ptr) - 1), np.diff(self._base_surfaces.ptr))
        keep_surfaces = alive[self._base_surfaces.docs]
        delta_surfaces = [(s, d) for s, docs in self._delta_surfaces.items() for d in docs]
        surface_keys = np.concatenate(
            (base_surfaces[keep_surfaces], np.fromiter((s for s, _ in delta_surfaces), np.int64, len(delta_surfaces)))
        )
        surface_docs = np.concatenate(
            (self._base_surfaces.docs[keep_surfaces], np.fromiter((d for _, d in delta_surfaces), np.int64, len(delta_surfaces)))
        )
        # Terms and surfaces no document holds any more are dropped, and the rest renumbered.
        terms, term_map = _renumber(self.terms, term_keys)
        surfaces, surface_map = _renumber(self.surface_words, surface_keys)
        self._set_base(
            refs=[ref for ref in self.refs if ref is not None],
            terms=terms,
            surfaces=surfaces,
            lengths=self._lengths[: len(self.refs)][alive],
            postings=_Packed.build(len(terms), term_map[term_keys], new_ids[docs], tfs),
            surface_docs=_Packed.build(len(surfaces), surface_map[surface_keys], new_ids[surface_docs]),
        )

    def _compact_if_due(self) -> None:
        due = max(self.compact_min_postings, len(self._base.docs) // COMPACT_SHARE)
        holes = len(self.refs) - len(self.ids)  # removed documents, in the base or the delta
        if self._delta_postings > due or holes * COMPACT_SHARE > max(len(self.ids), 64):
            self.compact()

    def _term_id(self, term: str) -> int:
        term_id = self.term_ids.get(term)
        if term_id is None:
            term_id = self.term_ids[term] = len(self.terms)
            self.terms.append(term)
        return term_id

    def _surface_id(self, word: str) -> int:
        surface_id = self.surface_ids.get(word)
        if surface_id is None:
            surface_id = self.surface_ids[word] = len(self.surface_words)
            self.surface_words.append(word)
            if self._shelves is not None:
                self._shelves.add(word)
        return surface_id

    def _grow(self) -> int:
        doc_id = len(self.refs)
        if doc_id >= len(self._lengths):
            self._lengths = np.concatenate((self._lengths, np.zeros_like(self._lengths)))
            self._alive = np.concatenate((self._alive, np.zeros_like(self._alive)))
        self.refs.append(None)
        return doc_id

    def postings(self) -> TermPostings:
        """Every live posting, packed (the index compacts itself first when it changed since)."""
        if self._delta_postings or self._delta or len(self.refs) != len(self.ids):
            self.compact()
        assert self._base.values is not None
        term_ids = np.repeat(np.arange(len(self._base.ptr) - 1), np.diff(self._base.ptr))
        refs = tuple(ref for ref in self.refs if ref is not None)
        return TermPostings(refs, tuple(self.terms), term_ids, self._base.docs, self._base.values)

    # --- the persistent form ----------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The index as plain strings, numbers and bytes (for a persistent cache); compacts it first."""
        if self._delta_docs or self._base_dead or len(self.refs) != self._base_size:
            self.compact()
        assert self._base.values is not None
        return {
            "field_weights": self.field_weights,
            "k1": self.k1,
            "b": self.b,
            "refs": self.refs,
            "terms": self.terms,
            "surfaces": self.surface_words,
            "lengths": self._lengths[: len(self.refs)].astype(LENGTH_CODE).tobytes(),
            "doc_type": (doc_type := _smallest_uint(np.array([len(self.refs)]))),
            "term_ptr": self._base.ptr.astype(OFFSET_CODE).tobytes(),
            "term_docs": self._base.docs.astype(UINT_CODES[doc_type]).tobytes(),
            "term_tfs_type": (tfs_type := _smallest_uint(self._base.values)),
            "term_tfs": self._base.values.astype(UINT_CODES[tfs_type]).tobytes(),
            "surface_ptr": self._base_surfaces.ptr.astype(OFFSET_CODE).tobytes(),
            "surface_docs": self._base_surfaces.docs.astype(UINT_CODES[doc_type]).tobytes(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FieldIndex:
        """The index ``state()`` described; raises ValueError when its parts do not fit together."""
        index = cls(state["field_weights"], k1=state["k1"], b=state["b"])
        refs, terms, surfaces = state["refs"], state["terms"], state["surfaces"]
        if not all(isinstance(part, list) and set(map(type, part)) <= {str} for part in (refs, terms, surfaces)):
            raise ValueError("index state: refs, terms and surfaces must be lists of strings")
        n_docs, n_fields = len(refs), len(index.field_weights)
        lengths = np.frombuffer(state["lengths"], dtype=LENGTH_CODE)
        if len(lengths) != n_docs * n_fields or (n_docs and int(lengths.min()) < 0):  # lengths divide: never below 0
            raise ValueError("index state: field lengths do not fit the documents")
        doc_type = UINT_CODES[state["doc_type"]]
        postings = _Packed(
            np.frombuffer(state["term_ptr"], dtype=OFFSET_CODE),
            np.frombuffer(state["term_docs"], dtype=doc_type),
            np.frombuffer(state["term_tfs"], dtype=UINT_CODES[state["term_tfs_type"]]).reshape(-1, n_fields),
        )
        surface_docs = _Packed(
            np.frombuffer(state["surface_ptr"], dtype=OFFSET_CODE), np.frombuffer(state["surface_docs"], dtype=doc_type), None
        )
        _check_packed(postings, len(terms), n_docs)
        _check_packed(surface_docs, len(surfaces), n_docs)
        index._set_base(
            refs=refs, terms=terms, surfaces=surfaces, lengths=lengths.reshape(n_docs, n_fields),
            postings=postings, surface_docs=surface_docs,
        )
        return index

    # --- reading ----------------------------------------------------------------

    def doc_freq(self, term: str) -> int:
        term_id = self.term_ids.get(term)
        if term_id is None:
            return 0
        return self._base_count(self._base, term_id) + len(self._delta.get(term_id, ()))

    def posting(self, term: str, ref: str) -> Posting | None:
        """Per-field frequencies of ``term`` in ``ref``, or None when it does not occur there."""
        doc_id, term_id = self.ids.get(ref), self.term_ids.get(term)
        if doc_id is None or term_id is None:
            return None
        if doc_id >= self._base_size:
            return self._delta.get(term_id, {}).get(doc_id)
        start, end = self._base.span(term_id)
        docs = self._base.docs[start:end]
        at = int(docs.searchsorted(doc_id))  # the method: numpy's wrapper costs a microsecond a call
        if at == len(docs) or docs[at] != doc_id:
            return None
        assert self._base.values is not None
        return tuple(self._base.values[start + at].tolist())

    def held_in(self, term: str, fields: Sequence[int]) -> bool:
        """Whether some live document holds ``term`` in one of ``fields`` (field numbers)."""
        term_id = self.term_ids.get(term)
        if term_id is None:
            return False
        _, tfs = self._term_postings(term_id)
        return bool(tfs[:, list(fields)].any()) if len(tfs) else False

    def surface_doc_count(self, word: str) -> int:
        """How many documents hold ``word`` as a surface word."""
        surface_id = self.surface_ids.get(word)
        if surface_id is None:
            return 0
        return self._base_count(self._base_surfaces, surface_id) + len(self._delta_surfaces.get(surface_id, ()))

    def _base_count(self, packed: _Packed, key: int) -> int:
        start, end = packed.span(key)
        if not self._base_dead or start == end:
            return end - start
        return int(np.count_nonzero(self._alive[packed.docs[start:end]]))

    # --- scoring ----------------------------------------------------------------

    def score(self, query: Sequence[QueryTerm], *, limit: int = 50) -> tuple[list[Hit], int]:
        """The best ``limit`` documents for ``query`` (score desc, then ref), and how many were scored."""
        n = len(self.ids)
        if not n:
            return [], 0
        # Every query term's postings in one batch: a handful of numpy calls per query, not per term.
        id_parts, tf_parts, factors, counts = [], [], [], []
        for qterm in query:
            term_id = self.term_ids.get(qterm.term)
            if term_id is None:
                continue
            ids, tfs = self._term_postings(term_id)
            if not len(ids):
                continue
            id_parts.append(ids)
            tf_parts.append(tfs)
            factors.append(term_factor(n, len(ids), qterm.weight, self.k1))
            counts.append(len(ids))
        if not id_parts:
            return [], 0
        ids = np.concatenate(id_parts)
        tf = self._field_tf(ids, np.concatenate(tf_parts), n)
        partial = saturated(np.repeat(np.array(factors), counts), tf, self.k1)
        # bincount adds in input order, so each document sums its terms in query order, from 0.0.
        scores = np.bincount(ids, weights=partial, minlength=len(self.refs))
        touched = np.flatnonzero(scores)
        scanned = len(touched)
        if scanned > limit:
            # Keep every document tied with the limit-th score, so the ref tie-break decides.
            cutoff = np.partition(scores[touched], scanned - limit)[scanned - limit]
            touched = touched[scores[touched] >= cutoff]
        refs = cast("list[str]", self.refs)  # a scored document is alive: its ref is set
        return best_hits(zip(scores[touched].tolist(), [refs[i] for i in touched.tolist()]), limit), scanned

    def _field_tf(self, ids: np.ndarray, tfs: np.ndarray, n: int) -> np.ndarray:
        """tf~ of each posting: its field frequencies, weighted and length-normalised, summed."""
        # Field by field in order, as the formula reads: a field a term is absent from adds exactly 0.0.
        keep, per_length = length_norms(self._field_b.tolist(), self.total_lengths, n)
        parts = field_tf(self._weights, tfs, np.array(keep), np.array(per_length), self._lengths[ids])
        tf: np.ndarray = parts[:, 0].copy()
        for field in range(1, parts.shape[1]):
            tf += parts[:, field]
        return tf

    def _term_postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        start, end = self._base.span(term_id)
        ids, tfs = self._base.docs[start:end], self._base.values[start:end]  # type: ignore[index]
        if self._base_dead and start != end:
            live = self._alive[ids]
            ids, tfs = ids[live], tfs[live]
        delta = self._delta.get(term_id)
        if delta:
            ids = np.concatenate((ids, np.fromiter(delta.keys(), np.int64, len(delta))))
            tfs = np.concatenate((tfs, np.array(list(delta.values()), dtype=np.int32).reshape(len(delta), -1)))
        return ids, tfs


def _postings_of(fields: Sequence[Sequence[str]]) -> dict[str, Posting]:
    # A term's posting lists its count in every field; fields are few, terms per document many.
    per_field = [Counter(terms) for terms in fields]
    return {term: tuple(c[term] for c in per_field) for term in dict.fromkeys(chain.from_iterable(fields))}


def _runs(keys: np.ndarray, key_space: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys in ascending order (as int64) and how often each occurs."""
    if key_space <= 2**32:
        keys = keys.astype(np.uint32)  # sorts in about 60% of the time int64 keys take
    keys = np.sort(keys)
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))[: len(keys)]
    return keys[starts].astype(np.int64), np.diff(np.append(starts, len(keys)))


def _smallest_uint(values: np.ndarray) -> str:
    # Term frequencies rarely pass 255, doc ids 65,535: the fewer bytes, the less a cold start reads.
    top = int(values.max()) if values.size else 0
    return "u1" if top < 2**8 else "u2" if top < 2**16 else "u4"


def _discard(postings: dict[int, dict[int, Any]], key: int, doc_id: int) -> None:
    docs = postings[key]
    del docs[doc_id]
    if not docs:
        del postings[key]


def _renumber(names: list[str], used: np.ndarray) -> tuple[list[str], np.ndarray]:
    # The names some pair still uses, in their old order, and old id -> new id.
    held = np.zeros(len(names), dtype=bool)
    held[used] = True
    mapping = np.cumsum(held) - 1
    return [name for name, keep in zip(names, held.tolist()) if keep], mapping


def _check_packed(packed: _Packed, n_keys: int, n_docs: int) -> None:
    ptr, docs = packed.ptr, packed.docs
    if len(ptr) != n_keys + 1 or ptr[0] != 0 or ptr[-1] != len(docs) or np.any(np.diff(ptr) < 0):
        raise ValueError("index state: posting offsets do not fit")
    if packed.values is not None and len(packed.values) != len(docs):
        raise ValueError("index state: term frequencies do not fit the postings")
    if len(docs) and int(docs.max()) >= n_docs:  # unsigned: never below 0
        raise ValueError("index state: a posting names no document")
    # Within a key, documents ascend (searched by bisection); they may only fall where a key starts.
    falls = np.flatnonzero(docs[1:] <= docs[:-1]) + 1
    at = np.minimum(np.searchsorted(ptr, falls), len(ptr) - 1)  # (np.isin would import numpy.ma: 30 ms)
    if len(falls) and not np.array_equal(ptr[at], falls):
        raise ValueError("index state: postings out of order")
