"""recall_kit.selection: the selector's steps without HTTP give what the real selector sends and reads."""

from __future__ import annotations

import dataclasses
import json

import pytest

from selector_helpers import make_doc, select_with
from recall_kit.selection import (
    AnswerError,
    answer_text,
    build_manifest,
    clear_line_cache,
    parse_answer,
    response_format,
    selection_messages,
    validate_selection,
)
from recall_kit.testing import Reply, ScriptedChatServer

DAY_S = 86_400.0
# ages half a day inside their unit, so the manifest rebuilt after the request shows the same ages
DOCS = [make_doc(f"notes/topic-{i:03d}.md", f"topic {i} details", age_s=(i + 2.5) * DAY_S) for i in range(6)]
QUERY = "where are the deploy notes?"


def test_the_steps_rebuild_the_request_the_selector_sends(server: ScriptedChatServer) -> None:
    _, [request] = select_with(server, Reply.select(DOCS[1].ref), candidates=DOCS, query=QUERY)
    manifest = build_manifest(DOCS)
    assert request.body["messages"] == selection_messages(QUERY, manifest)
    assert request.body["response_format"] == response_format("json_schema", manifest)


def test_response_format_per_mode_names_the_manifest_refs_only_in_the_schema() -> None:
    manifest = build_manifest(DOCS)
    schema = response_format("json_schema", manifest)
    assert schema is not None
    assert schema["json_schema"]["schema"]["properties"]["selected_memories"]["items"]["enum"] == list(manifest.docs)
    assert response_format("json_object", manifest) == {"type": "json_object"}
    assert response_format("text", manifest) is None


def test_an_answer_body_is_read_parsed_and_validated_against_the_manifest() -> None:
    manifest = build_manifest(DOCS)
    text = f"Sure:\n```json\n{json.dumps({'selected_memories': [DOCS[3].ref, '../etc/passwd']})}\n```"
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
    verdict = validate_selection(parse_answer(answer_text(body)), manifest.docs)
    assert verdict.accepted == (DOCS[3].ref,)
    assert verdict.rejected == (("../etc/passwd", "path escapes the memory roots"),)


@pytest.mark.parametrize("body", [b"not json", b'{"choices": []}', b'{"choices": [{"message": {"content": 7}}]}'])
def test_a_body_without_answer_text_raises_answer_error(body: bytes) -> None:
    with pytest.raises(AnswerError):
        answer_text(body)


def test_clear_line_cache_renders_every_line_afresh() -> None:
    doc = make_doc("notes/cached.md", "the first description", age_s=3 * DAY_S)
    # the same ref and content hash: the cache cannot tell it changed
    edited = dataclasses.replace(doc, description="the second description")
    assert "the first description" in build_manifest([doc]).text
    assert "the first description" in build_manifest([edited]).text
    clear_line_cache()
    assert "the second description" in build_manifest([edited]).text
