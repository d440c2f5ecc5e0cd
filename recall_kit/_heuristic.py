"""The fast heuristic: BM25F over memory fields, typo tolerance, and a confidence gate.

It answers from an index kept current off the query path (in the store's subscriber
callback). Pure CPU, no I/O; a query holds the index lock only while it scores.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from array import array
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from rapidfuzz import process
from rapidfuzz.distance import OSA

from memory_store import MemoryDoc, Snapshot
from recall_kit._kinds import Strategy
from recall_kit._text import clip_prompt
from recall_kit._corpus import analyse_corpus
from recall_kit._index import FieldIndex, QueryTerm, bm25_idf
from recall_kit._tokenize import Token, analyze, analyze_terms, is_cjk_term, stem

MAX_FAST_DOCS = 2
# A prompt is read by its head and tail only, so the fast stage's work is bounded whatever the
# prompt's size (a pasted log, a whole file). Every query of the eval datasets fits whole.
PROMPT_HEAD_CHARS = PROMPT_TAIL_CHARS = 1024
QUERY_HEAD_TOKENS = QUERY_TAIL_TOKENS = 64
RANKED_LIMIT = 50

# Field order in the index (the body last); the head fields say what a memory is "about".
# The frontmatter's keywords and usage_scenarios (the author's) are kept apart from the enrichment
# sidecar's (a model's), so the gate can weigh a match in enrichment alone below one the author wrote.
FIELDS = (
    "name", "description", "keywords", "usage_scenarios", "enriched_keywords", "enriched_scenarios", "body"
)
HEAD_FIELDS = frozenset({0, 1, 2, 3, 4, 5})
CORE_FIELDS = frozenset({0, 1, 2, 3})  # written by the memory's author
BODY_FIELD = 6
# Ungated top-1 on agent-memories / locomo-dev: 0.898 / 0.623 with these, 0.873 / 0.639 with
# all weights 1, 0.885 / 0.602 with 4-4-4-1 (bench/bench_heuristic.py, 2026-11-29).
FIELD_WEIGHTS = (2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 1.0)

# Typo tolerance: only for unknown words long enough that one slip leaves them recognisable.
# Edits are optimal-string-alignment edits (a swap of neighbours is one edit: deplyo -> deploy);
# agent-memories typo strict 1.00 with this, 0.77 with rapidfuzz ratio >= 0.85 (swaps fall below).
TYPO_MIN_LENGTH = 5
TYPO_MAX_EDITS = 1
TYPO_LONG_WORD = 9  # from this length on, two edits
TYPO_MAX_EDITS_LONG = 2
TYPO_MAX_EXPANSIONS = 2
TYPO_WEIGHT = 0.8  # an expansion counts below an exact match (times 1 - edits / length)

# Confidence gate. Every feature is a ratio or a count, so it holds on 20 or 50,000 documents.
# Searched by bench/bench_heuristic.py (grid, 5-fold cross-validated, on agent-memories and
# multilingual with and without their enrichment sidecars, locomo-dev both ways (strict only)
# and hard-cases, unenriched strict and silence held as constraints). Chosen on all folds
# (2026-12-01): a head word matched only in enrichment counts half (ENRICHMENT_HEAD_CREDIT) and the
# second document needs 0.7 of the first's score; agent-memories enriched strict 0.821 silence
# 0.741 precision 0.727 (was 0.821 / 0.724 / 0.637), unenriched 0.777 / 0.810 / 0.785 (was
# 0.782 / 0.810 / 0.711); multilingual 1.00 / 1.00 both ways. The tie rule
# (TIE_RATIO) buys enriched silence only with unenriched strict, so it is off.
MIN_COVERAGE = 0.2  # share of the query's idf mass the best document matches
UNKNOWN_WEIGHT = 2.0  # query words no memory holds (sourdough, vite) count double against it
GENERIC_WEIGHT = 1.0  # everyday words (GENERIC_WORDS) count fully in coverage ...
MIN_SPECIFIC_TERMS = 2  # ... but the document must match two non-generic query words
MIN_HEAD_TERMS = 1  # ... one of them in its name, description, keywords or usage scenarios
ENRICHMENT_HEAD_CREDIT = 0.5  # a head word matched only in enrichment, against one the author wrote
TIE_RATIO = 1.01  # when the second scores at least this share of the first (never: off) ...
TIE_MIN_HEAD_TERMS = 0.0  # ... the first needs this many head words
CJK_UNKNOWN_WEIGHT = 0.0  # unknown CJK bigrams are mostly pairs across a word boundary
SECOND_SCORE_RATIO = 0.7  # the second document when it scores at least 0.7 of the first ...
SECOND_MIN_COVERAGE = 0.2  # ... and passes the same test
# A document matched in its body only passes when a phrase of the query stands in it word for
# word (e.g. "feature flag" in "run migrations behind a feature flag") and covers enough of the query.
MIN_PHRASE_TERMS = 2
PHRASE_MIN_COVERAGE = 0.4


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
    strategy: Strategy  # heuristic, or none when nothing passed the gate
    elapsed_ms: float
    docs_scanned: int


# Everyday words that say little about which memory applies, whatever the store's statistics.
GENERIC_WORDS = frozenset(
    """
    add added adding get gets getting got make makes making made set sets setting use uses using used
    want wants need needs needed try trying tried help helps fix fixed fixing change changes changed
    create created creating write writing wrote read show shows tell give gives put take takes find
    look looking see know think keep let start started stop move work works working call called ask
    happen happened happens mean means explain describe like say said seem seems feel go going goes
    went come came thing things way ways time times day days week today yesterday tomorrow tonight
    something anything everything nothing someone anyone problem problems issue issues question
    questions stuff part kind sort lot bit new old good bad best better big small large huge right
    wrong first last next same different another many much sure please thanks thank ok okay maybe
    really still already always never ever yet even back actually just quick quickly good great nice
    able possible again instead around without within one two three also here there now then
    什么 怎么 怎样 为什 一下 可以 这个 那个 我们 你们 他们 没有 不是 就是 还是 但是 因为 所以 如果 已经
    现在 应该 需要 一个 时候 的话 是什 么样 好的 谢谢 帮我 请问 一些 知道 能不 不能
    して てい いる する った です ます ない ある この その どう ので から まし した れる られ って
    たい ださ くだ さい けど だっ っけ なに 何を には では とは
    하는 해요 합니 니다 있는 없는 하고 어떻 어요 나요 까요 는데 에서 으로 해야
    """.split()
)


class SnapshotSource(Protocol):
    """What a heuristic can follow: a store, or anything that serves snapshots and change events."""

    def snapshot(self) -> Snapshot: ...

    def subscribe(self, callback: Callable[[Snapshot], None]) -> Callable[[], None]: ...


@dataclass(frozen=True, slots=True)
class _Slot:
    """One distinct query word: its idf mass and the terms that may match it, with credit."""

    mass: float
    matches: tuple[QueryTerm, ...]
    known: bool  # some document holds it (or, for a typo, what it was meant to be)
    generic: bool  # an everyday word: weak evidence that a memory applies
    term: str  # the query's own term
    run: tuple[int, int] | None = None  # a CJK bigram's run in the query, and its place in the run


class FastHeuristic:
    """Deterministic lexical recall over a store (kept current) or a fixed snapshot."""

    def __init__(self, source: SnapshotSource | Snapshot, *, gate: GateSettings | None = None) -> None:
        self.gate = gate or GateSettings()
        self._lock = threading.Lock()  # guards _index and _docs; held while scoring or applying
        self._update_lock = threading.Lock()  # serialises updates; never taken by a query
        self._index = FieldIndex(FIELD_WEIGHTS)
        self._docs: Mapping[str, MemoryDoc] = {}
        self._pairs: dict[str, array[int]] = {}  # ref -> its body's adjacent pairs (filled lazily from a cache)
        self._version = -1
        self._unsubscribe: Callable[[], object] | None = None
        if isinstance(source, Snapshot):
            self.apply(source)
        else:
            self._unsubscribe = _follow_weakly(source, self)
            self.apply(source.snapshot())

    @classmethod
    def _from_index(
        cls, snapshot: Snapshot, index: FieldIndex, *, gate: GateSettings | None = None, follow: SnapshotSource | None = None
    ) -> FastHeuristic:
        # An index that already reflects ``snapshot`` (restored from the persistent cache); with
        # ``follow``, the store ``snapshot`` came from, whose later snapshots it then takes in.
        heuristic = cls(Snapshot.build(0, {}, ()), gate=gate)
        heuristic._index, heuristic._docs, heuristic._version = index, snapshot.docs, snapshot.version
        if follow is not None:
            heuristic._unsubscribe = _follow_weakly(follow, heuristic)
            heuristic.apply(follow.snapshot())  # anything published since ``snapshot`` was taken
        return heuristic

    def rank(
        self, query: str, *, exclude: Collection[str] = ()
    ) -> tuple[tuple[ScoredDoc, ...], list[Evidence], int]:
        """The ungated ranking, the gate's evidence for its first two, and documents scored."""
        tokens = _bounded(analyze(clip_prompt(query, PROMPT_HEAD_CHARS, PROMPT_TAIL_CHARS)))
        with self._lock:
            index, docs = self._index, self._docs
            slots = _query_slots(index, tokens)
            adjacent = _adjacent_slots(tokens, slots)
            terms = _dedupe(match for slot in slots for match in slot.matches)
            hits, scanned = index.score(terms, limit=RANKED_LIMIT + len(exclude))
            hits = [hit for hit in hits if hit.ref not in exclude][:RANKED_LIMIT]
            evidence = [
                _evidence(index, slots, hit.ref, adjacent, self._body_pairs_of(hit.ref) if adjacent else None)
                for hit in hits[:MAX_FAST_DOCS]
            ]
        return tuple(ScoredDoc(docs[hit.ref], hit.score) for hit in hits), evidence, scanned

    def _body_pairs_of(self, ref: str) -> array[int]:
        # Only an index restored from the persistent cache lacks them: analysed once, on first use.
        pairs = self._pairs.get(ref)
        if pairs is None:
            pairs = self._pairs[ref] = _body_pairs(analyze_terms(self._docs[ref].body)[0])
        return pairs

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
                fields = {ref: _doc_fields(snapshot.docs[ref]) for ref in refs if ref in snapshot.docs}
                pairs = {ref: _body_pairs(terms[BODY_FIELD]) for ref, (terms, _) in fields.items()}
                with self._lock:
                    for ref in sorted(snapshot.removed):
                        self._index.remove(ref)
                        self._pairs.pop(ref, None)
                    for ref, (terms, surfaces) in fields.items():
                        self._index.add(ref, terms, surfaces)
                    self._pairs.update(pairs)
                    self._docs = snapshot.docs
                    self._version = snapshot.version
                return
            index = build_index(snapshot.docs)
            all_pairs: dict[str, array[int]] = {}  # body pairs are worked out on first use
            with self._lock:
                self._index, self._docs, self._version = index, snapshot.docs, snapshot.version
                self._pairs = all_pairs

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
        )


