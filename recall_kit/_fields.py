"""The field schema the heuristic indexes: which fields a memory has, how much each weighs, and
what text (and which body word pairs) a document gives each."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from memory_store import MemoryDoc
from recall_kit._bm25 import B
from recall_kit._tokenize import analyze_terms
from recall_kit.limits import ENTRIES_PER_TERM, ENTRY_TERMS

if TYPE_CHECKING:  # building an index loads numpy; reading a cached one (FrozenIndex) does not
    from recall_kit._corpus import Corpus
    from recall_kit._index import FieldIndex

# Field order in the index (the body last); the head fields say what a memory is "about".
# Keywords and usage scenarios are the words a user might type instead of the memory's own, written
# at write time by the agent (into the frontmatter) or by `recall-kit enrich` (into the sidecar); the
# gate weighs a match in them alone below one in the memory's name or description, wherever they
# are kept (`bench delivery --frontmatter` measures the frontmatter form).
# Learned words (the user's own words for a memory, kept from the model's choices) are a field of
# their own, last, so that a store that learned nothing indexes exactly as before.
FIELDS = (
    "name", "description", "keywords", "usage_scenarios", "enriched_keywords", "enriched_scenarios", "body",
    "learned",
)
HEAD_FIELDS = frozenset({0, 1, 2, 3, 4, 5, 7})
CORE_FIELDS = frozenset({0, 1})  # what the memory says it is: its name and description
ENRICHMENT_FIELDS = frozenset({2, 3, 4, 5})  # keywords and usage scenarios, from the frontmatter or the sidecar
BODY_FIELD = 6
LEARNED_FIELD = 7
# Ungated top-1 on agent-memories / locomo-dev: 0.898 / 0.623 with these, 0.873 / 0.639 with
# all weights 1, 0.885 / 0.602 with 4-4-4-1 (bench/bench_heuristic.py, 2026-11-29).
# The learned field's weight: chosen by `recall-kit bench replay` (see the gate's learned settings).
LEARNED_WEIGHT = 2.0
FIELD_WEIGHTS = (2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 1.0, LEARNED_WEIGHT)
# Length normalisation per field: BM25's usual b, except for the learned words. Most memories have
# none, so their average length is near 0 and normalising by it buried a memory that learned four
# words among 27 that learned nothing (its learned match scored below a stray body word).
FIELD_B = (B,) * 7 + (0.0,)
# Learned words match by their first letters: a learned word of at least this many letters and
# digits ("_" not counted) is indexed as that start ("parcelhub" as "~parce"), and a prompt word is
# looked up by its start as well, so "parcel" finds what "parcelhub" taught, and "offsite" what
# "off-site" taught. 0 indexes learned words whole, as every other field. Measured with
# `recall-kit bench replay` (docs/learning.md, "Matching learned words by their start").
LEARNED_STEM_CHARS = 0
_STEM_MARK = "~"  # no analysed term holds it, so a start never meets a whole word of another field


def learned_stem(term: str) -> str | None:
    """The term that stands for analysed ``term`` in the learned field, when it is matched by its start."""
    if not LEARNED_STEM_CHARS:
        return None
    letters = term.replace("_", "")
    if len(letters) < LEARNED_STEM_CHARS or not letters.isalnum() or not letters.isascii():
        return None
    return _STEM_MARK + letters[:LEARNED_STEM_CHARS]


def build_index(docs: Mapping[str, MemoryDoc], field_weights: Sequence[float] = FIELD_WEIGHTS) -> FieldIndex:
    """A FieldIndex of ``docs``, analysed and packed in one pass."""
    from recall_kit._corpus import analyse_corpus
    from recall_kit._index import FieldIndex

    refs = sorted(docs)
    texts = [doc_texts(docs[ref]) for ref in refs]
    return FieldIndex.from_corpus(field_weights, _stem_learned(analyse_corpus(refs, texts, len(FIELDS))), b=FIELD_B)


def doc_texts(doc: MemoryDoc) -> tuple[str, ...]:
    """The document's text per field, in FIELDS order."""
    enrichment = doc.enrichment
    enriched = (enrichment.keywords, enrichment.usage_scenarios) if enrichment is not None else ((), ())
    learned = doc.learned.keys if doc.learned is not None else ()
    return (
        doc.name, doc.description, "\n".join(doc.keywords), "\n".join(doc.usage_scenarios),
        "\n".join(enriched[0]), "\n".join(enriched[1]), doc.body, "\n".join(learned),
    )


def doc_entries(doc: MemoryDoc) -> dict[str, tuple[frozenset[str], ...]]:
    """Per term of the document's keywords and usage scenarios (frontmatter, then sidecar), the entries
    holding it, each as its set of terms (bounded: ``limits.ENTRIES_PER_TERM``, ``limits.ENTRY_TERMS``)."""
    enrichment = doc.enrichment
    listed = (*doc.keywords, *doc.usage_scenarios)
    if enrichment is not None:
        listed += (*enrichment.keywords, *enrichment.usage_scenarios)
    holding: dict[str, list[frozenset[str]]] = {}
    for text in listed:
        entry = frozenset(analyze_terms(text)[0][:ENTRY_TERMS])
        for term in entry:
            entries = holding.setdefault(term, [])
            if len(entries) < ENTRIES_PER_TERM:
                entries.append(entry)
    return {term: tuple(entries) for term, entries in holding.items()}


def doc_fields(doc: MemoryDoc) -> tuple[tuple[list[str], ...], list[str]]:
    """The document's terms per field (FIELDS order) and its surface words: what one index add takes."""
    fields: list[list[str]] = []
    surfaces: list[str] = []
    for text in doc_texts(doc):
        terms, words = analyze_terms(text)
        fields.append(terms)
        surfaces += words
    fields[LEARNED_FIELD] = [_learned_term(term) for term in fields[LEARNED_FIELD]]
    return tuple(fields), surfaces


def _learned_term(term: str) -> str:
    return learned_stem(term) or term


def _stem_learned(corpus: Corpus) -> Corpus:
    """``corpus`` with its learned field's terms as ``_learned_term`` gives them."""
    docs, ids = corpus.field_tokens[LEARNED_FIELD]
    if not LEARNED_STEM_CHARS or not len(ids):
        return corpus
    import numpy as np

    terms = list(corpus.terms)
    mapped = np.arange(len(terms), dtype=np.int64)
    added: dict[str, int] = {}
    for i in np.unique(ids).tolist():  # only the learned field's own terms: a few per memory that learned
        target = learned_stem(terms[i])
        if target is not None:
            mapped[i] = added.setdefault(target, len(terms) + len(added))
    terms += added  # new ids in insertion order, as setdefault numbered them
    field_tokens = list(corpus.field_tokens)
    field_tokens[LEARNED_FIELD] = (docs, mapped[ids])
    return replace(corpus, terms=terms, field_tokens=field_tokens)


def body_pairs(body_terms: Sequence[str]) -> array[int]:
    """The body's adjacent term pairs (stop words dropped), as sorted hashes for a binary search."""
    return array("q", sorted({hash(pair) for pair in zip(body_terms, body_terms[1:])}))


def has_pair(pairs: array[int], first: str, second: str) -> bool:
    """Whether ``first`` stands right before ``second`` in the body ``pairs`` came from."""
    key = hash((first, second))
    at = bisect_left(pairs, key)
    return at < len(pairs) and pairs[at] == key
