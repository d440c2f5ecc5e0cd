"""The fast heuristic: BM25F over memory fields, typo tolerance, and a confidence gate.

It answers from an index kept current off the query path (in the store's subscriber
callback). Pure CPU, no I/O; a query holds the index lock only while it scores. The field schema
(``_fields``), query analysis (``_query``) and the gate (``_gate``) live apart.
"""

from __future__ import annotations

import threading
import time
import weakref
from array import array
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from memory_store import MemoryDoc, Snapshot
from recall_kit._fields import BODY_FIELD, FIELD_B, FIELD_WEIGHTS, FIELDS, body_pairs, build_index, doc_entries, doc_fields
from recall_kit._frozen_index import FrozenIndex
from recall_kit._gate import Evidence, GateSettings, ScoredDoc
from recall_kit._kinds import Strategy
from recall_kit._query import adjacent_slots, doc_evidence, prompt_words, query_slots, query_terms, query_tokens
from recall_kit._tokenize import analyze_terms
from recall_kit.limits import MAX_FAST_DOCS, RANKED_LIMIT

if TYPE_CHECKING:
    from recall_kit._index import FieldIndex, TermPostings


@dataclass(frozen=True, slots=True)
class FastResult:
    """What the fast stage decided: the gated docs, the ungated ranking, and its cost."""

    docs: tuple[ScoredDoc, ...]
    ranked: tuple[ScoredDoc, ...]
    strategy: Strategy  # heuristic, or none when nothing passed the gate
    elapsed_ms: float
    docs_scanned: int
    certain: bool = False  # one unique, strong match (GateSettings.certain): the model stage may be skipped


class SnapshotSource(Protocol):
    """What a heuristic can follow: a store, or anything that serves snapshots and change events."""

    def snapshot(self) -> Snapshot:
        """The current snapshot, without blocking."""

    def subscribe(self, callback: Callable[[Snapshot], None]) -> Callable[[], None]:
        """Call ``callback(snapshot)`` after each new snapshot; returns an unsubscribe function."""