@dataclass(frozen=True, slots=True)
class SlotMatch:
    """One query word as seen from one document."""

    mass: float  # the word's idf (as if unseen when no document holds it)
    credit: float  # 1 for an exact match, the typo weight for an expansion, 0 for none
    known: bool  # some document holds it
    generic: bool  # an everyday word (GENERIC_WORDS)
    cjk: bool  # a CJK character bigram (unknown ones are mostly word-boundary pairs)
    in_head: bool  # matched in name, description, keywords or usage scenarios
    in_phrase: bool = False  # matched in the body next to the query word it stands next to
    in_core: bool = False  # matched in a field the memory's author wrote (not the enrichment sidecar)
    words: float = 1.0  # how many query words it stands for (less for overlapping CJK bigrams)


@dataclass(frozen=True, slots=True)
class Evidence:
    """How much of the query one document matches: the gate's store-size-independent inputs."""

    slots: tuple[SlotMatch, ...]

    def coverage(self, unknown_weight: float, generic_weight: float, cjk_unknown_weight: float) -> float:
        """Share of the query's idf mass this document matches."""
        total = matched = 0.0
        for slot in self.slots:
            mass = slot.mass * (generic_weight if slot.generic else 1.0)
            if not slot.known:
                mass *= cjk_unknown_weight if slot.cjk else unknown_weight
            total += mass
            matched += slot.credit * mass
        return matched / total if total else 0.0

    def specific_terms(self) -> float:
        """Non-generic query words matched (a CJK run's bigrams count as the words they can hold)."""
        return sum(slot.words for slot in self.slots if slot.credit and not slot.generic)

    def head_terms(self, enrichment_credit: float = 1.0) -> float:
        """Non-generic query words matched in a head field; one matched only in enrichment counts less."""
        return sum(
            slot.words * (1.0 if slot.in_core else enrichment_credit)
            for slot in self.slots
            if slot.credit and slot.in_head and not slot.generic
        )

    def core_terms(self) -> int:
        """Non-generic query words matched in a field the memory's author wrote."""
        return sum(1 for slot in self.slots if slot.credit and slot.in_core and not slot.generic)

    def phrase_terms(self) -> int:
        """Non-generic query words matched as part of a body phrase (adjacent, as in the query)."""
        return sum(1 for slot in self.slots if slot.credit and slot.in_phrase and not slot.generic)


