"""The loopback HTTP/1.1 plumbing of the scripted test servers: one asyncio loop in a thread,
keep-alive connections, Content-Length bodies in, whole or chunked (streamed) bodies out.

A server subclasses ``LoopbackServer`` and answers each parsed request in ``_handle``; this module
owns the connection's life, the request record and the wire format of an answer.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from memory_store import RecallKitError


class ScriptedServerError(RecallKitError, RuntimeError):
    """A scripted test server could not start."""


class ScriptedServerTimeout(RecallKitError, TimeoutError):
    """The requests a test waited for did not arrive in time."""


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
    def system_message(self) -> str:
        """The content of the first system message, or "" when there is none."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        systems = [m.get("content", "") for m in messages if isinstance(m, dict) and m.get("role") == "system"]
        return systems[0] if systems and isinstance(systems[0], str) else ""

    @property
    def user_message(self) -> str:
        """The content of the last user message, or "" when there is none."""
        messages = self.body.get("messages", []) if isinstance(self.body, dict) else []
        users = [m.get("content", "") for m in messages if m.get("role") == "user"]
        return users[-1] if users else ""


class Connection:
    """One client connection and the requests it carried."""

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


class LoopbackServer:
    """A test HTTP server on a free loopback port. Use as a context manager; ``requests`` holds
    every request a subclass recorded with ``_record``."""

    thread_name = "scripted-server"

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "LoopbackServer":
        """Serve on a free loopback port from a thread of its own; returns self.
        ScriptedServerError when it does not start in 10 s."""
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name=self.thread_name, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise ScriptedServerError(f"{self.thread_name} did not start")
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

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Every request recorded so far, once there are at least ``count``.
        ScriptedServerTimeout after ``timeout`` seconds."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.requests) >= count, timeout):
                raise ScriptedServerTimeout(f"expected {count} requests, got {len(self.requests)}")
            return list(self.requests)

    # -- what a subclass provides ------------------------------------------------------------
    def _new_record(self, method: str, path: str, headers: dict[str, str], body: Any) -> RecordedRequest:
        return RecordedRequest(method, path, headers, body)

    async def _handle(self, connection: Connection, record: RecordedRequest) -> bool:
        """Answer one parsed request; False when the connection is over."""
        raise NotImplementedError

    def _record(self, record: RecordedRequest, kind: str) -> None:
        record.reply = kind
        with self._lock:
            self.requests.append(record)
            self._lock.notify_all()

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
        connection = Connection(reader, writer)
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

    async def _serve_one(self, connection: Connection) -> bool:
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
        record = self._new_record(method, path, headers, body)
        connection.requests.append(record)
        return await self._handle(connection, record)

    # -- answers -----------------------------------------------------------------------------
    async def _send(self, connection: Connection, status: int, obj: Any, extra: dict[str, str] | None = None) -> None:
        await self._send_raw(connection, status, json.dumps(obj).encode(), extra=extra)

    @staticmethod
    async def _send_raw(
        connection: Connection, status: int, payload: bytes, content_type: str = "application/json",
        extra: dict[str, str] | None = None,
    ) -> None:
        connection.writer.write(head(status, content_type, len(payload), extra) + payload)
        await connection.writer.drain()

    @staticmethod
    async def _send_stream(connection: Connection, events: list[bytes], content_type: str = "text/event-stream") -> None:
        """A 200 whose body is ``events``, one HTTP chunk each (Transfer-Encoding: chunked), then the last chunk."""
        lines = ["HTTP/1.1 200 OK", f"Content-Type: {content_type}", "Cache-Control: no-cache",
                 "Transfer-Encoding: chunked"]
        connection.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        for event in events:
            connection.writer.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            await connection.writer.drain()
        connection.writer.write(b"0\r\n\r\n")
        await connection.writer.drain()


def head(status: int, content_type: str, length: int, extra: dict[str, str] | None = None) -> bytes:
    """The status line and headers of a whole (Content-Length) answer."""
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", f"Content-Type: {content_type}",
             f"Content-Length: {length}"]
    lines += [f"{name}: {value}" for name, value in (extra or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
