"""Every scripted server behaviour against the real selector over loopback HTTP.

Each test runs inside run_checked, which fails when a task is left behind.
"""

from __future__ import annotations

import email.utils
import json
import time
from pathlib import Path

import pytest

from selector_helpers import kwargs_for, make_docs, run_checked, select_with
from recall_kit import MAX_MODEL_DOCS, ModelSelector, Selection
from recall_kit._selector import SYSTEM_PROMPT
from recall_kit.testing import Reply, ScriptedChatServer
from recall_kit.testing._replies import ESCAPING_REFS, INVENTED_REFS

DOCS = make_docs(10)
REFS = [d.ref for d in DOCS]
FALLBACK = DOCS[:1]


def test_given_selection_delivered_with_json_schema(server: ScriptedChatServer) -> None:
    selection, requests = select_with(server, Reply.select(REFS[2], REFS[0]), candidates=DOCS, fallback=FALLBACK)
    assert selection.strategy == "model"
    assert [d.ref for d in selection.docs] == [REFS[2], REFS[0]]
    assert selection.accepted == (REFS[2], REFS[0]) and selection.rejected == ()
    assert selection.fallback_reason is None and selection.response_mode == "json_schema"
    assert selection.latency_ms > 0


def test_request_carries_prompt_manifest_temperature_and_schema(server: ScriptedChatServer) -> None:
    _, [request] = select_with(server, Reply.empty(), candidates=DOCS, api_key="sk-abc")
    body = request.body
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-abc"
    assert body["model"] == "scripted-model" and body["temperature"] == 0
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert request.query == "where are the deploy notes?"
    assert request.manifest_refs == REFS
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["selected_memories"]["items"]["enum"] == REFS


def test_no_api_key_sends_no_authorization_header(server: ScriptedChatServer) -> None:
    _, [request] = select_with(server, Reply.empty())
    assert "authorization" not in request.headers


def test_oracle_selects_the_dataset_relevant_docs(tmp_path: Path) -> None:
    queries = tmp_path / "queries.jsonl"
    rows = [{"id": "q1", "query": "where are the deploy notes?", "relevant": ["notes/topic-004.md"], "kind": "x"},
            {"id": "q2", "query": "nothing here", "relevant": [], "kind": "neg"}]
    queries.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with ScriptedChatServer(oracle=queries) as srv:
        selection, _ = select_with(srv, candidates=DOCS)
        assert selection.accepted == (REFS[4],)
        negative, _ = select_with(srv, candidates=DOCS, query="nothing here")
        assert negative.strategy == "model" and negative.docs == ()


def test_empty_selection_is_a_model_answer_not_a_fallback(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.empty(), candidates=DOCS, fallback=FALLBACK)
    assert (selection.strategy, selection.docs, selection.fallback_reason) == ("model", (), None)


def test_hallucinated_refs_only_falls_back_to_heuristic(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.hallucinated(), candidates=DOCS, fallback=FALLBACK)
    assert selection.strategy == "heuristic" and selection.docs == tuple(FALLBACK)
    assert selection.fallback_reason == "no valid reference in the answer"
    assert selection.rejected == tuple((ref, "not in the manifest") for ref in INVENTED_REFS)


def test_hallucinated_refs_dropped_valid_subset_kept(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.hallucinated(valid=1), candidates=DOCS, fallback=FALLBACK)
    assert selection.strategy == "model" and selection.accepted == (REFS[0],)
    assert len(selection.rejected) == len(INVENTED_REFS)


def test_path_traversal_refs_rejected_and_fall_back(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.traversal(), candidates=DOCS, fallback=FALLBACK)
    assert selection.strategy == "heuristic" and selection.docs == tuple(FALLBACK)
    assert selection.rejected == tuple((ref, "path escapes the memory roots") for ref in ESCAPING_REFS)


def test_path_traversal_refs_dropped_valid_subset_kept(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.traversal(valid=2), candidates=DOCS, fallback=FALLBACK)
    assert selection.accepted == tuple(REFS[:2]) and len(selection.rejected) == 3