@dataclass(frozen=True, slots=True)
class GateSettings:
    """The confidence gate's thresholds (defaults: the module constants)."""

    min_coverage: float = MIN_COVERAGE
    unknown_weight: float = UNKNOWN_WEIGHT
    generic_weight: float = GENERIC_WEIGHT
    cjk_unknown_weight: float = CJK_UNKNOWN_WEIGHT
    min_terms: int = MIN_SPECIFIC_TERMS
    min_head_terms: float = MIN_HEAD_TERMS
    enrichment_head_credit: float = ENRICHMENT_HEAD_CREDIT
    tie_ratio: float = TIE_RATIO
    tie_min_head_terms: float = TIE_MIN_HEAD_TERMS
    second_score_ratio: float = SECOND_SCORE_RATIO
    second_min_coverage: float = SECOND_MIN_COVERAGE
    min_phrase_terms: int = MIN_PHRASE_TERMS
    phrase_min_coverage: float = PHRASE_MIN_COVERAGE

    def select(self, ranked: Sequence[ScoredDoc], evidence: Sequence[Evidence]) -> tuple[ScoredDoc, ...]:
        """At most two documents: the best when confident, the second when also close to it."""
        if not ranked or not self._confident(evidence[0], self.min_coverage):
            return ()
        if (
            len(ranked) > 1
            and ranked[1].score >= self.tie_ratio * ranked[0].score
            and evidence[0].head_terms(self.enrichment_head_credit) < self.tie_min_head_terms
        ):
            return ()  # the best does not stand out from the next and says little in its head
        chosen = [ranked[0]]
        if (
            len(ranked) > 1
            and ranked[1].score >= self.second_score_ratio * ranked[0].score
            and self._confident(evidence[1], self.second_min_coverage)
        ):
            chosen.append(ranked[1])
        return tuple(chosen)

    def _confident(self, evidence: Evidence, min_coverage: float) -> bool:
        if evidence.specific_terms() < self.min_terms:
            return False
        coverage = evidence.coverage(self.unknown_weight, self.generic_weight, self.cjk_unknown_weight)
        if coverage < min_coverage:
            return False
        if evidence.head_terms(self.enrichment_head_credit) >= self.min_head_terms:
            return True
        return evidence.phrase_terms() >= self.min_phrase_terms and coverage >= self.phrase_min_coverage