class FastHeuristic:
    """Deterministic lexical recall over a store (kept current) or a fixed snapshot."""

    gate: GateSettings
    _index: FieldIndex | FrozenIndex  # a FrozenIndex only until the first change
    _unsubscribe: Callable[[], object] | None

    def __init__(
        self,
        source: SnapshotSource | Snapshot,
        *,
        gate: GateSettings | None = None,
        field_weights: Sequence[float] = FIELD_WEIGHTS,
    ) -> None:
        """Index ``source`` (and follow it, if a store); ``field_weights``: one per field of tuning.FIELDS."""
        if len(field_weights) != len(FIELDS):
            raise ValueError(f"field_weights: {len(field_weights)} given, one per field of {FIELDS}")
        from recall_kit._index import FieldIndex  # numpy: a heuristic over a cached index never loads it

        self._set_up(gate, FieldIndex(tuple(field_weights), b=FIELD_B))
        if isinstance(source, Snapshot):
            self.apply(source)
        else:
            self._unsubscribe = _follow_weakly(source, self)
            self.apply(source.snapshot())

    @classmethod
    def _from_index(
        cls, snapshot: Snapshot, index: FieldIndex | FrozenIndex, *, gate: GateSettings | None = None, follow: SnapshotSource | None = None
    ) -> FastHeuristic:
        # An index that already reflects ``snapshot`` (restored from the persistent cache); with
        # ``follow``, the store ``snapshot`` came from, whose later snapshots it then takes in.
        heuristic = cls.__new__(cls)
        heuristic._set_up(gate, index)
        heuristic._docs, heuristic._version = snapshot.docs, snapshot.version
        if follow is not None:
            heuristic._unsubscribe = _follow_weakly(follow, heuristic)
            heuristic.apply(follow.snapshot())  # anything published since ``snapshot`` was taken
        return heuristic

    def _set_up(self, gate: GateSettings | None, index: FieldIndex | FrozenIndex) -> None:
        self.gate = gate or GateSettings()
        self._field_weights = index.field_weights
        self._lock = threading.Lock()  # guards _index and _docs; held while scoring or applying
        self._update_lock = threading.Lock()  # serialises updates; never taken by a query
        self._index = index
        self._docs: Mapping[str, MemoryDoc] = {}
        self._pairs: dict[str, array[int]] = {}  # ref -> its body's adjacent pairs (filled lazily from a cache)
        self._entries: dict[str, dict[str, tuple[frozenset[str], ...]]] = {}  # ref -> doc_entries, lazily
        self._version = -1
        self._unsubscribe = None

    def rank(
        self, query: str, *, exclude: Collection[str] = ()
    ) -> tuple[tuple[ScoredDoc, ...], list[Evidence], int]:
        """The ungated ranking, the gate's evidence for its first two, and documents scored."""
        tokens = query_tokens(query)
        with self._lock:
            index, docs = self._index, self._docs
            slots = query_slots(index, tokens)
            adjacent = adjacent_slots(tokens, slots)
            terms = query_terms(slots)
            hits, scanned = index.score(terms, limit=RANKED_LIMIT + len(exclude))
            ranked = tuple(
                [ScoredDoc(docs[hit.ref], hit.score) for hit in hits if hit.ref not in exclude][:RANKED_LIMIT]
            )
            if any(scored.doc.learned is not None for scored in ranked):  # the prompt's words only when they can matter
                ranked = self.gate.unsuppressed(ranked, frozenset(prompt_words(tokens)))
            evidence = [
                doc_evidence(
                    index, slots, scored.doc.ref, adjacent, self._body_pairs_of(scored.doc.ref) if adjacent else None,
                    self._entries_of(scored.doc.ref),
                )
                for scored in ranked[:MAX_FAST_DOCS]
            ]
        return ranked, evidence, scanned

    def _body_pairs_of(self, ref: str) -> array[int]:
        # Only an index restored from the persistent cache lacks them: analysed once, on first use.
        pairs = self._pairs.get(ref)
        if pairs is None:
            pairs = self._pairs[ref] = body_pairs(analyze_terms(self._docs[ref].body)[0])
        return pairs

    def postings(self) -> TermPostings:
        """The index's every (term, document) posting as arrays, for analyses of the whole store
        (``recall_kit.health`` finds near-duplicates with them)."""
        with self._lock:
            if isinstance(self._index, FrozenIndex):  # postings are numpy arrays: a FieldIndex has them
                self._index = self._index.thaw()
            return self._index.postings()

    def _entries_of(self, ref: str) -> dict[str, tuple[frozenset[str], ...]]:
        # Analysed on first use (a ranked document's keywords and usage scenarios), kept until it changes.
        entries = self._entries.get(ref)
        if entries is None:
            entries = self._entries[ref] = doc_entries(self._docs[ref])
        return entries

    @property
    def version(self) -> int:
        """The snapshot version the index reflects."""
        return self._version

    def close(self) -> None:
        """Stop following the store (a heuristic that is dropped unclosed stops by itself)."""
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
                fields = {ref: doc_fields(snapshot.docs[ref]) for ref in refs if ref in snapshot.docs}
                pairs = {ref: body_pairs(terms[BODY_FIELD]) for ref, (terms, _) in fields.items()}
                with self._lock:
                    if fields or snapshot.removed:
                        if isinstance(self._index, FrozenIndex):  # read from the cache; to change, a FieldIndex
                            self._index = self._index.thaw()
                        for ref in sorted(snapshot.removed):
                            self._index.remove(ref)
                            self._pairs.pop(ref, None)
                        for ref in snapshot.changed | snapshot.removed:
                            self._entries.pop(ref, None)
                        for ref, (terms, surfaces) in fields.items():
                            self._index.add(ref, terms, surfaces)
                    self._pairs.update(pairs)
                    self._docs = snapshot.docs
                    self._version = snapshot.version
                return
            index = build_index(snapshot.docs, self._field_weights)
            all_pairs: dict[str, array[int]] = {}  # body pairs are worked out on first use
            with self._lock:
                self._index, self._docs, self._version = index, snapshot.docs, snapshot.version
                self._pairs, self._entries = all_pairs, {}

    def recall(self, query: str, *, exclude: Collection[str] = ()) -> FastResult:
        """Rank the store for ``query`` and gate the ranking down to at most two confident docs."""
        started = time.perf_counter()
        ranked, evidence, scanned = self.rank(query, exclude=exclude)
        chosen = self.gate.select(ranked, evidence)
        return FastResult(
            docs=chosen,
            ranked=ranked,
            strategy="heuristic" if chosen else "none",
            elapsed_ms=(time.perf_counter() - started) * 1000.0,
            docs_scanned=scanned,
            certain=len(chosen) == 1 and self.gate.certain(ranked, evidence),
        )


def _follow_weakly(source: SnapshotSource, heuristic: FastHeuristic) -> Callable[[], object]:
    """Subscribe ``heuristic`` to ``source`` without the store keeping it alive. Returns the
    unsubscribe call, which runs at most once: on close(), or when the heuristic is collected."""
    apply = weakref.WeakMethod(heuristic.apply)
    stop: list[weakref.finalize] = []  # type: ignore[type-arg]

    def follow(snapshot: Snapshot) -> None:
        method = apply()
        if method is None:
            stop[0]()
        else:
            method(snapshot)

    stop.append(weakref.finalize(heuristic, source.subscribe(follow)))
    return stop[0]
