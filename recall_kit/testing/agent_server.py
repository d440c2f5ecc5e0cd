"""ScriptedAgentServer: the model behind a real agent CLI (Claude Code, Qwen Code, examples/agent_loop.py),
scripted, on loopback.

It speaks Anthropic Messages (``POST /v1/messages``, Claude Code's ``ANTHROPIC_BASE_URL``) and
OpenAI chat completions (``POST /v1/chat/completions``, ``OPENAI_BASE_URL``), each streamed when
the request asks (server-sent events; chunked transfer) and whole when it does not. Every request
is recorded with what it was for:

- ``main``: the agent's own turn. It gets the next scripted ``Turn`` (a text, or a tool call such
  as Claude Code's ``Read`` or Qwen Code's ``read_file``), then ``Turn.say("done")`` once the
  script is used up.
- ``recall``: Qwen Code's own memory recall side query ("Available memories:", one
  ``respond_in_schema`` tool). It selects nothing.
- ``extraction``: Qwen Code's memory extraction (or "dream") subagent after a turn. It saves nothing.
- ``other``: anything else with a body (a title, a token count): a short text.

``main_requests`` are the main ones in order; ``side_requests`` the rest.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from recall_kit.testing._http import Connection, LoopbackServer, RecordedRequest

QWEN_RECALL_MARKERS = ("Available memories:", "You are selecting memories that will be useful")
QWEN_EXTRACTION_MARKERS = ("memory extraction subagent", "managed memory dream")


@dataclass(frozen=True, slots=True)
class Turn:
    """One scripted answer of the agent's model: ``Turn.say(text)`` or ``Turn.call(tool, **arguments)``."""

    text: str = ""
    tool: str = ""  # a tool call's name; "" for a text answer
    arguments: tuple[tuple[str, Any], ...] = ()
    delay_ms: float = 0.0
    ready: Callable[[], object] | None = field(default=None, compare=False)

    @classmethod
    def say(cls, text: str) -> "Turn":
        """A text answer that ends the turn (``end_turn`` / ``stop``)."""
        return cls(text=text)

    @classmethod
    def call(cls, tool: str, **arguments: Any) -> "Turn":
        """A call of ``tool`` with ``arguments`` (``tool_use`` / ``tool_calls``)."""
        return cls(tool=tool, arguments=tuple(arguments.items()))

    def after(self, delay_ms: float) -> "Turn":
        """The same answer, sent after ``delay_ms`` (the model "thinking")."""
        return replace(self, delay_ms=delay_ms)

    def when(self, ready: Callable[[], object]) -> "Turn":
        """The same answer, sent once ``ready()`` returns. It runs in a thread of its own and may
        block: a test awaits what must have happened before the agent moves on (a selector's answer)."""
        return replace(self, ready=ready)


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of a request's conversation: who said it and what it is."""

    role: str  # "system", "user", "assistant", "tool"
    kind: str  # "text", "tool_use", "tool_result"
    text: str  # a tool use's arguments as JSON


@dataclass
class AgentRequest(RecordedRequest):
    """A request the agent's model received."""

    api: str = ""  # "anthropic" or "openai"
    purpose: str = ""  # "main", "recall", "extraction" or "other"

    @property
    def stream(self) -> bool:
        """Whether the request asked for a streamed answer."""
        return bool(self.body.get("stream")) if isinstance(self.body, dict) else False

    @property
    def parts(self) -> list[Part]:
        """The system prompt, then every message's text, tool uses and tool results, in order."""
        return conversation(self.body)

    def text(self) -> str:
        """Every part's text, one per line."""
        return "\n".join(part.text for part in self.parts)


def conversation(body: Any) -> list[Part]:
    """The parts of an Anthropic Messages or OpenAI chat request body, in order."""
    if not isinstance(body, dict):
        return []
    parts = [Part("system", "text", text) for text in _texts(body.get("system"))]
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", ""))
        content = message.get("content")
        if role == "tool":
            parts += [Part("tool", "tool_result", text) for text in _texts(content)]
            continue
        blocks = content if isinstance(content, list) else [content] if content is not None else []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                parts.append(Part(role, "tool_use", json.dumps(block.get("input", {}))))
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                parts += [Part(role, "tool_result", text) for text in _texts(block.get("content"))]
            else:
                parts += [Part(role, "text", text) for text in _texts(block)]
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            parts.append(Part(role, "tool_use", str(function.get("arguments", ""))))
    return parts


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content] if content else []
    if isinstance(content, dict):
        return [str(content["text"])] if content.get("text") else []
    if isinstance(content, list):
        return [text for item in content for text in _texts(item)]
    return []