def _evidence(
    index: FieldIndex,
    slots: list[_Slot],
    ref: str,
    adjacent: Sequence[tuple[int, int]] = (),
    body_pairs: array[int] | None = None,
) -> Evidence:
    in_phrase: set[int] = set()
    if body_pairs:
        for first, second in adjacent:
            if any(
                _has_pair(body_pairs, a.term, b.term) for a in slots[first].matches for b in slots[second].matches
            ):
                in_phrase.update((first, second))
    found: list[tuple[float, bool, bool]] = []  # per slot: credit, in a head field, in a core field
    for slot in slots:
        credit = 0.0
        in_head = in_core = False
        for match in slot.matches:
            posting = index.posting(match.term, ref)
            if posting:
                credit = max(credit, match.weight)
                in_head = in_head or any(posting[field] for field in HEAD_FIELDS)
                in_core = in_core or any(posting[field] for field in CORE_FIELDS)
        found.append((credit, in_head, in_core))
    words = _cjk_words(slots, [bool(credit) and not slot.generic for slot, (credit, _, _) in zip(slots, found)])
    return Evidence(tuple(
        SlotMatch(
            slot.mass, credit, slot.known, slot.generic, is_cjk_term(slot.term), in_head,
            number in in_phrase, in_core, words[number],
        )
        for number, (slot, (credit, in_head, in_core)) in enumerate(zip(slots, found))
    ))


