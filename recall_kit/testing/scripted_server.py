"""ScriptedChatServer: a real OpenAI-compatible HTTP test server on loopback with scripted replies.

It runs its own asyncio loop in a thread and speaks plain HTTP/1.1 (keep-alive, Content-Length),
so it can also misbehave the way real servers do: reset the connection, never answer, or drip the
body one byte at a time. Which reply a request gets, first match wins:

1. a marker in the query, ``[[scripted:NAME]]`` (names in ``REPLY_BY_NAME``);
2. the next reply queued with ``server.script(...)``;
3. the run's default: ``Reply.select(*selections)``, else ``Reply.oracle()`` with ``oracle=``,
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
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from memory_store import RecallKitError
from recall_kit._manifest import read_user_message
from recall_kit.testing._replies import REPLY_BY_NAME, Oracle, Reply, answer_text

class ScriptedServerError(RecallKitError, RuntimeError):
    """The scripted chat server could not start."""


class ScriptedServerTimeout(RecallKitError, TimeoutError):
    """The requests a test waited for did not arrive in time."""


ALL_RESPONSE_FORMATS = frozenset({"json_schema", "json_object", "text"})
_MARKER = re.compile(r"\[\[scripted:([A-Za-z0-9_]+)\]\]")
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 503: "Service Unavailable"}


@dataclass
class RecordedRequest:
    """A request as the server received it, and what happened to its connection."""

    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON, or None
    reply: str = ""  # the reply kind it got
    query: str = ""
    manifest_refs: list[str] = field(default_factory=list)
    received_at: float = field(default_factory=time.monotonic)
    connection_closed: threading.Event = field(default_factory=threading.Event)
    closed_at: float | None = None  # monotonic time the server saw the connection end

    @property
    def response_format(self) -> dict[str, Any] | None:
        """The request's ``response_format`` object, or None."""
        return self.body.get("response_format") if isinstance(self.body, dict) else None

    @property
    def response_format_type(self) -> str:
        """The ``response_format`` type asked for; "text" when none is."""
        return str((self.response_format or {}).get("type", "text"))

    @property
    def user_message(self) -> str:
        """The content of the last user message, or "" when there is none."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        users = [m.get("content", "") for m in messages if m.get("role") == "user"]
        return users[-1] if users else ""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.requests: list[RecordedRequest] = []
        self.pushback = b""  # a byte of the next request read while watching for a hang-up

    def mark_closed(self) -> None:
        now = time.monotonic()
        for request in self.requests:
            if not request.connection_closed.is_set():
                request.closed_at = now
                request.connection_closed.set()


class ScriptedChatServer:
    """An OpenAI-compatible chat-completions test server. Use as a context manager."""

    def __init__(
        self,
        *,
        oracle: str | Path | None = None,
        selections: Sequence[str] | None = None,
        default: Reply | None = None,
        latency_ms: float | Sequence[float] = 0.0,
        response_formats: Iterable[str] = ALL_RESPONSE_FORMATS,
    ) -> None:
        self.oracle = Oracle(oracle) if oracle is not None else None
        if default is None:
            default = Reply.select(*selections) if selections is not None else (
                Reply.oracle() if self.oracle else Reply.empty())
        self.default = default
        profile = [float(latency_ms)] if isinstance(latency_ms, (int, float)) else [float(x) for x in latency_ms]
        self._latencies = itertools.cycle(profile or [0.0])
        self.response_formats = frozenset(response_formats)
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._holding = False
        self._gate: asyncio.Semaphore | None = None  # permits for held answers, on the server's loop
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ``http://127.0.0.1:<port>/v1`` (the port is chosen by ``start()``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "ScriptedChatServer":
        """Serve on a free loopback port from a thread of its own; returns self.
        ScriptedServerError when it does not start in 10 s."""
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="scripted-chat-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise ScriptedServerError("scripted chat server did not start")
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Shut down at once, cutting hanging and dripping requests."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:
                pass  # the loop already finished
        if self._thread is not None:
            self._thread.join(timeout)

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
        loop, gate = self._loop, self._gate
        if loop is None or gate is None:
            raise ScriptedServerError("release() on a scripted chat server that is not running")
        for _ in range(count):
            loop.call_soon_threadsafe(gate.release)

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Every request recorded so far, once there are at least ``count``.
        ScriptedServerTimeout after ``timeout`` seconds."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.requests) >= count, timeout):
                raise ScriptedServerTimeout(f"expected {count} requests, got {len(self.requests)}")
            return list(self.requests)

    # -- the server thread -------------------------------------------------------------------
    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(ready))
        finally:
            loop.close()

    async def _serve(self, ready: threading.Event) -> None:
        self._stop = asyncio.Event()
        self._gate = asyncio.Semaphore(0)
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0, limit=1 << 20)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        async with server:
            await self._stop.wait()
            server.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        connection = _Connection(reader, writer)
        try:
            while await self._serve_one(connection):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            pass  # stop() ends its own handlers; asyncio would log a cancelled connection callback
        finally:
            connection.mark_closed()
            writer.transport.abort()
            self._handlers.discard(task)

    async def _serve_one(self, connection: _Connection) -> bool:
        """Answer one request; False when the connection is over."""
        head, connection.pushback = connection.pushback, b""
        head += await connection.reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        raw = await connection.reader.readexactly(int(headers.get("content-length", "0")))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = RecordedRequest(method, path, headers, body)
        connection.requests.append(record)
        if method == "GET" and path.rstrip("/").endswith("/models"):
            await self._send(connection, 200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            return True
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            self._record(record, "not_found")
            await self._send(connection, 404, {"error": {"message": f"no route {method} {path}"}})
            return True
        return await self._chat(connection, record)

    def _record(self, record: RecordedRequest, kind: str) -> None:
        record.reply = kind
        with self._lock:
            self.requests.append(record)
            self._lock.notify_all()

    def _choose(self, record: RecordedRequest) -> Reply:
        marker = _MARKER.search(record.query)
        if marker and marker.group(1) in REPLY_BY_NAME:
            return REPLY_BY_NAME[marker.group(1)]
        with self._lock:
            return self._queue.popleft() if self._queue else self.default

    async def _chat(self, connection: _Connection, record: RecordedRequest) -> bool:
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
        assert self._gate is not None
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
        self, connection: _Connection, record: RecordedRequest, reply: Reply, client_gone: asyncio.Future[bytes]
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
        self, connection: _Connection, payload: bytes, interval: float, client_gone: asyncio.Future[bytes]
    ) -> bool:
        connection.writer.write(_head(200, "application/json", len(payload)))
        for index in range(len(payload)):
            if index and await self._client_left(client_gone, interval):
                return False
            connection.writer.write(payload[index:index + 1])
            await connection.writer.drain()
        return True

    async def _send(self, connection: _Connection, status: int, obj: Any, extra: dict[str, str] | None = None) -> None:
        await self._send_raw(connection, status, json.dumps(obj).encode(), extra=extra)

    @staticmethod
    async def _send_raw(
        connection: _Connection, status: int, payload: bytes, content_type: str = "application/json",
        extra: dict[str, str] | None = None,
    ) -> None:
        connection.writer.write(_head(status, content_type, len(payload), extra) + payload)
        await connection.writer.drain()


def _head(status: int, content_type: str, length: int, extra: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", f"Content-Type: {content_type}",
             f"Content-Length: {length}"]
    lines += [f"{name}: {value}" for name, value in (extra or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