def test_duplicates_delivered_once(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.duplicates(), candidates=DOCS)
    assert selection.accepted == tuple(REFS[:2])
    assert [reason for _, reason in selection.rejected] == ["duplicate", "duplicate"]


def test_too_many_capped_at_five(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.too_many(8), candidates=DOCS)
    assert selection.accepted == tuple(REFS[:MAX_MODEL_DOCS])
    assert [ref for ref, _ in selection.rejected] == REFS[5:8]


def test_wrong_types_fall_back(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.wrong_types(), candidates=DOCS, fallback=FALLBACK)
    assert selection.strategy == "heuristic" and selection.fallback_reason == "no valid reference in the answer"
    assert all(reason.startswith("not a string") for _, reason in selection.rejected)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [(Reply.non_json(), "answer is not JSON"), (Reply.truncated_json(), "answer is not JSON"),
     (Reply.content('{"answer": []}'), "answer has no 'selected_memories' key"),
     (Reply.malformed_body(), "malformed response body")],
)
def test_unusable_answer_falls_back_with_reason(server: ScriptedChatServer, reply: Reply, reason: str) -> None:
    selection, _ = select_with(server, reply, candidates=DOCS, fallback=FALLBACK)
    assert (selection.strategy, selection.docs, selection.fallback_reason) == ("heuristic", tuple(FALLBACK), reason)


def test_fallback_without_heuristic_result_is_strategy_none(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.non_json(), candidates=DOCS)
    assert (selection.strategy, selection.docs) == ("none", ())


@pytest.mark.parametrize("reply", [Reply.code_fence(REFS[1]), Reply.prose_json(REFS[1])])
def test_json_in_code_fence_or_after_prose_accepted(server: ScriptedChatServer, reply: Reply) -> None:
    selection, _ = select_with(server, reply, candidates=DOCS)
    assert selection.strategy == "model" and selection.accepted == (REFS[1],)


def _twice(srv: ScriptedChatServer, *replies: Reply) -> tuple[list[Selection], list[list[str | None]]]:
    """Two selections by one selector, then one by a new selector of the same endpoint; each one's
    requests' response formats."""
    srv.script(*replies)
    marks: list[int] = []

    async def main() -> list[Selection]:
        selections = []
        async with ModelSelector(**kwargs_for(srv)) as selector:
            for _ in range(2):
                marks.append(len(srv.requests))
                selections.append(await selector.select("where are the deploy notes?", DOCS))
        marks.append(len(srv.requests))
        async with ModelSelector(**kwargs_for(srv)) as fresh:
            selections.append(await fresh.select("where are the deploy notes?", DOCS))
        marks.append(len(srv.requests))
        return selections

    selections = run_checked(main)
    formats = [r.response_format_type for r in srv.requests]
    return selections, [formats[a:b] for a, b in zip(marks, marks[1:])]


def test_json_schema_rejection_retries_with_json_object_and_is_remembered(server: ScriptedChatServer) -> None:
    selections, formats = _twice(server, Reply.reject_json_schema(), Reply.select(REFS[0]), Reply.select(REFS[1]),
                                 Reply.reject_json_schema(), Reply.select(REFS[2]))
    assert formats[0] == ["json_schema", "json_object"]
    assert selections[0].accepted == (REFS[0],) and selections[0].response_mode == "json_object"
    assert formats[1] == ["json_object"]  # the same selector goes straight to what worked
    assert formats[2] == ["json_schema", "json_object"]  # a new one learns it for itself: nothing process-wide


def test_endpoint_accepting_only_text_reached_in_three_requests() -> None:
    with ScriptedChatServer(selections=[REFS[3]], response_formats={"text"}) as srv:
        selections, formats = _twice(srv)
        assert formats[0] == ["json_schema", "json_object", "text"]
        assert [r.reply for r in srv.requests[:3]] == ["format_rejected", "format_rejected", "select"]
        assert selections[0].accepted == (REFS[3],) and selections[0].response_mode == "text"
        assert formats[1] == ["text"]