def _adjacent_slots(tokens: list[Token], slots: list[_Slot]) -> list[tuple[int, int]]:
    """Pairs of known query words that stand next to each other in the query (stop words dropped)."""
    number = {slot.term: i for i, slot in enumerate(slots)}
    pairs: dict[tuple[int, int], None] = {}
    for before, after in zip(tokens, tokens[1:]):
        first, second = number.get(before.term), number.get(after.term)
        if first is not None and second is not None and first != second:
            if slots[first].matches and slots[second].matches:
                pairs[first, second] = None
    return list(pairs)


def _query_slots(index: FieldIndex, tokens: list[Token]) -> list[_Slot]:
    n = len(index)
    slots: list[_Slot] = []
    seen: set[str] = set()
    for token, run in zip(tokens, _cjk_runs(tokens)):
        if token.term in seen:
            continue
        seen.add(token.term)
        df = index.doc_freq(token.term)
        generic = (token.surface or token.term) in GENERIC_WORDS
        if df:
            slots.append(_Slot(bm25_idf(n, df), (QueryTerm(token.term),), True, generic, token.term, run))
            continue
        if token.surface is None and not is_cjk_term(token.term):
            continue  # an unknown whole identifier: its parts carry it
        expansions = _typo_expansions(index, token.surface) if token.surface else ()
        if expansions:  # weigh a mistyped word like the word it was meant to be
            mass = max(index.idf(match.term) for match in expansions)
            slots.append(_Slot(mass, expansions, True, generic, token.term))
        else:
            slots.append(_Slot(bm25_idf(n, 0), (), False, generic, token.term))
    return slots


def _cjk_runs(tokens: list[Token]) -> list[tuple[int, int] | None]:
    """Per token, its CJK run (numbered) and place in it; None for any other token."""
    runs: list[tuple[int, int] | None] = []
    number = -1
    for i, token in enumerate(tokens):
        if not is_cjk_term(token.term):
            runs.append(None)
            continue
        previous = runs[-1] if runs else None
        if previous is not None and tokens[i - 1].term[-1] == token.term[0]:  # neighbours overlap: エラ, ラー
            runs.append((number, previous[1] + 1))
        else:
            number += 1
            runs.append((number, 0))
    return runs


def _cjk_words(slots: Sequence[_Slot], matched: Sequence[bool]) -> list[float]:
    """Per slot, the query words it stands for. Matched CJK bigrams that overlap ("エラー": エラ, ラー)
    hold about half a word each, so one short word does not pass as two matched words."""
    words = [1.0] * len(slots)
    spans: dict[int, list[tuple[int, int]]] = {}  # run -> (place, slot) of its matched bigrams
    for number, (slot, hit) in enumerate(zip(slots, matched)):
        if hit and slot.run is not None:
            spans.setdefault(slot.run[0], []).append((slot.run[1], number))
    for places in spans.values():
        places.sort()
        start = 0
        for end in range(1, len(places) + 1):
            if end == len(places) or places[end][0] != places[end - 1][0] + 1:
                span = places[start:end]
                for _, number in span:
                    words[number] = math.ceil(len(span) / 2) / len(span)
                start = end
    return words


