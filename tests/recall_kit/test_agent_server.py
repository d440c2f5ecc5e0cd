"""The scripted agent model server itself: Anthropic Messages and OpenAI chat, streamed and whole,
scripted main turns, and Qwen Code's side queries answered and recorded apart."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from recall_kit.testing import Part, ScriptedAgentServer, Turn

TOOLS_ANTHROPIC = [{"name": "Read", "input_schema": {"type": "object"}}]
TOOLS_OPENAI = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


def sse_events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """(event, data) of an Anthropic stream."""
    events = []
    for block in response.text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


def data_lines(response: httpx.Response) -> list[str]:
    return [line.removeprefix("data: ") for line in response.text.splitlines() if line.startswith("data: ")]


def messages_body(content: Any, *, stream: bool = True, system: Any = "You are Claude Code.") -> dict[str, Any]:
    return {"model": "m", "stream": stream, "system": system, "tools": TOOLS_ANTHROPIC,
            "messages": [{"role": "user", "content": content}]}


def chat_body(messages: list[dict[str, Any]], *, stream: bool = True, tools: Any = TOOLS_OPENAI) -> dict[str, Any]:
    return {"model": "m", "stream": stream, "tools": tools, "messages": messages}


def test_anthropic_stream_sends_a_tool_use_as_input_json_deltas_then_a_text_turn_with_end_turn() -> None:
    script = [Turn.call("Read", file_path="/p/notes.txt"), Turn.say("all done")]
    with ScriptedAgentServer(script) as srv, httpx.Client() as client:
        first = client.post(f"{srv.base_url}/v1/messages?beta=true", json=messages_body("read it"))
        second = client.post(f"{srv.base_url}/v1/messages?beta=true", json=messages_body("go on"))
    assert first.headers["content-type"] == "text/event-stream"
    events = sse_events(first)
    assert [name for name, _ in events] == ["message_start", "content_block_start", "content_block_delta",
                                             "content_block_stop", "message_delta", "message_stop"]
    assert events[1][1]["content_block"]["type"] == "tool_use" and events[1][1]["content_block"]["name"] == "Read"
    assert events[2][1]["delta"]["type"] == "input_json_delta"
    assert json.loads(events[2][1]["delta"]["partial_json"]) == {"file_path": "/p/notes.txt"}
    assert events[4][1]["delta"]["stop_reason"] == "tool_use"
    text_events = dict(sse_events(second))
    assert text_events["content_block_delta"]["delta"] == {"type": "text_delta", "text": "all done"}
    assert text_events["message_delta"]["delta"]["stop_reason"] == "end_turn"
    assert [r.reply for r in srv.main_requests] == ["tool_call", "text"]


def test_openai_stream_sends_chunks_then_done_and_a_tool_call_finishes_with_tool_calls() -> None:
    script = [Turn.call("read_file", file_path="/p/notes.txt"), Turn.say("all done")]
    user = [{"role": "user", "content": "read it"}]
    with ScriptedAgentServer(script) as srv, httpx.Client() as client:
        first = data_lines(client.post(f"{srv.openai_base_url}/chat/completions", json=chat_body(user)))
        second = data_lines(client.post(f"{srv.openai_base_url}/chat/completions", json=chat_body(user)))
    assert first[-1] == "[DONE]" and second[-1] == "[DONE]"
    chunks = [json.loads(line) for line in first[:-1]]
    [call] = chunks[0]["choices"][0]["delta"]["tool_calls"]
    assert call["function"]["name"] == "read_file" and json.loads(call["function"]["arguments"]) == {"file_path": "/p/notes.txt"}
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]] == [None, "tool_calls"]
    text = [json.loads(line) for line in second[:-1] if json.loads(line)["choices"]]
    assert text[0]["choices"][0]["delta"]["content"] == "all done" and text[-1]["choices"][0]["finish_reason"] == "stop"


def test_whole_answers_when_the_request_does_not_stream() -> None:
    with ScriptedAgentServer([Turn.call("read_file", path="a"), Turn.say("fine")]) as srv, httpx.Client() as client:
        openai = client.post(f"{srv.openai_base_url}/chat/completions",
                             json=chat_body([{"role": "user", "content": "x"}], stream=False)).json()
        anthropic = client.post(f"{srv.base_url}/v1/messages", json=messages_body("x", stream=False)).json()
    assert openai["choices"][0]["finish_reason"] == "tool_calls"
    assert openai["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"path": "a"}'
    assert anthropic["content"] == [{"type": "text", "text": "fine"}] and anthropic["stop_reason"] == "end_turn"


def test_qwen_recall_and_extraction_are_answered_apart_without_using_a_scripted_turn() -> None:
    recall = chat_body([
        {"role": "system", "content": "You are selecting memories that will be useful to an AI coding assistant"},
        {"role": "user", "content": [{"type": "text", "text": "Query: q\n\nAvailable memories:\n- [project] /m/a.md: a"}]},
    ], stream=False, tools=[{"type": "function", "function": {"name": "respond_in_schema"}}])
    extraction = chat_body([{"role": "user", "content": "You are now acting as the managed memory extraction subagent"}])
    main = chat_body([{"role": "user", "content": "hello"}])
    with ScriptedAgentServer([Turn.say("scripted")]) as srv, httpx.Client() as client:
        url = f"{srv.openai_base_url}/chat/completions"
        picked = client.post(url, json=recall).json()["choices"][0]["message"]["tool_calls"][0]["function"]
        saved = data_lines(client.post(url, json=extraction))
        answer = data_lines(client.post(url, json=main))
    assert picked["name"] == "respond_in_schema" and json.loads(picked["arguments"]) == {"selected_memories": []}
    assert json.loads(saved[0])["choices"][0]["delta"]["content"] == "Nothing to save."
    assert json.loads(answer[0])["choices"][0]["delta"]["content"] == "scripted"
    assert [r.purpose for r in srv.side_requests] == ["recall", "extraction"]
    assert len(srv.main_requests) == 1


def test_script_used_up_answers_the_default_and_a_count_tokens_call_is_a_side_request() -> None:
    with ScriptedAgentServer(default=Turn.say("fallback")) as srv, httpx.Client() as client:
        counted = client.post(f"{srv.base_url}/v1/messages/count_tokens?beta=true", json=messages_body("x"))
        answer = dict(sse_events(client.post(f"{srv.base_url}/v1/messages", json=messages_body("x"))))
        missing = client.get(f"{srv.base_url}/v1/models")
    assert counted.json() == {"input_tokens": 1} and missing.status_code == 404
    assert answer["content_block_delta"]["delta"]["text"] == "fallback"
    assert [r.purpose for r in srv.side_requests] == ["other", "other"]


def test_parts_flatten_both_apis_in_order_with_tool_uses_and_results() -> None:
    anthropic = messages_body([{"type": "text", "text": "prompt"}], system=[{"type": "text", "text": "sys"}])
    anthropic["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {"file_path": "f"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "file text"},
                                     {"type": "text", "text": "hook context"}]},
    ]
    openai = chat_body([
        {"role": "system", "content": "sys"}, {"role": "user", "content": "prompt"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"arguments": '{"file_path": "f"}'}}]},
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "file text"}]},
    ])
    with ScriptedAgentServer() as srv, httpx.Client() as client:
        client.post(f"{srv.base_url}/v1/messages", json=anthropic)
        client.post(f"{srv.openai_base_url}/chat/completions", json=openai)
        first, second = srv.wait_for_requests(2)
    assert first.parts == [Part("system", "text", "sys"), Part("user", "text", "prompt"),
                           Part("assistant", "tool_use", '{"file_path": "f"}'),
                           Part("user", "tool_result", "file text"), Part("user", "text", "hook context")]
    assert second.parts == [Part("system", "text", "sys"), Part("user", "text", "prompt"),
                            Part("assistant", "tool_use", '{"file_path": "f"}'), Part("tool", "tool_result", "file text")]


def test_a_turn_waits_for_its_ready_call_and_a_failing_one_is_kept_as_an_error() -> None:
    asked, released = threading.Event(), threading.Event()

    def ready() -> None:
        asked.set()
        if not released.wait(10):
            raise TimeoutError("never released")

    def failing() -> None:
        raise AssertionError("the selector never answered")

    script = [Turn.say("first").when(ready), Turn.say("second").when(failing)]
    with ScriptedAgentServer(script) as srv, httpx.Client(timeout=10) as client:
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(client.post, f"{srv.base_url}/v1/messages", json=messages_body("x", stream=False))
            assert asked.wait(10)
            assert not pending.done()
            released.set()
            assert pending.result().json()["content"][0]["text"] == "first"
        second = client.post(f"{srv.base_url}/v1/messages", json=messages_body("x", stream=False)).json()
    assert second["content"][0]["text"] == "second"
    assert srv.errors == ["AssertionError: the selector never answered"]
