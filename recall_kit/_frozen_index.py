"""A read-only index over a saved state (``FieldIndex.state``), in the standard library alone.

What a one-shot process reads a small store's cached index with: it scores from views of the
cache's bytes as they are, so a query never imports numpy (numpy's import alone costs more than
checking and scoring an index of up to ``FROZEN_MAX_POSTINGS`` here). Every score,
posting and count equals the ``FieldIndex`` restored from the same state, to the last bit: both
apply ``_bm25``'s formula in the same order. ``thaw`` gives that ``FieldIndex``, to change.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Sequence
from itertools import compress, count
from operator import le
from typing import TYPE_CHECKING, Any

from recall_kit._bm25 import (
    LENGTH_CODE,
    OFFSET_CODE,
    UINT_CODES,
    Code,
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

if TYPE_CHECKING:
    from recall_kit._index import FieldIndex

# Up to this many postings a cached index is read here; above it, with numpy. Checking the state
# costs about 0.3 ms per 1,000 postings here, numpy's import about 100 ms: `bench/import_time.py
# --frozen-sizes 27,1000,2000,3000` (cold cached query, medians of 11, load 1.7-2.0) gave 206 / 340,
# 286 / 369, 341 / 365 and 412 / 388 ms (FrozenIndex / FieldIndex) at 5k, 176k, 353k, 530k postings.
FROZEN_MAX_POSTINGS = 300_000


class FrozenIndex(IndexReading):
    """The index a saved state describes, read-only; raises ValueError when its parts do not fit."""

    def __init__(self, state: dict[str, Any]) -> None:
        """Check ``state`` as ``FieldIndex.from_state`` does and view its arrays; nothing is copied."""
        weights = tuple(float(w) for w in state["field_weights"])
        b = state["b"]
        field_b = [float(b)] * len(weights) if isinstance(b, (int, float)) else [float(x) for x in b]
        if len(field_b) != len(weights):
            raise ValueError(f"b: {len(field_b)} given, one per field ({len(weights)})")
        self.field_weights, self.k1 = weights, float(state["k1"])
        self.b: float | tuple[float, ...] = b if isinstance(b, (int, float)) else tuple(b)
        refs, terms, surfaces = state["refs"], state["terms"], state["surfaces"]
        if not all(isinstance(part, list) and set(map(type, part)) <= {str} for part in (refs, terms, surfaces)):
            raise ValueError("index state: refs, terms and surfaces must be lists of strings")
        n_docs, n_fields = len(refs), len(weights)
        self.refs: list[str] = refs
        self.ids = dict(zip(refs, range(n_docs)))
        if len(self.ids) != n_docs:
            raise ValueError("index: a ref occurs twice")
        self.terms, self.term_ids = terms, dict(zip(terms, range(len(terms))))
        self.surface_words, self.surface_ids = surfaces, dict(zip(surfaces, range(len(surfaces))))
        self._lengths = _view(state["lengths"], LENGTH_CODE)
        if len(self._lengths) != n_docs * n_fields or (n_docs and min(self._lengths) < 0):
            raise ValueError("index state: field lengths do not fit the documents")
        doc_code = UINT_CODES[state["doc_type"]]
        self._term_ptr, self._term_docs = _view(state["term_ptr"], OFFSET_CODE), _view(state["term_docs"], doc_code)
        self._term_tfs = _view(state["term_tfs"], UINT_CODES[state["term_tfs_type"]])
        self._surface_ptr = _view(state["surface_ptr"], OFFSET_CODE)
        self._surface_docs = _view(state["surface_docs"], doc_code)
        _check_packed(self._term_ptr, self._term_docs, len(terms), n_docs)
        _check_packed(self._surface_ptr, self._surface_docs, len(surfaces), n_docs)
        if len(self._term_tfs) != len(self._term_docs) * n_fields:
            raise ValueError("index state: term frequencies do not fit the postings")
        self.total_lengths = [sum(self._lengths[field::n_fields]) for field in range(n_fields)]
        self._keep, self._per_length = length_norms(field_b, self.total_lengths, n_docs)
        self._state = state
        self._shelves = None

    @staticmethod
    def postings_in(state: dict[str, Any]) -> int:
        """How many term postings ``state`` holds (what scoring it here costs grows with)."""
        return len(state["term_docs"]) // array(UINT_CODES[state["doc_type"]]).itemsize

    def thaw(self) -> FieldIndex:
        """The same index as a ``FieldIndex``, to change (this loads numpy)."""
        from recall_kit._index import FieldIndex

        return FieldIndex.from_state(self._state)

    def doc_freq(self, term: str) -> int:
        """How many documents hold ``term``."""
        term_id = self.term_ids.get(term)
        return 0 if term_id is None else self._term_ptr[term_id + 1] - self._term_ptr[term_id]

    def posting(self, term: str, ref: str) -> Posting | None:
        """Per-field frequencies of ``term`` in ``ref``, or None when it does not occur there."""
        doc_id, term_id = self.ids.get(ref), self.term_ids.get(term)
        if doc_id is None or term_id is None:
            return None
        start, end = self._term_ptr[term_id], self._term_ptr[term_id + 1]
        at = bisect_left(self._term_docs, doc_id, start, end)
        if at == end or self._term_docs[at] != doc_id:
            return None
        width = len(self.field_weights)
        return tuple(self._term_tfs[at * width : (at + 1) * width].tolist())

    def held_in(self, term: str, fields: Sequence[int]) -> bool:
        """Whether some document holds ``term`` in one of ``fields`` (field numbers), field by field in
        the order given, each a strided view of the term's postings scanned in C up to its first hit."""
        term_id = self.term_ids.get(term)
        if term_id is None:
            return False
        width = len(self.field_weights)
        tfs = self._term_tfs[self._term_ptr[term_id] * width : self._term_ptr[term_id + 1] * width]
        return any(any(tfs[field::width]) for field in fields)

    def surface_doc_count(self, word: str) -> int:
        """How many documents hold ``word`` as a surface word."""
        surface_id = self.surface_ids.get(word)
        return 0 if surface_id is None else self._surface_ptr[surface_id + 1] - self._surface_ptr[surface_id]

    def score(self, query: Sequence[QueryTerm], *, limit: int = 50) -> tuple[list[Hit], int]:
        """The best ``limit`` documents for ``query`` (score desc, then ref), and how many were scored."""
        n = len(self.ids)
        if not n:
            return [], 0
        docs, tfs, lengths, width = self._term_docs, self._term_tfs, self._lengths, len(self.field_weights)
        weights, keep, per_length, k1 = self.field_weights, self._keep, self._per_length, self.k1
        scores: dict[int, float] = {}
        for qterm in query:
            term_id = self.term_ids.get(qterm.term)
            if term_id is None:
                continue
            start, end = self._term_ptr[term_id], self._term_ptr[term_id + 1]
            if start == end:
                continue
            factor = term_factor(n, end - start, qterm.weight, k1)
            for at in range(start, end):
                doc, row = docs[at], at * width
                tf = 0.0  # a field the term is absent from adds exactly 0.0: it is skipped
                for field in range(width):
                    if frequency := tfs[row + field]:
                        tf += field_tf(weights[field], frequency, keep[field], per_length[field], lengths[doc * width + field])
                scores[doc] = scores.get(doc, 0.0) + saturated(factor, tf, k1)
        refs = self.refs
        touched = [(score, refs[doc]) for doc, score in scores.items() if score]
        return best_hits(touched, limit), len(touched)


def _view(data: Any, code: Code) -> memoryview:
    try:
        return memoryview(data).cast("B").cast(code)
    except TypeError as exc:  # a length that is no multiple of the item size
        raise ValueError(f"index state: {exc}") from None


def _check_packed(ptr: memoryview, docs: memoryview, n_keys: int, n_docs: int) -> None:
    # The rules FieldIndex.from_state checks, in the standard library (on lists: twice as fast as on views).
    offsets, ids = ptr.tolist(), docs.tolist()
    if len(offsets) != n_keys + 1 or offsets[0] != 0 or offsets[-1] != len(ids) or not all(map(le, offsets, offsets[1:])):
        raise ValueError("index state: posting offsets do not fit")
    if ids and max(ids) >= n_docs:  # unsigned: never below 0
        raise ValueError("index state: a posting names no document")
    # Within a key, documents ascend (searched by bisection); they may only fall where a key starts.
    if not set(compress(count(1), map(le, ids[1:], ids))) <= set(offsets):
        raise ValueError("index state: postings out of order")