def _typo_expansions(index: FieldIndex, surface: str) -> tuple[QueryTerm, ...]:
    if len(surface) < TYPO_MIN_LENGTH or not surface.isalpha():
        return ()
    max_edits = TYPO_MAX_EDITS_LONG if len(surface) >= TYPO_LONG_WORD else TYPO_MAX_EDITS
    # Typos rarely hit the first letter; bucketing by it keeps this cheap at 50,000 documents.
    lengths = range(len(surface) - max_edits, len(surface) + max_edits + 1)
    candidates = index.surface_candidates(surface[0], lengths)
    found = process.extract(
        surface, candidates, scorer=OSA.distance, score_cutoff=max_edits, limit=None
    )
    held = {word: index.surface_doc_count(word) for word, _, _ in found}
    found = [item for item in found if held[item[0]]]  # a word whose documents are all gone
    found.sort(key=lambda item: (item[1], -held[item[0]], item[0]))
    expansions: dict[str, float] = {}
    for word, distance, _ in found:
        term = stem(word)
        if term not in expansions and index.doc_freq(term):
            similarity = 1.0 - distance / max(len(word), len(surface))
            expansions[term] = TYPO_WEIGHT * similarity
        if len(expansions) == TYPO_MAX_EXPANSIONS:
            break
    return tuple(QueryTerm(term, weight) for term, weight in expansions.items())


def _dedupe(terms: Iterable[QueryTerm]) -> list[QueryTerm]:
    best: dict[str, float] = {}
    for term in terms:
        best[term.term] = max(best.get(term.term, 0.0), term.weight)
    return [QueryTerm(term, weight) for term, weight in best.items()]


def build_index(docs: Mapping[str, MemoryDoc]) -> FieldIndex:
    """A FieldIndex of ``docs``, analysed and packed in one pass."""
    refs = sorted(docs)
    texts = [_doc_texts(docs[ref]) for ref in refs]
    return FieldIndex.from_corpus(FIELD_WEIGHTS, analyse_corpus(refs, texts, len(FIELDS)))


def _doc_texts(doc: MemoryDoc) -> tuple[str, ...]:
    """The document's text per field, in FIELDS order."""
    enrichment = doc.enrichment
    enriched = (enrichment.keywords, enrichment.usage_scenarios) if enrichment is not None else ((), ())
    return (
        doc.name, doc.description, "\n".join(doc.keywords), "\n".join(doc.usage_scenarios),
        "\n".join(enriched[0]), "\n".join(enriched[1]), doc.body,
    )


def _doc_fields(doc: MemoryDoc) -> tuple[tuple[list[str], ...], list[str]]:
    fields: list[list[str]] = []
    surfaces: list[str] = []
    for text in _doc_texts(doc):
        terms, words = analyze_terms(text)
        fields.append(terms)
        surfaces += words
    return tuple(fields), surfaces


def _body_pairs(body_terms: Sequence[str]) -> array[int]:
    """The body's adjacent term pairs (stop words dropped), as sorted hashes for a binary search."""
    return array("q", sorted({hash(pair) for pair in zip(body_terms, body_terms[1:])}))


def _has_pair(pairs: array[int], first: str, second: str) -> bool:
    key = hash((first, second))
    at = bisect_left(pairs, key)
    return at < len(pairs) and pairs[at] == key


def _bounded(tokens: list[Token]) -> list[Token]:
    """At most the first and last 64 tokens of a query."""
    if len(tokens) <= QUERY_HEAD_TOKENS + QUERY_TAIL_TOKENS:
        return tokens
    return tokens[:QUERY_HEAD_TOKENS] + tokens[-QUERY_TAIL_TOKENS:]


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
