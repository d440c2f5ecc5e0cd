"""The index's scores are BM25 (pinned to rank-bm25) and updates equal rebuilds."""

from __future__ import annotations

import math
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from recall_kit._bm25 import bm25_idf
from recall_kit._corpus import analyse_corpus
from recall_kit._frozen_index import FrozenIndex
from recall_kit._index import FieldIndex, QueryTerm
from recall_kit._tokenize import analyze_terms, tokenize

WORDS = st.sampled_from("alpha beta gamma delta eps zeta eta theta iota kappa".split())
CORPUS = st.lists(st.lists(WORDS, min_size=1, max_size=12), min_size=1, max_size=12)


class BM25OkapiPositiveIdf(BM25Okapi):
    """rank-bm25's BM25Okapi with the index's non-negative idf in place of its own."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        for word, freq in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


def single_field_index(corpus: list[list[str]]) -> FieldIndex:
    index = FieldIndex((1.0,))
    for i, doc in enumerate(corpus):
        index.add(f"d{i:03d}", [doc])
    return index


@settings(max_examples=150, deadline=None)
@given(corpus=CORPUS, query=st.lists(WORDS, min_size=1, max_size=5, unique=True))
def test_single_field_scores_equal_rank_bm25_okapi_with_positive_idf(corpus, query) -> None:
    index = single_field_index(corpus)
    reference = BM25OkapiPositiveIdf(corpus, k1=index.k1, b=index.b).get_scores(query)
    hits, _ = index.score([QueryTerm(t) for t in query], limit=len(corpus))
    ours = {hit.ref: hit.score for hit in hits}
    for i, expected in enumerate(reference):
        assert math.isclose(ours.get(f"d{i:03d}", 0.0), expected, rel_tol=1e-9, abs_tol=1e-12)


def test_idf_stays_positive_for_a_term_in_every_document() -> None:
    assert bm25_idf(1, 1) > 0
    assert bm25_idf(3, 3) > 0
    assert bm25_idf(100, 1) > bm25_idf(100, 50) > bm25_idf(100, 100) > 0


def test_one_document_store_scores_its_match_above_zero() -> None:
    hits, visited = single_field_index([["postgres", "migration"]]).score([QueryTerm("postgres")])
    assert [h.ref for h in hits] == ["d000"] and hits[0].score > 0 and visited == 1


EDIT = st.tuples(st.integers(0, 7), st.none() | st.lists(WORDS, min_size=0, max_size=8))


@settings(max_examples=150, deadline=None)
@given(
    start=st.lists(st.lists(WORDS, max_size=8), max_size=8),
    edits=st.lists(EDIT, max_size=20),
    query=st.lists(WORDS, min_size=1, max_size=4, unique=True),
    compact_min_postings=st.sampled_from([0, 3, 512]),
    packed_start=st.booleans(),
)
def test_incremental_updates_score_like_a_rebuild(start, edits, query, compact_min_postings, packed_start) -> None:
    weights = (3.0, 1.0)
    terms = [QueryTerm(t) for t in query]
    docs = {f"d{i}": (words[:2], words[2:]) for i, words in enumerate(start)}
    index = FieldIndex(weights, compact_min_postings=compact_min_postings)
    for ref, fields in docs.items():
        index.add(ref, fields)
    if packed_start:
        index.compact()
    for slot, words in edits:
        index.score(terms)
        ref = f"d{slot}"
        if words is None:
            assert index.remove(ref) == (ref in docs)
            docs.pop(ref, None)
        else:
            docs[ref] = (words[:2], words[2:])
            index.add(ref, docs[ref])
    rebuilt = FieldIndex(weights)
    for ref in sorted(docs):
        rebuilt.add(ref, docs[ref])
    assert index.score(terms) == rebuilt.score(terms)
    assert index.total_lengths == rebuilt.total_lengths
    assert index.doc_freqs() == rebuilt.doc_freqs()


TEXT_WORDS = st.sampled_from(
    "Deploy deploys running the `uv` deploy_tool fooBar it's 数据库迁移 config.yaml, x Postgres数据库 re-run".split()
)
TEXTS = st.lists(st.tuples(*(st.lists(TEXT_WORDS, max_size=6).map(" ".join) for _ in range(3))), min_size=1, max_size=8)


@settings(max_examples=100, deadline=None)
@given(docs=TEXTS, query=st.lists(TEXT_WORDS, min_size=1, max_size=4))
def test_a_packed_build_equals_adding_one_document_at_a_time(docs, query) -> None:
    weights = (2.0, 2.0, 1.0)
    refs = [f"d{i:03d}" for i in range(len(docs))]
    packed = FieldIndex.from_corpus(weights, analyse_corpus(refs, docs, len(weights)))
    added = FieldIndex(weights)
    for ref, texts in zip(refs, docs):
        fields = [analyze_terms(text) for text in texts]
        added.add(ref, [terms for terms, _ in fields], [w for _, words in fields for w in words])
    terms = [QueryTerm(term, weight=0.8 if i else 1.0) for i, term in enumerate(tokenize(" ".join(query)))]
    assert packed.score(terms) == added.score(terms)
    assert packed.doc_freqs() == added.doc_freqs()
    assert packed.total_lengths == added.total_lengths
    assert all(packed.posting(t, ref) == added.posting(t, ref) for t in added.terms for ref in refs)
    words = set(added.surface_words)
    assert {w: packed.surface_doc_count(w) for w in words} == {w: added.surface_doc_count(w) for w in words}


@settings(max_examples=50, deadline=None)
@given(start=st.lists(st.lists(WORDS, max_size=8), max_size=8), drop=st.sets(st.integers(0, 7)))
def test_the_saved_state_restores_an_index_that_scores_the_same(start, drop) -> None:
    index = FieldIndex((3.0, 1.0))
    for i, words in enumerate(start):
        index.add(f"d{i}", (words[:2], words[2:]), words)
    for i in drop:
        index.remove(f"d{i}")
    terms = [QueryTerm(t) for t in ("alpha", "beta", "gamma")]
    restored = FieldIndex.from_state(index.state())
    assert restored.score(terms) == index.score(terms)
    assert restored.doc_freqs() == index.doc_freqs() and set(restored.ids) == set(index.ids)
    assert [restored.surface_doc_count(w) for w in ("alpha", "beta")] == [index.surface_doc_count(w) for w in ("alpha", "beta")]


def test_ties_break_by_ref() -> None:
    index = FieldIndex((1.0,))
    for ref in ("c", "a", "b"):
        index.add(ref, [["same", "words"]])
    hits, _ = index.score([QueryTerm("same")])
    assert [h.ref for h in hits] == ["a", "b", "c"]
    assert [h.ref for h in index.score([QueryTerm("same")], limit=2)[0]] == ["a", "b"]


def test_name_field_weighted_above_body() -> None:
    index = FieldIndex((3.0, 1.0))
    index.add("in-name", [["redis"], ["cache", "notes"]])
    index.add("in-body", [["cache"], ["redis", "notes"]])
    hits, _ = index.score([QueryTerm("redis")])
    assert [h.ref for h in hits] == ["in-name", "in-body"]


def test_scoring_visits_only_the_query_terms_postings() -> None:
    index = FieldIndex((1.0,))
    for i in range(200):
        index.add(f"d{i}", [["common", f"rare{i}"]])
    _, visited = index.score([QueryTerm("rare7")])
    assert visited == 1


def _saved_index() -> dict:
    index = FieldIndex((2.0, 1.0))
    for i, words in enumerate([["alpha", "beta"], ["beta", "gamma"], ["gamma", "alpha", "delta"]]):
        index.add(f"d{i}", (words[:1], words[1:]), words)
    return index.state()


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: {**s, "term_docs": bytes([9]) + s["term_docs"][1:]},  # a document that does not exist
        lambda s: {**s, "term_docs": s["term_docs"][::-1]},  # postings out of order
        lambda s: {**s, "term_ptr": s["term_ptr"][:-8]},  # offsets cut short
        lambda s: {**s, "lengths": s["lengths"][:-4]},
        lambda s: {**s, "lengths": (-1).to_bytes(4, sys.byteorder, signed=True) + s["lengths"][4:]},  # a length below 0
        lambda s: {**s, "refs": ["d0", "d0", "d1"]},  # a ref twice
        lambda s: {**s, "doc_type": "f8"},
    ],
)
@pytest.mark.parametrize("read", [FieldIndex.from_state, FrozenIndex], ids=["FieldIndex", "FrozenIndex"])
def test_a_saved_state_that_does_not_fit_together_is_refused(damage, read) -> None:
    with pytest.raises((ValueError, KeyError)):
        read(damage(_saved_index()))


FIELD_TEXTS = st.lists(st.lists(WORDS, max_size=10), min_size=3, max_size=3)


@settings(max_examples=150, deadline=None)
@given(
    docs=st.lists(FIELD_TEXTS, max_size=12),
    drop=st.sets(st.integers(0, 11)),
    weights=st.sampled_from([(2.0, 2.0, 1.0), (3.0, 0.5, 1.25)]),
    b=st.sampled_from([0.75, (0.75, 0.3, 0.0)]),
    query=st.lists(st.tuples(WORDS, st.sampled_from([1.0, 0.8, 0.37])), min_size=1, max_size=5),
    limit=st.sampled_from([1, 3, 50]),
)
def test_a_frozen_index_reads_its_state_exactly_as_the_field_index_restored_from_it(docs, drop, weights, b, query, limit) -> None:
    built = FieldIndex(weights, b=b)
    for i, fields in enumerate(docs):
        built.add(f"d{i:02d}", fields, [w for field in fields for w in field])
    for i in drop:
        built.remove(f"d{i:02d}")
    state = built.state()
    restored, frozen = FieldIndex.from_state(state), FrozenIndex(state)
    terms = [QueryTerm(term, weight) for term, weight in query]
    assert frozen.score(terms, limit=limit) == restored.score(terms, limit=limit)  # to the last bit
    assert frozen.doc_freqs() == restored.doc_freqs() and frozen.total_lengths == restored.total_lengths
    assert all(frozen.posting(t, ref) == restored.posting(t, ref) for t in restored.terms for ref in restored.ids)
    words = set(restored.surface_words)
    assert {w: frozen.surface_doc_count(w) for w in words} == {w: restored.surface_doc_count(w) for w in words}
    assert [frozen.surface_candidates(c, range(2, 6)) for c in "abgz"] == [restored.surface_candidates(c, range(2, 6)) for c in "abgz"]
    assert frozen.thaw().score(terms, limit=limit) == restored.score(terms, limit=limit)
    assert FrozenIndex.postings_in(state) == sum(restored.doc_freqs().values())


@settings(max_examples=100, deadline=None)
@given(corpus=CORPUS, query=st.lists(WORDS, min_size=2, max_size=5, unique=True))
def test_a_query_scores_each_document_as_its_terms_scores_summed_in_query_order(corpus, query) -> None:
    index = single_field_index(corpus)
    together = dict((hit.ref, hit.score) for hit in index.score([QueryTerm(t) for t in query], limit=1000)[0])
    alone = [dict((hit.ref, hit.score) for hit in index.score([QueryTerm(t)], limit=1000)[0]) for t in query]
    for ref, score in together.items():
        expected = 0.0
        for scores in alone:
            expected += scores.get(ref, 0.0)
        assert score == expected  # exactly: the same additions in the same order


SURFACES = st.text(alphabet="abcé", min_size=1, max_size=7)


@settings(max_examples=100, deadline=None)
@given(first=st.lists(SURFACES, max_size=30), later=st.lists(SURFACES, max_size=30), lo=st.integers(0, 8), span=st.integers(0, 3))
def test_surface_candidates_after_additions_equal_a_scan_of_every_surface_word(first, later, lo, span) -> None:
    index = FieldIndex((1.0,))
    index.add("d0", [["x"]], first)
    index.surface_candidates("a", range(1, 3))  # the shelves exist before the later words arrive
    index.add("d1", [["y"]], later)
    for initial in "abcé":
        words = [word for word in index.surface_words if word[:1] == initial and lo <= len(word) <= lo + span]
        assert sorted(index.surface_candidates(initial, range(lo, lo + span + 1))) == sorted(words)
        listed = [word for length in (lo, lo + span) for word in index.surface_words if word[:1] == initial and len(word) == length]
        assert sorted(index.surface_candidates(initial, [lo, lo + span])) == sorted(listed)


def test_held_in_says_whether_some_live_document_holds_a_term_in_the_given_fields() -> None:
    from recall_kit._frozen_index import FrozenIndex

    index = FieldIndex((2.0, 2.0, 1.0))
    index.add("a", [["alpha"], ["beta"], ["gamma"]])
    index.add("b", [[], ["delta"], ["beta"]])
    for view in (index, FrozenIndex(index.state())):
        assert view.held_in("beta", (1,)) and view.held_in("beta", (2,)) and not view.held_in("beta", (0,))
        assert view.held_in("delta", (0, 1)) and not view.held_in("delta", (0, 2))
        assert not view.held_in("absent", (0, 1, 2))
    index.remove("a")
    assert not index.held_in("beta", (1,)) and index.held_in("beta", (2,))  # only live documents count
