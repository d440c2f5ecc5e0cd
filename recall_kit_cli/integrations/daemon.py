"""`recall-kit serve`: one per-user process holding watched stores, a Recaller per root set, and the
agents' sessions, answering the JSON-lines protocol in ``protocol`` on a 0600 Unix socket."""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import signal
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from memory_store import MemoryStoreError, RecallKitError
from recall_kit import ModelSelector, Recaller, RecallSession, SelectorConfig, open_recaller
from recall_kit_cli.integrations._runtime import RuntimePaths, private_folder
from recall_kit.limits import MAX_SESSION_ID_CHARS, PROTOCOL_MAX_LINE_BYTES
from recall_kit_cli.integrations.protocol import PROTOCOL_VERSION

_log = logging.getLogger("recall_kit.daemon")

DEFAULT_IDLE_TIMEOUT_S = 30 * 60.0
DEFAULT_SESSION_TTL_S = 6 * 3600.0  # an agent that died without SessionEnd leaves its session this long
_PEERCRED = struct.Struct("3i")  # pid, uid, gid


class AlreadyRunning(RecallKitError):
    """Another daemon of this user holds the lock."""


@dataclass
class _Conversation:
    """One agent session: its RecallSession and the root set it recalls from."""

    session: RecallSession
    key: tuple[str, ...]
    touched: float = field(default_factory=time.monotonic)


class _RequestError(Exception):
    """A bad request: answered with one line, the connection stays usable."""


