"""ScriptedChatServer: a real OpenAI-compatible HTTP test server on loopback with scripted replies.

It runs its own asyncio loop in a thread and speaks plain HTTP/1.1 (keep-alive, Content-Length),
so it can also misbehave the way real servers do: reset the connection, never answer, or drip the
body one byte at a time. Which reply a request gets, first match wins:

1. a marker in the query, ``[[scripted:NAME]]`` (names in ``REPLY_BY_NAME``);
2. for an enrichment request (told apart by the enricher's system prompt; ``is_enrichment``), the
   server's ``enrichment`` reply when it has one;
3. the next reply queued with ``server.script(...)``;
4. the run's default: ``Reply.select(*selections)``, else ``Reply.oracle()`` with ``oracle=``,
   else ``Reply.empty()``.

A request whose ``response_format`` type is not in ``response_formats`` gets a 400 first, without
using up a scripted reply. Latency is the reply's own, else ``latency_ms`` (a number, or a list
used in turn per request). After ``hold()``, every answer also waits, once its latency has passed,
until ``release()`` lets it go: a test decides when the model answers, without a clock.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import socket
import struct
import time
from collections import deque
from pathlib import Path
from typing import Any, Iterable, Sequence

from recall_kit._enricher import SYSTEM_PROMPT as ENRICH_SYSTEM_PROMPT
from recall_kit._manifest import read_user_message
from recall_kit.testing._http import Connection, LoopbackServer, RecordedRequest, ScriptedServerError, head
from recall_kit.testing._replies import REPLY_BY_NAME, Oracle, Reply, answer_text

ALL_RESPONSE_FORMATS = frozenset({"json_schema", "json_object", "text"})
_MARKER = re.compile(r"\[\[scripted:([A-Za-z0-9_]+)\]\]")


class ScriptedChatServer(LoopbackServer):
    """An OpenAI-compatible chat-completions test server. Use as a context manager."""

    thread_name = "scripted-chat-server"

    def __init__(
        self,
        *,
        oracle: str | Path | None = None,
        selections: Sequence[str] | None = None,
        default: Reply | None = None,
        latency_ms: float | Sequence[float] = 0.0,
        response_formats: Iterable[str] = ALL_RESPONSE_FORMATS,
        enrichment: Reply | None = None,
    ) -> None:
        self.oracle = Oracle(oracle) if oracle is not None else None
        self.enrichment = enrichment  # what every enrichment request gets, when set
        if default is None:
            default = Reply.select(*selections) if selections is not None else (
                Reply.oracle() if self.oracle else Reply.empty())
        self.default = default
        profile = [float(latency_ms)] if isinstance(latency_ms, (int, float)) else [float(x) for x in latency_ms]
        self._latencies = itertools.cycle(profile or [0.0])
        self.response_formats = frozenset(response_formats)
        self._queue: deque[Reply] = deque()
        self._holding = False
        self._gate = asyncio.Semaphore(0)  # permits for held answers; bound to the server's loop on first use
        super().__init__()

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ``http://127.0.0.1:<port>/v1`` (the port is chosen by ``start()``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "ScriptedChatServer":
        """Serve on a free loopback port from a thread of its own; returns self.
        ScriptedServerError when it does not start in 10 s."""
        super().start()
        return self

    def __enter__(self) -> "ScriptedChatServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- scripting and inspection ------------------------------------------------------------
    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        with self._lock:
            self._queue.extend(replies)

    def hold(self) -> None:
        """From now on, hold every answer until ``release()`` lets it go."""
        self._holding = True

    def release(self, count: int = 1) -> None:
        """Let ``count`` held answers go, the earliest first; a release before an answer is held lets
        the next one pass at once."""
        loop = self._loop
        if loop is None:
            raise ScriptedServerError("release() on a scripted chat server that is not running")
        for _ in range(count):
            loop.call_soon_threadsafe(self._gate.release)

    # -- answering -------------------------------------------------------------------------
    async def _handle(self, connection: Connection, record: RecordedRequest) -> bool:
        method, path = record.method, record.path
        if method == "GET" and path.rstrip("/").endswith("/models"):
            await self._send(connection, 200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            return True
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            self._record(record, "not_found")
            await self._send(connection, 404, {"error": {"message": f"no route {method} {path}"}})
            return True
        return await self._chat(connection, record)

    def _choose(self, record: RecordedRequest) -> Reply:
        marker = _MARKER.search(record.query)
        if marker and marker.group(1) in REPLY_BY_NAME:
            return REPLY_BY_NAME[marker.group(1)]
        if self.enrichment is not None and is_enrichment(record):
            return self.enrichment
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    async def _chat(self, connection: Connection, record: RecordedRequest) -> bool:
        record.query, record.manifest_refs = read_user_message(record.user_message)
        if record.response_format_type not in self.response_formats:
            self._record(record, "format_rejected")
            message = f"response_format type {record.response_format_type!r} is not supported"
            await self._send(connection, 400, {"error": {"message": message, "param": "response_format"}})
            return True
        reply = self._choose(record)
        latency = next(self._latencies) if reply.latency_ms is None else reply.latency_ms
        self._record(record, reply.kind)
        client_gone = asyncio.ensure_future(connection.reader.read(1))  # b"" when the client hangs up
        try:
            if latency > 0 and await self._client_left(client_gone, latency / 1000):
                return False
            if self._holding and not await self._released(client_gone):
                return False
            return await self._respond(connection, record, reply, client_gone)
        finally:
            if client_gone.done() and not client_gone.cancelled():
                connection.pushback = client_gone.result()
            client_gone.cancel()
            await asyncio.wait({client_gone})  # the reader allows one waiter: let this one go first

    async def _released(self, client_gone: asyncio.Future[bytes]) -> bool:
        """Wait for ``release()``; False when the client hung up first."""
        permit: asyncio.Future[Any] = asyncio.ensure_future(self._gate.acquire())
        await asyncio.wait({client_gone, permit}, return_when=asyncio.FIRST_COMPLETED)
        if permit.done():
            return True
        permit.cancel()
        return False

    @staticmethod
    async def _client_left(client_gone: asyncio.Future[bytes], seconds: float | None) -> bool:
        done, _ = await asyncio.wait({client_gone}, timeout=seconds)
        return bool(done)

    async def _respond(
        self, connection: Connection, record: RecordedRequest, reply: Reply, client_gone: asyncio.Future[bytes]
    ) -> bool:
        if reply.kind == "reset":
            sock = connection.writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
            return False
        if reply.kind == "hang":
            await self._client_left(client_gone, None)
            return False
        if reply.kind == "error":
            extra = {"retry-after": reply.retry_after} if reply.retry_after is not None else {}
            await self._send(connection, reply.status, {"error": {"message": reply.message}}, extra)
            return True
        if reply.kind == "raw_error":
            await self._send_raw(connection, reply.status, reply.message.encode())
            return True
        if reply.kind == "malformed_body":
            await self._send_raw(connection, 200, b"<html>this is not a completion</html>", "text/html")
            return True
        model = record.body.get("model", "scripted") if isinstance(record.body, dict) else "scripted"
        text = answer_text(reply, record.query, record.manifest_refs, self.oracle)
        payload = json.dumps(_completion(model, text)).encode()
        if reply.kind == "drip":
            return await self._drip(connection, payload, reply.interval_ms / 1000, client_gone)
        await self._send_raw(connection, 200, payload)
        return True

    async def _drip(
        self, connection: Connection, payload: bytes, interval: float, client_gone: asyncio.Future[bytes]
    ) -> bool:
        connection.writer.write(head(200, "application/json", len(payload)))
        for index in range(len(payload)):
            if index and await self._client_left(client_gone, interval):
                return False
            connection.writer.write(payload[index:index + 1])
            await connection.writer.drain()
        return True


def is_enrichment(record: RecordedRequest) -> bool:
    """Whether ``record`` is an enricher's request (a memory's search terms), not a selector's."""
    return record.system_message == ENRICH_SYSTEM_PROMPT


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
