"""Query analysis: what the fast stage reads of a prompt, its words as idf-weighted slots (with typo
expansions), which of them stand next to each other, and the gate's Evidence for one document."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from recall_kit._fields import BODY_FIELD, CORE_FIELDS, ENRICHMENT_FIELDS, HEAD_FIELDS, LEARNED_FIELD, has_pair, learned_stem
from recall_kit._gate import Evidence, SlotMatch
from recall_kit._bm25 import QueryTerm, ScoringIndex, bm25_idf
from recall_kit._tokenize import Token, analyze, is_cjk_term, stem
from recall_kit.limits import QUERY_HEAD_TOKENS, QUERY_TAIL_TOKENS, clip_prompt

# Typo tolerance: only for unknown words long enough that one slip leaves them recognisable.
# Edits are optimal-string-alignment edits (a swap of neighbours is one edit: deplyo -> deploy);
# agent-memories typo strict 1.00 with this, 0.77 with rapidfuzz ratio >= 0.85 (swaps fall below).
TYPO_MIN_LENGTH = 5
TYPO_MAX_EDITS = 1
TYPO_LONG_WORD = 9  # from this length on, two edits
TYPO_MAX_EDITS_LONG = 2
TYPO_MAX_EXPANSIONS = 2
TYPO_WEIGHT = 0.8  # an expansion counts below an exact match (times 1 - edits / length)

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


@dataclass(frozen=True, slots=True)
class QuerySlot:
    """One distinct query word: its idf mass and the terms that may match it, with credit."""

    mass: float
    matches: tuple[QueryTerm, ...]
    known: bool  # some document holds it (or, for a typo, what it was meant to be)
    generic: bool  # an everyday word: weak evidence that a memory applies
    term: str  # the query's own term
    run: tuple[int, int] | None = None  # a CJK bigram's run in the query, and its place in the run
    number: bool = False  # a bare number: specific only where the memory's own text holds it
    enrichment_vocabulary: bool = False  # known only through keywords and usage scenarios (no memory's own text holds it)


def query_tokens(query: str) -> list[Token]:
    """The tokens the fast stage reads of ``query``: its head and tail, in characters then tokens."""
    return _bounded(analyze(clip_prompt(query)))


def prompt_words(tokens: Iterable[Token]) -> tuple[str, ...]:
    """The prompt's distinct words as learning keeps them: each token's folded surface word (its term
    for a CJK bigram or a whole identifier), in order. Suppressors are matched against these."""
    return tuple(dict.fromkeys(token.surface or token.term for token in tokens))


def is_generic(word: str) -> bool:
    """Whether ``word`` is an everyday word that says little about which memory applies."""
    return word in GENERIC_WORDS


def is_number(word: str) -> bool:
    """Whether ``word`` is a bare number (digits, or digits joined as in 3.11): the same digits name a
    room, a step and a ticket, so one is never learned, and is specific only where a memory's text holds it."""
    return word.replace("_", "").isdigit()


def query_slots(index: ScoringIndex, tokens: list[Token]) -> list[QuerySlot]:
    """The query's distinct words as ``index`` sees them; a word no document holds may match as a typo."""
    n = len(index)
    slots: list[QuerySlot] = []
    seen: set[str] = set()
    for token, run in zip(tokens, _cjk_runs(tokens)):
        if token.term in seen:
            continue
        seen.add(token.term)
        df = index.doc_freq(token.term)
        generic = is_generic(token.surface or token.term)
        number = is_number(token.surface or token.term)
        by_start = _by_start(index, token.term, df)
        if df:
            matches = (QueryTerm(token.term), *by_start)
            slots.append(QuerySlot(
                bm25_idf(n, df), matches, True, generic, token.term, run, number, _enrichment_vocabulary(index, matches)
            ))
            continue
        if by_start:
            slots.append(QuerySlot(index.idf(by_start[0].term), by_start, True, generic, token.term, run, number))
            continue
        if token.surface is None and not is_cjk_term(token.term):
            continue  # an unknown whole identifier: its parts carry it
        expansions = _typo_expansions(index, token.surface) if token.surface else ()
        if expansions:  # weigh a mistyped word like the word it was meant to be
            mass = max(index.idf(match.term) for match in expansions)
            slots.append(QuerySlot(
                mass, expansions, True, generic, token.term, enrichment_vocabulary=_enrichment_vocabulary(index, expansions)
            ))
        else:
            slots.append(QuerySlot(bm25_idf(n, 0), (), False, generic, token.term))
    return slots