class RecallDaemon:
    """The daemon's state and its asyncio server; ``run`` returns after SIGTERM or the idle timeout."""

    def __init__(
        self,
        paths: RuntimePaths,
        *,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        session_ttl_s: float = DEFAULT_SESSION_TTL_S,
        selector_config: SelectorConfig | None = None,
        debounce_ms: float | None = None,
        use_cache: bool = True,
    ) -> None:
        self.paths = paths
        self.idle_timeout_s = idle_timeout_s
        self.session_ttl_s = session_ttl_s
        self._selector_config = selector_config
        self._selector: ModelSelector | None = None
        self._store_options: dict[str, Any] = {} if debounce_ms is None else {"debounce_ms": debounce_ms}
        self._use_cache = use_cache  # a root set opens from the index cache, as `recall-kit query` does
        self._recallers: dict[tuple[str, ...], asyncio.Task[Recaller]] = {}
        self._conversations: dict[str, _Conversation] = {}
        self._writers: set[asyncio.StreamWriter] = set()
        self._stopping = asyncio.Event()
        self._last_request = time.monotonic()
        self._started = time.monotonic()
        self._requests = 0
        self._refused_peers = 0
        self._lock_fd: int | None = None
        self.stop_reason = ""

    # --- lifecycle ------------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the per-user lock and clear a socket a dead daemon left; AlreadyRunning if one lives."""
        private_folder(self.paths.folder)
        fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(f"a recall-kit daemon already serves {self.paths.socket}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd
        # holding the lock proves no live daemon owns a socket here: it is stale
        self.paths.socket.unlink(missing_ok=True)

    async def run(self, on_ready: Callable[[], None]) -> None:
        """Serve on the socket until SIGTERM, SIGINT or the idle timeout, then close every session and store.
        Takes the lock first unless ``acquire()`` did; ``on_ready()`` is called once the socket listens."""
        if self._lock_fd is None:
            self.acquire()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop, f"signal {signal.Signals(sig).name}")
        listener = self._bind()
        server = await asyncio.start_unix_server(self._serve_client, sock=listener, limit=PROTOCOL_MAX_LINE_BYTES)
        if self._selector_config is not None:
            self._selector = ModelSelector.from_config(self._selector_config)
        try:
            on_ready()
            await self._watch_idle()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            await server.wait_closed()
            await self._shutdown()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)

    def _bind(self) -> socket.socket:
        path = str(self.paths.socket)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket file is born 0600: no window where others may connect
        try:
            listener.bind(path)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        listener.listen(128)
        listener.setblocking(False)
        return listener

    def _stop(self, reason: str) -> None:
        if not self._stopping.is_set():
            self.stop_reason = reason
            self._stopping.set()

    async def _watch_idle(self) -> None:
        """Wait for a stop; exit on the idle timeout; close sessions untouched for the TTL."""
        while not self._stopping.is_set():
            now = time.monotonic()
            idle_left = self._last_request + self.idle_timeout_s - now
            if idle_left <= 0 and not self._writers:
                self._stop(f"idle for {self.idle_timeout_s:g} s")
                break
            await self._expire_sessions(now)
            check_in = max(0.05, min(idle_left if idle_left > 0 else self.idle_timeout_s, 60.0))
            try:
                async with asyncio.timeout(check_in):
                    await self._stopping.wait()
            except TimeoutError:
                pass

    async def _expire_sessions(self, now: float) -> None:
        old = [sid for sid, c in self._conversations.items() if now - c.touched > self.session_ttl_s]
        for sid in old:
            await self._conversations.pop(sid).session.close()

    async def _shutdown(self) -> None:
        conversations, self._conversations = self._conversations, {}
        for conversation in conversations.values():
            await conversation.session.close()
        for task in self._recallers.values():
            if not task.done():
                task.cancel()
            try:
                recaller = await task
            except BaseException:  # an open that failed or was cancelled holds nothing
                continue
            recaller.close()  # its store and heuristic; the shared selector is closed below
        self._recallers.clear()
        if self._selector is not None:
            await self._selector.aclose()
        self.paths.socket.unlink(missing_ok=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- connections ----------------------------------------------------------------------

    async def _serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            sock = writer.get_extra_info("socket")
            _pid, uid, _gid = _PEERCRED.unpack(
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
            )
            if uid != os.getuid():
                self._refused_peers += 1
                _log.warning("refused a connection from uid %d", uid)
                writer.write(b'{"ok": false, "error": "refused: this daemon serves only its own user"}\n')
                await writer.drain()
                return
            while not self._stopping.is_set():
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    writer.write(_encode({"ok": False, "error": f"request over {PROTOCOL_MAX_LINE_BYTES} bytes"}))
                    await writer.drain()
                    return
                if not line:
                    return
                self._last_request = time.monotonic()
                self._requests += 1
                writer.write(_encode(await self._answer(line)))
                await writer.drain()
        except (ConnectionError, BrokenPipeError):
            pass
        finally:
            self._writers.discard(writer)
            self._last_request = time.monotonic()
            writer.close()

    async def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            message = json.loads(line.decode("utf-8"))  # decoded here: json.loads(bytes) may guess UTF-16
            if not isinstance(message, dict):
                raise _RequestError("a request is a JSON object")
            op = message.get("op")
            handler = self._handlers.get(op) if isinstance(op, str) else None
            if handler is None:
                raise _RequestError(f"unknown op {op!r}; one of {sorted(self._handlers)}")
            return {"ok": True, **await handler(self, message)}
        except json.JSONDecodeError as exc:
            return {"ok": False, "error": f"not JSON: {exc.msg} at column {exc.colno}"}
        except UnicodeDecodeError as exc:
            return {"ok": False, "error": f"not UTF-8: invalid byte at offset {exc.start} of the request"}
        except (_RequestError, MemoryStoreError, ValueError) as exc:
            return {"ok": False, "error": str(exc)}
        except Exception as exc:  # a request must never take the daemon down
            _log.exception("request failed")
            return {"ok": False, "error": f"internal error: {type(exc).__name__}"}

    # --- operations -----------------------------------------------------------------------

    async def _op_begin(self, message: dict[str, Any]) -> dict[str, Any]:
        sid = _session_id(message)
        query = message.get("query")
        if not isinstance(query, str) or not query.strip():
            raise _RequestError("begin needs a non-empty 'query'")
        key = _roots_key(message.get("roots"))
        recaller = await self._recaller(key)
        conversation = self._conversations.get(sid)
        if conversation is not None and conversation.key != key:
            del self._conversations[sid]
            await conversation.session.close()
            conversation = None
        if conversation is None:
            conversation = _Conversation(RecallSession(recaller, sid), key)
            self._conversations[sid] = conversation
        conversation.touched = time.monotonic()
        conversation.session.begin(query)  # begin() cuts it to what recall reads
        return {}

    async def _op_consume(self, message: dict[str, Any]) -> dict[str, Any]:
        sid = _session_id(message)
        point = message.get("point", "initial")
        if point not in ("initial", "tool_result"):
            raise _RequestError(f"unknown point {point!r}; use 'initial' or 'tool_result'")
        conversation = self._conversations.get(sid)
        if conversation is None:
            return {"delivery": None}
        conversation.touched = time.monotonic()
        delivery = await conversation.session.consume(point)
        if delivery is None:
            return {"delivery": None}
        return {
            "delivery": {
                "text": delivery.text,
                "refs": list(delivery.refs),
                "phase": delivery.phase,
                "strategy": delivery.strategy,
                "point": delivery.point,
                "placement": delivery.placement,
                "latency_ms": round(delivery.latency_ms, 3),
            }
        }

    async def _op_finish(self, message: dict[str, Any]) -> dict[str, Any]:
        conversation = self._conversations.get(_session_id(message))
        if conversation is not None:
            conversation.touched = time.monotonic()
            conversation.session.finish()
        return {}

    async def _op_close_session(self, message: dict[str, Any]) -> dict[str, Any]:
        conversation = self._conversations.pop(_session_id(message), None)
        if conversation is not None:
            await conversation.session.close()
        return {"closed": conversation is not None}

    async def _op_status(self, message: dict[str, Any]) -> dict[str, Any]:
        stores = []
        for key, task in self._recallers.items():
            if task.done() and not task.cancelled() and task.exception() is None:
                recaller = task.result()
                snapshot = recaller.snapshot()
                stores.append({
                    "roots": list(key), "version": snapshot.version, "docs": len(snapshot.docs),
                    "reused_from_cache": recaller.reused_from_cache,
                })
        return {
            "protocol": PROTOCOL_VERSION,
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self._started, 3),
            "idle_timeout_s": self.idle_timeout_s,
            "socket": str(self.paths.socket),
            "sessions": len(self._conversations),
            "pending": sum(1 for c in self._conversations.values() if c.session.pending),
            "stores": stores,
            "requests": self._requests,
            "refused_peers": self._refused_peers,
            "connections": len(self._writers),
            "tasks": len(asyncio.all_tasks()),
            "fds": _open_fds(),
            "selector": self._selector_config.model if self._selector_config else None,
        }

    _handlers: dict[str, Callable[[RecallDaemon, dict[str, Any]], Any]] = {
        "begin": _op_begin,
        "consume": _op_consume,
        "finish": _op_finish,
        "close_session": _op_close_session,
        "status": _op_status,
    }

    async def _recaller(self, key: tuple[str, ...]) -> Recaller:
        """The store and Recaller for a root set, opened once; concurrent callers share the open."""
        task = self._recallers.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(asyncio.to_thread(self._open, key))
            self._recallers[key] = task
        try:
            return await asyncio.shield(task)
        except MemoryStoreError:
            if self._recallers.get(key) is task:
                del self._recallers[key]  # a root that appears later gets another try
            raise

    def _open(self, key: tuple[str, ...]) -> Recaller:
        # the selector is the daemon's, shared by every root set; the Recaller closes the rest
        return open_recaller(key, watch=True, use_cache=self._use_cache, selector=self._selector, **self._store_options)