class ScriptedAgentServer(LoopbackServer):
    """An agent's model on loopback. Use as a context manager; ``script(...)`` queues main turns."""

    thread_name = "scripted-agent-server"

    def __init__(self, script: Iterable[Turn] = (), *, default: Turn = Turn.say("done")) -> None:
        super().__init__()
        self._script: deque[Turn] = deque(script)
        self.default = default
        self.errors: list[str] = []  # what a turn's ``ready`` raised

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: Claude Code's ANTHROPIC_BASE_URL (OpenAI clients add ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: an OpenAI client's base URL."""
        return f"{self.base_url}/v1"

    def start(self) -> "ScriptedAgentServer":
        """Serve on a free loopback port from a thread of its own; returns self."""
        super().start()
        return self

    def __enter__(self) -> "ScriptedAgentServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def script(self, *turns: Turn) -> None:
        """Queue answers for the next main requests, in order."""
        with self._lock:
            self._script.extend(turns)

    @property
    def agent_requests(self) -> list[AgentRequest]:
        """Every request the server answered, in the order they arrived."""
        with self._lock:
            return [r for r in self.requests if isinstance(r, AgentRequest)]

    @property
    def main_requests(self) -> list[AgentRequest]:
        """The agent's own turns, in the order they arrived."""
        return [r for r in self.agent_requests if r.purpose == "main"]

    @property
    def side_requests(self) -> list[AgentRequest]:
        """Everything else: Qwen Code's recall and extraction, titles, token counts."""
        return [r for r in self.agent_requests if r.purpose != "main"]

    # -- answering ---------------------------------------------------------------------------
    def _new_record(self, method: str, path: str, headers: dict[str, str], body: Any) -> RecordedRequest:
        route = path.split("?", 1)[0].rstrip("/")
        api = "anthropic" if route.endswith("/messages") else "openai" if route.endswith("/chat/completions") else ""
        return AgentRequest(method, path, headers, body, api=api)

    async def _handle(self, connection: Connection, record: RecordedRequest) -> bool:
        assert isinstance(record, AgentRequest)
        route = record.path.split("?", 1)[0].rstrip("/")
        if record.method == "POST" and route.endswith("/messages/count_tokens"):
            record.purpose = "other"
            self._record(record, "count_tokens")
            await self._send(connection, 200, {"input_tokens": 1})
            return True
        if record.method != "POST" or not record.api or not isinstance(record.body, dict):
            record.purpose = "other"
            self._record(record, "not_found")
            await self._send(connection, 404, {"error": {"message": f"no route {record.method} {record.path}"}})
            return True
        record.purpose = _purpose(record)
        turn = self._next_turn(record.purpose)
        self._record(record, "tool_call" if turn.tool else "text")
        if turn.ready is not None:
            try:
                await asyncio.to_thread(turn.ready)
            except Exception as exc:  # kept for the test to see; the agent still gets its answer
                self.errors.append(f"{type(exc).__name__}: {exc}")
        if turn.delay_ms > 0:
            await asyncio.sleep(turn.delay_ms / 1000)  # the model "thinking"
        model = str(record.body.get("model", "scripted"))
        with self._lock:
            number = len(self.requests)
        if record.api == "anthropic":
            if record.stream:
                await self._send_stream(connection, anthropic_events(turn, model, number))
            else:
                await self._send(connection, 200, anthropic_message(turn, model, number))
        elif record.stream:
            await self._send_stream(connection, openai_chunks(turn, model, number))
        else:
            await self._send(connection, 200, openai_completion(turn, model, number))
        return True

    def _next_turn(self, purpose: str) -> Turn:
        if purpose == "recall":
            return Turn.call("respond_in_schema", selected_memories=[])
        if purpose == "extraction":
            return Turn.say("Nothing to save.")
        if purpose == "other":
            return Turn.say("ok")
        with self._lock:
            return self._script.popleft() if self._script else self.default


def _purpose(record: AgentRequest) -> str:
    text = record.text()
    if any(marker in text for marker in QWEN_RECALL_MARKERS):
        return "recall"
    if any(marker in text for marker in QWEN_EXTRACTION_MARKERS):
        return "extraction"
    return "main" if isinstance(record.body, dict) and record.body.get("tools") else "other"


# -- the wire formats ----------------------------------------------------------------------------
def anthropic_message(turn: Turn, model: str, number: int) -> dict[str, Any]:
    """A whole Messages API answer."""
    block: dict[str, Any] = (
        {"type": "tool_use", "id": f"toolu_{number}", "name": turn.tool, "input": dict(turn.arguments)}
        if turn.tool else {"type": "text", "text": turn.text}
    )
    return {"id": f"msg_{number}", "type": "message", "role": "assistant", "model": model, "content": [block],
            "stop_reason": "tool_use" if turn.tool else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}


def anthropic_events(turn: Turn, model: str, number: int) -> list[bytes]:
    """The same answer as server-sent events, in the order the Messages API streams them."""
    message = anthropic_message(turn, model, number)
    start = {**message, "content": [], "stop_reason": None}
    if turn.tool:
        block = {"type": "tool_use", "id": f"toolu_{number}", "name": turn.tool, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(dict(turn.arguments))}
    else:
        block, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": turn.text}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"],
                                                               "stop_sequence": None}, "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]


def openai_completion(turn: Turn, model: str, number: int) -> dict[str, Any]:
    """A whole chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": None if turn.tool else turn.text}
    if turn.tool:
        message["tool_calls"] = [_openai_call(turn, number)]
    return {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if turn.tool else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def openai_chunks(turn: Turn, model: str, number: int) -> list[bytes]:
    """The same answer streamed: ``data: {chunk}`` lines, then ``data: [DONE]``."""
    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    if turn.tool:
        chunks = [chunk({"role": "assistant", "tool_calls": [{"index": 0, **_openai_call(turn, number)}]}, None),
                  chunk({}, "tool_calls")]
    else:
        chunks = [chunk({"role": "assistant", "content": turn.text}, None), chunk({}, "stop")]
    usage = {**chunk({}, None), "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    return [f"data: {json.dumps(c)}\n\n".encode() for c in [*chunks, usage]] + [b"data: [DONE]\n\n"]


def _openai_call(turn: Turn, number: int) -> dict[str, Any]:
    return {"id": f"call_{number}", "type": "function",
            "function": {"name": turn.tool, "arguments": json.dumps(dict(turn.arguments))}}
