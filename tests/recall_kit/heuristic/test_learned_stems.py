"""Learned words matched by their start (``recall_kit._fields.LEARNED_STEM_CHARS``): a prompt word
finds a learned word that starts the same way, a short shared start does not, and with the setting
off (the default) the learned field is indexed whole, as before."""

from __future__ import annotations

import dataclasses

import pytest

import recall_kit._fields as fields
from memory_store import Learned
from recall_kit._fields import build_index, doc_fields
from recall_kit._index import FieldIndex
from recall_kit._query import doc_evidence, query_slots, query_tokens
from selector_helpers import make_doc

DOCS = {
    "ship.md": dataclasses.replace(make_doc("ship.md", "shipping labels"), learned=Learned(keys=("parcelhub",))),
    "other.md": make_doc("other.md", "release checklist"),
}


def _learned_credit(index: FieldIndex, prompt: str, ref: str) -> list[bool]:
    """Per prompt word, whether ``ref`` matches it in its learned words alone."""
    slots = query_slots(index, query_tokens(prompt))
    return [slot.credit > 0 and slot.learned_only for slot in doc_evidence(index, slots, ref).slots]


def _added_index() -> FieldIndex:
    index = FieldIndex(fields.FIELD_WEIGHTS, b=fields.FIELD_B)
    for ref, doc in DOCS.items():
        terms, surfaces = doc_fields(doc)
        index.add(ref, terms, surfaces)
    return index


@pytest.fixture
def by_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fields, "LEARNED_STEM_CHARS", 5)


@pytest.mark.usefixtures("by_start")
@pytest.mark.parametrize("make_index", [lambda: build_index(DOCS), _added_index], ids=["built", "added"])
def test_a_prompt_word_finds_the_learned_word_it_starts(make_index) -> None:  # type: ignore[no-untyped-def]
    index = make_index()
    assert _learned_credit(index, "parcel", "ship.md") == [True]
    assert _learned_credit(index, "parcelhub", "ship.md") == [True]
    assert _learned_credit(index, "parcel", "other.md") == [False]


@pytest.mark.usefixtures("by_start")
def test_a_short_shared_start_does_not_match() -> None:
    index = build_index(DOCS)
    assert _learned_credit(index, "pa", "ship.md") == [False]
    assert _learned_credit(index, "parcs", "ship.md") == [False]  # 4 letters shared, not 5
    assert _learned_credit(index, "pager", "ship.md") == [False]


def test_off_by_default_the_learned_field_is_indexed_whole() -> None:
    assert fields.LEARNED_STEM_CHARS == 0
    index = build_index(DOCS)
    assert _learned_credit(index, "parcelhub", "ship.md") == [True]
    assert _learned_credit(index, "parcel", "ship.md") == [False]
    assert not [term for term in index.terms if term.startswith("~")]
    assert doc_fields(DOCS["ship.md"])[0][fields.LEARNED_FIELD] == ["parcelhub"]