def _encode(answer: dict[str, Any]) -> bytes:
    return json.dumps(answer, ensure_ascii=False).encode("utf-8") + b"\n"


def _session_id(message: dict[str, Any]) -> str:
    sid = message.get("session")
    if not isinstance(sid, str) or not sid or len(sid) > MAX_SESSION_ID_CHARS:
        raise _RequestError(f"'session' must be a non-empty string of at most {MAX_SESSION_ID_CHARS} chars")
    return sid


def _roots_key(roots: Any) -> tuple[str, ...]:
    if not isinstance(roots, list) or not roots or not all(isinstance(r, str) and r for r in roots):
        raise _RequestError("'roots' must be a non-empty list of folder paths")
    if not all(os.path.isabs(r) for r in roots):
        raise _RequestError("'roots' must be absolute paths")
    return tuple(dict.fromkeys(os.path.normpath(r) for r in roots))


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return -1


def run_daemon(daemon: RecallDaemon, on_ready: Callable[[], None]) -> str:
    """Run until stopped; the reason it stopped."""
    asyncio.run(daemon.run(on_ready))
    return daemon.stop_reason


def status_line(paths: RuntimePaths) -> str:
    """The JSON line `serve` prints once it is ready: its pid and socket."""
    return json.dumps({"ready": True, "pid": os.getpid(), "socket": str(paths.socket)})


__all__ = ["AlreadyRunning", "RecallDaemon", "run_daemon", "status_line", "DEFAULT_IDLE_TIMEOUT_S"]
