"""Reading the model's text defensively and validating every reference against the manifest."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selector_helpers import NOW, make_docs
from recall_kit._answer import MAX_MODEL_DOCS, AnswerError, parse_answer, validate_selection
from recall_kit._manifest import build_manifest

MANIFEST = build_manifest(make_docs(10), now=NOW)
REFS = list(MANIFEST.docs)


@pytest.mark.parametrize(
    "text",
    [
        '{"selected_memories": ["a", "b"]}',
        '  \n{"selected_memories": ["a", "b"]}\n',
        '```json\n{"selected_memories": ["a", "b"]}\n```',
        '```\n{"selected_memories": ["a", "b"]}\n```',
        'Sure, here it is:\n{"selected_memories": ["a", "b"]}\nAnything else?',
        'I think {maybe} this: {"selected_memories": ["a", "b"]}',
        '["a", "b"]',
    ],
)
def test_answer_parsed_from_json_fences_and_prose(text: str) -> None:
    assert parse_answer(text) == ["a", "b"]


@pytest.mark.parametrize(
    "text",
    [
        "The first memory is relevant.",
        '{"selected_memories": ["a", "b',
        '```json\n{"selected_memories": ["a",\n```',
        '{"memories": ["a"]}',
        '{"selected_memories": "a"}',
        "",
        "42",
    ],
)
def test_unusable_answer_is_an_answer_error(text: str) -> None:
    with pytest.raises(AnswerError):
        parse_answer(text)


def test_valid_refs_accepted_in_model_order() -> None:
    verdict = validate_selection([REFS[3], REFS[1]], MANIFEST.docs)
    assert verdict.accepted == (REFS[3], REFS[1])
    assert [d.ref for d in verdict.docs] == [REFS[3], REFS[1]]
    assert verdict.rejected == ()


def test_unknown_refs_rejected_valid_subset_kept() -> None:
    verdict = validate_selection(["mem/made-up.md", REFS[0]], MANIFEST.docs)
    assert verdict.accepted == (REFS[0],)
    assert verdict.rejected == (("mem/made-up.md", "not in the manifest"),)


@pytest.mark.parametrize("ref", ["../../etc/passwd", "/etc/passwd", "mem/../../x.md", "C:\\secrets.md", "~/.ssh/id_rsa",
                                 "mem/notes/../../../etc/shadow", "..\\..\\boot.ini"])
def test_escaping_paths_rejected_as_escapes(ref: str) -> None:
    verdict = validate_selection([ref], MANIFEST.docs)
    assert verdict.accepted == ()
    assert verdict.rejected == ((ref, "path escapes the memory roots"),)


def test_duplicates_rejected() -> None:
    verdict = validate_selection([REFS[0], REFS[0], f" {REFS[0]} "], MANIFEST.docs)
    assert verdict.accepted == (REFS[0],)
    assert [reason for _, reason in verdict.rejected] == ["duplicate", "duplicate"]


def test_more_than_five_keeps_the_first_five() -> None:
    verdict = validate_selection(REFS[:8], MANIFEST.docs)
    assert verdict.accepted == tuple(REFS[:MAX_MODEL_DOCS])
    assert verdict.rejected == tuple((r, "over the limit of 5") for r in REFS[5:8])


def test_wrong_types_rejected() -> None:
    verdict = validate_selection([42, None, {"ref": REFS[0]}, ["x"], True], MANIFEST.docs)
    assert verdict.accepted == ()
    assert [reason for _, reason in verdict.rejected] == [
        "not a string (int)", "not a string (NoneType)", "not a string (dict)", "not a string (list)",
        "not a string (bool)"]


def test_quoted_or_backticked_ref_accepted() -> None:
    assert validate_selection([f"`{REFS[2]}`"], MANIFEST.docs).accepted == (REFS[2],)


answers = st.lists(
    st.one_of(st.sampled_from(REFS), st.text(max_size=30), st.integers(), st.none(),
              st.sampled_from(["../x", "/etc/passwd", "mem/../../y"])),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(answers)
def test_validation_never_returns_more_than_five_unique_manifest_docs(raw: list[object]) -> None:
    verdict = validate_selection(raw, MANIFEST.docs)
    assert len(verdict.docs) <= MAX_MODEL_DOCS
    assert len(set(verdict.accepted)) == len(verdict.accepted)
    assert all(ref in MANIFEST.docs for ref in verdict.accepted)
    assert len(verdict.accepted) + len(verdict.rejected) == len(raw)