def _enrichment_vocabulary(index: ScoringIndex, matches: Sequence[QueryTerm]) -> bool:
    """Whether only keywords and usage scenarios hold the terms ``matches`` names: the word is known only
    because enrichment made it so, and a store without enrichment would count it as unknown."""
    return not any(index.held_in(match.term, _OWN_TEXT_BODY_FIRST) for match in matches)


def _by_start(index: ScoringIndex, term: str, df: int) -> tuple[QueryTerm, ...]:
    """The learned field's match for ``term`` by its start (one term lookup), weighed at most as
    rare as the word itself and the learned words it stands for together."""
    start = learned_stem(term)
    start_df = index.doc_freq(start) if start is not None else 0
    if start is None or not start_df:
        return ()
    n = len(index)
    return (QueryTerm(start, min(1.0, bm25_idf(n, df + start_df) / bm25_idf(n, start_df))),)


def query_terms(slots: Iterable[QuerySlot]) -> list[QueryTerm]:
    """The terms to score, each once with the best credit any slot gives it."""
    best: dict[str, float] = {}
    for slot in slots:
        for match in slot.matches:
            best[match.term] = max(best.get(match.term, 0.0), match.weight)
    return [QueryTerm(term, weight) for term, weight in best.items()]


def adjacent_slots(tokens: list[Token], slots: list[QuerySlot]) -> list[tuple[int, int]]:
    """Pairs of known query words that stand next to each other in the query (stop words dropped)."""
    number = {slot.term: i for i, slot in enumerate(slots)}
    pairs: dict[tuple[int, int], None] = {}
    for before, after in zip(tokens, tokens[1:]):
        first, second = number.get(before.term), number.get(after.term)
        if first is not None and second is not None and first != second:
            if slots[first].matches and slots[second].matches:
                pairs[first, second] = None
    return list(pairs)


def doc_evidence(
    index: ScoringIndex,
    slots: list[QuerySlot],
    ref: str,
    adjacent: Sequence[tuple[int, int]] = (),
    body_pairs: array[int] | None = None,
    entries: Mapping[str, Sequence[frozenset[str]]] | None = None,
) -> Evidence:
    """What the gate reads of document ``ref``: per query slot, how and where the document matches it.
    ``entries``: per term, its keywords and usage scenarios holding it (``doc_entries``)."""
    in_phrase: set[int] = set()
    if body_pairs:
        for first, second in adjacent:
            if any(
                has_pair(body_pairs, a.term, b.term) for a in slots[first].matches for b in slots[second].matches
            ):
                in_phrase.update((first, second))
    # per slot: credit, in a head field, in a core field, learned only, its terms when enrichment only,
    # generic (for this document)
    found: list[tuple[float, bool, bool, bool, frozenset[str] | None, bool]] = []
    for slot in slots:
        credit = 0.0
        in_learned = in_core = in_written = in_own = in_text = False  # in_written: a head field other than the learned words
        in_enrichment = False
        terms: set[str] = set()
        for match in slot.matches:
            posting = index.posting(match.term, ref)
            if posting:
                credit = max(credit, match.weight)
                terms.add(match.term)
                in_written = in_written or any(posting[field] for field in _WRITTEN_HEAD)
                in_learned = in_learned or bool(posting[LEARNED_FIELD])
                in_core = in_core or any(posting[field] for field in CORE_FIELDS)
                in_own = in_own or any(posting[field] for field in _OWN_TEXT)
                in_text = in_text or any(posting[field] for field in _AUTHOR_FIELDS)
                in_enrichment = in_enrichment or any(posting[field] for field in ENRICHMENT_FIELDS)
        only = frozenset(terms) if in_enrichment and not in_own else None
        generic = slot.generic or (slot.number and not in_text)  # a number learned or enriched is no evidence
        found.append((credit, in_written or in_learned, in_core, in_learned and not in_written, only, generic))
    in_entry = _in_entries(slots, [f[4] for f in found], entries or {})
    agreeing = _agreeing(slots, [f[4] if f[0] and not f[5] else None for f in found], entries or {})
    words = _cjk_words(slots, [bool(f[0]) and not f[5] for f in found])
    return Evidence(tuple(
        SlotMatch(
            slot.mass, credit, slot.known, generic, is_cjk_term(slot.term), in_head,
            number in in_phrase, in_core, words[number], learned_only, only is not None, number in in_entry,
            slot.enrichment_vocabulary, number in agreeing,
        )
        for number, (slot, (credit, in_head, in_core, learned_only, only, generic)) in enumerate(zip(slots, found))
    ))