def test_other_400_after_format_retry_falls_back(server: ScriptedChatServer) -> None:
    selection, requests = select_with(
        server, Reply.error(400, "model not found"), Reply.error(400, "model not found"), candidates=DOCS,
        fallback=FALLBACK)
    assert len(requests) == 2
    assert selection.fallback_reason == "HTTP 400: model not found"


@pytest.mark.parametrize("status", [401, 403, 404])
def test_auth_and_not_found_errors_fall_back_without_retry(server: ScriptedChatServer, status: int) -> None:
    selection, requests = select_with(server, Reply.error(status), Reply.select(REFS[0]), candidates=DOCS,
                                      fallback=FALLBACK)
    assert len(requests) == 1
    assert selection.strategy == "heuristic" and selection.fallback_reason.startswith(f"HTTP {status}")


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_retryable_status_retried_once_then_answered(server: ScriptedChatServer, status: int) -> None:
    started = time.perf_counter()
    selection, requests = select_with(server, Reply.error(status, retry_after=0.2), Reply.select(REFS[0]),
                                      candidates=DOCS)
    assert len(requests) == 2 and selection.accepted == (REFS[0],)
    assert time.perf_counter() - started >= 0.2  # Retry-After honoured


def test_retryable_status_twice_falls_back_after_one_retry(server: ScriptedChatServer) -> None:
    selection, requests = select_with(server, Reply.error(503, "busy"), Reply.error(503, "busy"),
                                      Reply.select(REFS[0]), candidates=DOCS, fallback=FALLBACK)
    assert len(requests) == 2
    assert selection.fallback_reason == "HTTP 503: busy"


def test_retry_after_beyond_deadline_falls_back_at_once(server: ScriptedChatServer) -> None:
    started = time.perf_counter()
    selection, requests = select_with(server, Reply.rate_limited(60), candidates=DOCS, fallback=FALLBACK,
                                      timeout=2.0)
    assert time.perf_counter() - started < 1.0
    assert len(requests) == 1
    assert selection.fallback_reason == "HTTP 429; Retry-After 60 s exceeds the remaining deadline"


def test_retry_after_as_http_date_honoured(server: ScriptedChatServer) -> None:
    soon = email.utils.formatdate(time.time() + 1, usegmt=True)
    selection, requests = select_with(server, Reply.rate_limited(soon), Reply.select(REFS[0]), candidates=DOCS)
    assert len(requests) == 2 and selection.accepted == (REFS[0],)


def test_connection_reset_falls_back(server: ScriptedChatServer) -> None:
    selection, requests = select_with(server, Reply.reset(), candidates=DOCS, fallback=FALLBACK)
    assert len(requests) == 1
    assert selection.strategy == "heuristic" and selection.fallback_reason.startswith("transport error")


def test_connection_refused_falls_back() -> None:
    with ScriptedChatServer() as srv:
        base_url = srv.base_url
    async def main():  # noqa: E306
        async with ModelSelector(base_url, "m", timeout=2) as selector:
            return await selector.select("q", DOCS, fallback=FALLBACK)
    selection = run_checked(main)
    assert selection.docs == tuple(FALLBACK) and selection.fallback_reason == "transport error: ConnectError"


def test_oversized_body_falls_back(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.content("x" * (2 << 20)), candidates=DOCS, fallback=FALLBACK)
    assert selection.fallback_reason == "response body over 1 MiB"


def test_no_candidates_sends_no_request(server: ScriptedChatServer) -> None:
    selection, requests = select_with(server, candidates=[], fallback=FALLBACK)
    assert requests == [] and selection.fallback_reason == "no candidates"


def test_manifest_sent_is_capped_at_200_with_preferred_first(server: ScriptedChatServer) -> None:
    many = make_docs(300)

    async def main():
        async with ModelSelector(**kwargs_for(server)) as selector:
            return await selector.select("q", many, preferred=[many[-1]])

    run_checked(main)
    [request] = server.wait_for_requests(1)
    assert len(request.manifest_refs) == 200 and request.manifest_refs[0] == many[-1].ref
