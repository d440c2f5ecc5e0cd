"""The scripted chat test server itself: latency profiles, query markers, records, prompt stop."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from selector_helpers import make_docs, select_with
from recall_kit.testing import Reply, ScriptedChatServer

DOCS = make_docs(6)


def chat(client: httpx.Client, base_url: str, query: str = "q") -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": f"Query: {query}\n\n- ref: mem/a.md | x"}]}
    return client.post(f"{base_url}/chat/completions", json=body)


def test_latency_list_used_in_turn() -> None:
    with ScriptedChatServer(latency_ms=[150, 0]) as srv, httpx.Client() as client:
        durations = []
        for _ in range(3):
            started = time.perf_counter()
            assert chat(client, srv.base_url).status_code == 200
            durations.append(time.perf_counter() - started)
    assert durations[0] >= 0.15 and durations[1] < 0.1 and durations[2] >= 0.15


def test_reply_latency_overrides_the_profile() -> None:
    with ScriptedChatServer(latency_ms=1_000, default=Reply.empty().after(0)) as srv, httpx.Client() as client:
        started = time.perf_counter()
        chat(client, srv.base_url)
        assert time.perf_counter() - started < 0.5


def test_query_marker_chooses_the_behaviour(server: ScriptedChatServer) -> None:
    selection, [request] = select_with(server, candidates=DOCS, fallback=DOCS[:1], query="notes [[scripted:hallucinated]]")
    assert request.reply == "hallucinated" and selection.strategy == "heuristic"


def test_scripted_replies_consumed_in_order_then_default() -> None:
    with ScriptedChatServer(selections=["mem/a.md"]) as srv, httpx.Client() as client:
        srv.script(Reply.error(503), Reply.non_json())
        statuses = [chat(client, srv.base_url).status_code for _ in range(3)]
        assert statuses == [503, 200, 200]
        assert [r.reply for r in srv.requests] == ["error", "non_json", "select"]
        assert '"mem/a.md"' in chat(client, srv.base_url).json()["choices"][0]["message"]["content"]


def test_unsupported_response_format_gets_400_without_using_a_scripted_reply() -> None:
    with ScriptedChatServer(response_formats={"text"}) as srv, httpx.Client() as client:
        srv.script(Reply.non_json())
        body = {"model": "m", "messages": [], "response_format": {"type": "json_object"}}
        response = client.post(f"{srv.base_url}/chat/completions", json=body)
        assert response.status_code == 400 and "response_format" in response.text
        assert chat(client, srv.base_url).json()["choices"][0]["message"]["content"].startswith("The first")


def test_models_route_and_unknown_route(server: ScriptedChatServer) -> None:
    assert httpx.get(f"{server.base_url}/models").json()["data"][0]["id"] == "scripted"
    assert httpx.post(f"{server.base_url}/embeddings", json={}).status_code == 404


def test_wait_for_requests_times_out_with_a_clear_error(server: ScriptedChatServer) -> None:
    with pytest.raises(TimeoutError, match="expected 1 requests, got 0"):
        server.wait_for_requests(1, timeout=0.05)


def test_stop_is_prompt_with_hanging_and_dripping_requests() -> None:
    srv = ScriptedChatServer(default=Reply.hang()).start()
    srv.script(Reply.drip(500))
    errors: list[BaseException] = []

    def client_call() -> None:
        try:
            with httpx.Client(timeout=30) as client:
                chat(client, srv.base_url)
        except httpx.HTTPError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client_call) for _ in range(2)]
    for thread in threads:
        thread.start()
    srv.wait_for_requests(2)
    started = time.perf_counter()
    srv.stop()
    assert time.perf_counter() - started < 1.0
    for thread in threads:
        thread.join(5)
        assert not thread.is_alive()
    assert len(errors) == 2  # both clients saw their connection end
    assert all(r.connection_closed.is_set() for r in srv.requests)