def _in_entries(
    slots: Sequence[QuerySlot],
    enrichment_only: Sequence[frozenset[str] | None],
    entries: Mapping[str, Sequence[frozenset[str]]],
) -> set[int]:
    """The slots matched only in enrichment words whose term stands in a keyword or usage scenario that the
    query matches whole ("alembic"), or in two of its words ("rewrite history" for "rewrite published
    history"): one word of a longer entry ("generation" of "changelog generation") is weaker evidence.
    ``entries``: per term, the entries holding it (``doc_entries``)."""
    if not entries or not any(enrichment_only):
        return set()
    query = {match.term for slot in slots for match in slot.matches}
    return {
        number for number, terms in enumerate(enrichment_only)
        if terms and any(len(entry) == 1 or len(entry & query) >= 2 for term in terms for entry in entries.get(term, ()))
    }


def _agreeing(
    slots: Sequence[QuerySlot],
    enrichment_only: Sequence[frozenset[str] | None],
    entries: Mapping[str, Sequence[frozenset[str]]],
) -> set[int]:
    """The specific slots matched only in enrichment words that two of the document's keywords or usage
    scenarios agree on: two entries, each matched by a query word the other does not hold ("laptop" and
    "x86" for a memory with keywords "laptop" and "x86 emulation"). Two words of one entry ("command
    line") are one piece of evidence, however many words it holds. ``enrichment_only``: per slot, its
    terms when it is a specific word matched only in enrichment words, else None."""
    matched: dict[frozenset[str], set[int]] = {}  # entry -> the slots matching it
    for number, terms in enumerate(enrichment_only):
        for term in terms or ():
            for entry in entries.get(term, ()):
                matched.setdefault(entry, set()).add(number)
    found: set[int] = set()
    groups = list(matched.values())
    for place, first in enumerate(groups):
        for second in groups[place + 1 :]:
            if first - second and second - first:
                found |= first ^ second
    return found


_WRITTEN_HEAD = sorted(HEAD_FIELDS - {LEARNED_FIELD})
_OWN_TEXT = sorted(CORE_FIELDS | {BODY_FIELD, LEARNED_FIELD})  # anything but keywords and usage scenarios
_OWN_TEXT_BODY_FIRST = (BODY_FIELD, *sorted(CORE_FIELDS), LEARNED_FIELD)  # the same, likeliest first
_AUTHOR_FIELDS = sorted(CORE_FIELDS | {BODY_FIELD})  # what the memory's author wrote


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


def _cjk_words(slots: Sequence[QuerySlot], matched: Sequence[bool]) -> list[float]:
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


def _typo_expansions(index: ScoringIndex, surface: str) -> tuple[QueryTerm, ...]:
    if len(surface) < TYPO_MIN_LENGTH or not surface.isalpha():
        return ()
    max_edits = TYPO_MAX_EDITS_LONG if len(surface) >= TYPO_LONG_WORD else TYPO_MAX_EDITS
    # Typos rarely hit the first letter; bucketing by it keeps this cheap at 50,000 documents.
    lengths = range(len(surface) - max_edits, len(surface) + max_edits + 1)
    candidates = index.surface_candidates(surface[0], lengths)
    from rapidfuzz import process  # imported here: only a long word that no memory holds needs it
    from rapidfuzz.distance import OSA

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


def _bounded(tokens: list[Token]) -> list[Token]:
    """At most the first and last 64 tokens of a query."""
    if len(tokens) <= QUERY_HEAD_TOKENS + QUERY_TAIL_TOKENS:
        return tokens
    return tokens[:QUERY_HEAD_TOKENS] + tokens[-QUERY_TAIL_TOKENS:]
