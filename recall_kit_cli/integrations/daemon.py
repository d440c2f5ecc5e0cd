"""`recall-kit serve`: one per-user process holding watched stores, a Recaller per root set, and the
agents' sessions, answering the JSON-lines protocol in ``protocol`` on a 0600 Unix socket.

Whatever its clients ask, its work is bounded: a root set must look like folders of memories
(``_roots``), at most ``DAEMON_MAX_STORES`` root sets and ``DAEMON_MAX_SESSIONS`` sessions are
live (the least recently used goes first), and a store opens on a daemon thread of its own, so
an open that blocks never keeps SIGTERM from ending the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import struct
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from memory_store import (
    MAX_ROOT_ENTRIES,
    JsonNestingError,
    RecallKitError,
    Snapshot,
    open_private,
    parse_json,
    private_folder,
)
from recall_kit import (
    Enricher,
    ModelLane,
    ModelSelector,
    Recaller,
    RecallSession,
    SelectorConfig,
    keyword_vocabulary,
    open_recaller,
    writing_note,
)
from recall_kit.settings import DEFAULT_IDLE_TIMEOUT_S
from recall_kit.limits import (
    DAEMON_CONNECTION_IDLE_S,
    DAEMON_ENRICH_CALLS_PER_MINUTE,
    DAEMON_MAX_CONNECTIONS,
    DAEMON_ENRICH_CONCURRENCY,
    DAEMON_MAX_SESSIONS,
    DAEMON_MAX_STORES,
    MAX_SESSION_ID_CHARS,
    PROTOCOL_MAX_LINE_BYTES,
    WRITING_NOTE_WAIT_S,
)
from recall_kit_cli._output import json_text
from recall_kit_cli.integrations._offloop import close_quietly, in_thread, retrieved
from recall_kit_cli.integrations._roots import check_root_set
from recall_kit_cli.integrations._runtime import RuntimePaths
from recall_kit_cli.integrations._surfaced import SurfacedRecord
from recall_kit_cli.integrations.protocol import PROTOCOL_VERSION, DaemonError, check_socket_length
from recall_kit_cli.integrations.trail import Trail

_log = logging.getLogger("recall_kit.daemon")

DEFAULT_SESSION_TTL_S = 6 * 3600.0  # an agent that died without SessionEnd leaves its session this long
SHUTDOWN_GRACE_S = 5.0  # closing sessions and stores after a stop; what is still stuck then is left to the exit
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
        cache_dir: Path | None = None,
        learn: bool = False,
        max_stores: int = DAEMON_MAX_STORES,
        max_sessions: int = DAEMON_MAX_SESSIONS,
        trail: Trail | None = None,
        enrich: bool = False,
        enrich_concurrency: int = DAEMON_ENRICH_CONCURRENCY,
        enrich_calls_per_minute: float = DAEMON_ENRICH_CALLS_PER_MINUTE,
        agent_keywords: bool = True,
    ) -> None:
        """``selector_config`` is the model the prompts are refined with (None: fast path only); with
        ``enrich`` the same model also enriches every root set's memories in the background. Both
        share one ModelLane, so a prompt's call always goes first. ``agent_keywords`` gives each
        session the note asking its agent for keywords and usage scenarios."""
        self.paths = paths
        self.idle_timeout_s = idle_timeout_s
        self.session_ttl_s = session_ttl_s
        self.max_stores = max_stores
        self.max_sessions = max_sessions
        self._selector_config = selector_config
        self._selector: ModelSelector | None = None
        # Every store it opens is bounded again at each rescan: a root checked at open may be retargeted later.
        self._store_options: dict[str, Any] = {"max_entries": MAX_ROOT_ENTRIES}
        if debounce_ms is not None:
            self._store_options["debounce_ms"] = debounce_ms
        self._use_cache = use_cache  # a root set opens from the index cache, as `recall-kit query` does
        self._cache_dir = cache_dir  # the loaded settings' (None: open_recaller's default)
        self._learn = learn  # each root set's Recaller feeds the model's answers back to its sidecars
        self._trail = trail  # what each prompt got and why, for `recall-kit hook log`; None: kept nowhere
        self._enrich = enrich and selector_config is not None  # nothing is sent without a trusted model
        self._lane = ModelLane(concurrency=enrich_concurrency, calls_per_minute=enrich_calls_per_minute)
        self._agent_keywords = agent_keywords
        self._noted: dict[str, None] = {}  # sessions given the writing note, the least recently noted first
        self._vocabularies: weakref.WeakKeyDictionary[Recaller, tuple[Snapshot, tuple[str, ...]]] = (
            weakref.WeakKeyDictionary())  # a root set's vocabulary, for the snapshot it was built from
        self._surfaced = SurfacedRecord(paths.surfaced)  # what each session got, across a restart
        # root set -> its opening; in order of use, the least recently used first
        self._recallers: dict[tuple[str, ...], asyncio.Task[Recaller]] = {}
        # session id -> conversation; in order of use, the least recently used first
        self._conversations: dict[str, _Conversation] = {}
        self._writers: set[asyncio.StreamWriter] = set()
        self._clients: set[asyncio.Task[Any]] = set()  # one per connection, cancelled on a stop
        # the connections waiting for their next request line, the longest waiting first
        self._waiting: dict[object, asyncio.Timeout] = {}
        self._connections_closed = 0  # waiting ones closed to make room for another
        self._stopping = asyncio.Event()
        self._last_request = time.monotonic()
        self._started = time.monotonic()
        self._requests = 0
        self._refused_peers = 0
        self._stores_closed = 0
        self._sessions_dropped = 0
        self._lock_fd: int | None = None
        self.stop_reason = ""

    # --- lifecycle ------------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the per-user lock and clear a socket a dead daemon left; AlreadyRunning if one lives,
        UnsafePathError when the run folder or the lock is not this user's alone (or is a symlink),
        DaemonError when no socket can be bound at the path."""
        check_socket_length(self.paths.socket)
        private_folder(self.paths.folder)
        fd = open_private(self.paths.lock, os.O_RDWR, create=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            pid = f" (pid {holder})" if holder.isdigit() else ""
            raise AlreadyRunning(f"a recall-kit daemon{pid} already serves {self.paths.socket}") from None
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
            self._selector = ModelSelector.from_config(self._selector_config, lane=self._lane)
        try:
            on_ready()
            await self._watch_idle()
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            for client in list(self._clients):
                client.cancel()  # a request blocked on a stuck open must not hold up the exit (wait_closed waits for it on 3.12)
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
        for sid, conversation in list(self._conversations.items()):  # least recently used first
            if now - conversation.touched <= self.session_ttl_s:
                break
            del self._conversations[sid]
            await conversation.session.close()

    async def _shutdown(self) -> None:
        """Close every session and store, within SHUTDOWN_GRACE_S; then free the socket and the lock."""
        try:
            async with asyncio.timeout(SHUTDOWN_GRACE_S):
                conversations, self._conversations = self._conversations, {}
                for conversation in conversations.values():
                    await conversation.session.close()
                openings, self._recallers = list(self._recallers.values()), {}
                closing = []
                for opening in openings:
                    if not opening.done():
                        opening.cancel()  # its thread hands what it opens to close_quietly
                    elif not opening.cancelled() and opening.exception() is None:
                        closing.append(in_thread(opening.result().close))  # the shared selector is closed below
                if closing:
                    await asyncio.wait(closing)
                if self._selector is not None:
                    await self._selector.aclose()
        except TimeoutError:
            _log.warning("stopped before every session and store closed (after %g s)", SHUTDOWN_GRACE_S)
        finally:
            self.paths.socket.unlink(missing_ok=True)
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    # --- connections ----------------------------------------------------------------------

    async def _serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        client = asyncio.current_task()
        if client is not None:
            self._clients.add(client)
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
            if len(self._clients) > DAEMON_MAX_CONNECTIONS and not self._make_room_for(writer):
                return
            while not self._stopping.is_set():
                try:
                    line = await self._next_line(reader)
                except (ValueError, asyncio.LimitOverrunError):
                    writer.write(_encode({"ok": False, "error": f"request over {PROTOCOL_MAX_LINE_BYTES} bytes"}))
                    await writer.drain()
                    return
                if not line:
                    return
                self._last_request = time.monotonic()
                self._requests += 1
                if not await self._send(writer, _encode(await self._answer(line))):
                    writer.transport.abort()  # its unread answers are dropped: close() would wait to send them
                    return
        except (ConnectionError, BrokenPipeError):
            pass
        finally:
            self._writers.discard(writer)
            if client is not None:
                self._clients.discard(client)
            self._last_request = time.monotonic()
            writer.close()

    @contextlib.asynccontextmanager
    async def _closable(self) -> AsyncIterator[None]:
        """A wait on the client, bounded by DAEMON_CONNECTION_IDLE_S and cut short when the connection
        is closed to make room (``_make_room_for``): TimeoutError either way."""
        key = object()
        async with asyncio.timeout(DAEMON_CONNECTION_IDLE_S) as bound:
            self._waiting[key] = bound
            try:
                yield
            finally:
                self._waiting.pop(key, None)

    async def _next_line(self, reader: asyncio.StreamReader) -> bytes:
        """The connection's next request line; b"" when it closes, sends none in DAEMON_CONNECTION_IDLE_S,
        or is closed to make room."""
        try:
            async with self._closable():
                return await reader.readline()
        except TimeoutError:
            return b""

    async def _send(self, writer: asyncio.StreamWriter, answer: bytes) -> bool:
        """Write an answer; False when the client reads none of what is queued for it in
        DAEMON_CONNECTION_IDLE_S, or is closed meanwhile to make room: a client that sends requests and
        never reads their answers holds no slot and keeps the daemon from no idle exit."""
        writer.write(answer)
        try:
            async with self._closable():
                await writer.drain()
        except TimeoutError:
            return False
        return True

    def _make_room_for(self, writer: asyncio.StreamWriter) -> bool:
        """One connection over DAEMON_MAX_CONNECTIONS: close the one waiting longest for a request or
        for its client to read an answer (its bound ends now); when every other is busy with a request,
        refuse this one in one line (False)."""
        longest = next(iter(self._waiting), None)
        if longest is None:
            writer.write(_encode({"ok": False, "error": f"{DAEMON_MAX_CONNECTIONS} connections are busy; try again"}))
            return False
        self._waiting.pop(longest).reschedule(asyncio.get_running_loop().time())
        self._connections_closed += 1
        return True

    async def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            message = parse_json(line)
            if not isinstance(message, dict):
                raise _RequestError("a request is a JSON object")
            op = message.get("op")
            handler = self._handlers.get(op) if isinstance(op, str) else None
            if handler is None:
                raise _RequestError(f"unknown op {op!r}; one of {sorted(self._handlers)}")
            return {"ok": True, **await handler(self, message)}
        except json.JSONDecodeError as exc:
            return {"ok": False, "error": f"not JSON: {exc.msg} at column {exc.colno}"}
        except JsonNestingError as exc:
            return {"ok": False, "error": f"not JSON: {exc}"}
        except UnicodeDecodeError as exc:
            return {"ok": False, "error": f"not UTF-8: invalid byte at offset {exc.start} of the request"}
        except (_RequestError, RecallKitError, ValueError) as exc:
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
        if self._trail is not None:
            self._trail.begin(sid, key, query)
        try:
            recaller = await self._recaller(key)
        except RecallKitError as exc:
            if self._trail is not None:
                self._trail.refused(sid, str(exc))
            raise
        conversation = self._conversations.get(sid)
        if conversation is not None and conversation.key != key:
            del self._conversations[sid]
            await conversation.session.close()
            conversation = None
        if conversation is None:  # new, or known before a restart or a drop: what it got is not sent again
            conversation = _Conversation(RecallSession(recaller.stages, sid, surfaced=self._surfaced.refs(sid)), key)
            self._conversations[sid] = conversation
        self._touch(sid)
        conversation.session.begin(query)  # begin() cuts it to what recall reads
        while len(self._conversations) > self.max_sessions:  # the least recently used go; this one is the most recent
            await self._drop_session(next(iter(self._conversations)))
        if message.get("writing_note") is True and not self._was_noted(sid):
            return {"writing_note": await self._writing_note(sid, recaller)}  # the session had none yet
        return {}

    async def _op_writing_note(self, message: dict[str, Any]) -> dict[str, Any]:
        """The note for a session (``unless_given``: only if it had none): with the vocabulary of
        ``roots`` (none: the note alone) when they open within WRITING_NOTE_WAIT_S, else nothing and
        the session's first prompt gets it (the opening goes on for that prompt)."""
        sid = _session_id(message)
        if message.get("unless_given") is True and self._was_noted(sid):
            return {"text": None}
        roots = message.get("roots")
        if roots == [] or not self._agent_keywords:
            return {"text": await self._writing_note(sid, None)}
        key = _roots_key(roots)
        opening = asyncio.ensure_future(self._recaller(key))
        opening.add_done_callback(retrieved)  # a refusal after the wait is the next prompt's to say
        done, _ = await asyncio.wait({opening}, timeout=WRITING_NOTE_WAIT_S)
        if not done:
            return {"text": None}
        return {"text": await self._writing_note(sid, opening.result())}

    def _was_noted(self, sid: str) -> bool:
        """Whether session ``sid`` had the writing note: from this daemon, or from one before a restart
        (a session something was delivered in had its first prompt, which brings the note)."""
        return sid in self._noted or bool(self._surfaced.refs(sid))

    async def _writing_note(self, sid: str, recaller: Recaller | None) -> str | None:
        """The note (None when the setting is off), the session now counted as given one."""
        if not self._agent_keywords:
            return None
        self._noted.pop(sid, None)
        self._noted[sid] = None
        while len(self._noted) > self.max_sessions:
            del self._noted[next(iter(self._noted))]
        if recaller is None:
            return writing_note()
        snapshot = recaller.snapshot()
        known = self._vocabularies.get(recaller)
        if known is None or known[0] is not snapshot:  # once per snapshot: a session's first prompt waits for it
            known = (snapshot, await in_thread(lambda: keyword_vocabulary(snapshot)))  # builds deferred docs: off the loop
            self._vocabularies[recaller] = known
        return writing_note(known[1])

    async def _op_consume(self, message: dict[str, Any]) -> dict[str, Any]:
        sid = _session_id(message)
        point = message.get("point", "initial")
        if point not in ("initial", "tool_result"):
            raise _RequestError(f"unknown point {point!r}; use 'initial' or 'tool_result'")
        conversation = self._touch(sid)
        if conversation is None:
            return {"delivery": None}
        delivery = await conversation.session.consume(point)
        if delivery is None:
            return {"delivery": None}
        self._surfaced.add(sid, delivery.refs)
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
        conversation = self._touch(_session_id(message))
        if conversation is not None:
            conversation.session.finish()
        return {}

    def _touch(self, sid: str) -> _Conversation | None:
        """The session ``sid``, now the most recently used; None when there is none."""
        conversation = self._conversations.pop(sid, None)
        if conversation is not None:
            conversation.touched = time.monotonic()
            self._conversations[sid] = conversation
        return conversation

    async def _drop_session(self, sid: str) -> None:
        """Close the session ``sid`` to make room (its agent's next prompt begins a new one)."""
        conversation = self._conversations.pop(sid)
        self._sessions_dropped += 1
        await conversation.session.close()

    async def _op_close_session(self, message: dict[str, Any]) -> dict[str, Any]:
        self._noted.pop(_session_id(message), None)
        conversation = self._conversations.pop(_session_id(message), None)
        if conversation is not None:
            await conversation.session.close()
        return {"closed": conversation is not None}

    async def _op_stop(self, message: dict[str, Any]) -> dict[str, Any]:
        self._stop("asked to stop")
        return {"pid": os.getpid()}

    async def _op_status(self, message: dict[str, Any]) -> dict[str, Any]:
        stores = []
        for key, task in self._recallers.items():
            if task.done() and not task.cancelled() and task.exception() is None:
                recaller = task.result()
                snapshot = recaller.snapshot()
                store: dict[str, Any] = {
                    "roots": list(key), "version": snapshot.version, "docs": len(snapshot.docs),
                    "reused_from_cache": recaller.reused_from_cache,
                }
                if recaller.enrichment is not None:
                    stats = await in_thread(recaller.enrichment.stats)  # counts what is pending: off the loop
                    store["enrichment"] = {
                        "enriched": stats.enriched, "pending": stats.pending, "in_flight": stats.in_flight,
                        "failed": stats.failed, "preempted": stats.preempted, "calls": stats.calls,
                        "refused_roots": list(stats.refused_roots),
                    }
                stores.append(store)
        return {
            "protocol": PROTOCOL_VERSION,
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self._started, 3),
            "idle_timeout_s": self.idle_timeout_s,
            "socket": str(self.paths.socket),
            "sessions": len(self._conversations),
            "max_sessions": self.max_sessions,
            "sessions_dropped": self._sessions_dropped,
            "pending": sum(1 for c in self._conversations.values() if c.session.pending),
            "learning_after_turn": sum(1 for c in self._conversations.values() if c.session.learning),
            "stores": stores,
            "opening": sum(1 for task in self._recallers.values() if not task.done()),
            "max_stores": self.max_stores,
            "stores_closed": self._stores_closed,
            "requests": self._requests,
            "refused_peers": self._refused_peers,
            "connections": len(self._writers),
            "max_connections": DAEMON_MAX_CONNECTIONS,
            "connections_closed": self._connections_closed,
            "tasks": len(asyncio.all_tasks()),
            "threads": threading.active_count(),
            "fds": _open_fds(),
            "selector": self._selector_config.model if self._selector_config else None,
            # how soon the model answers prompts, and how often the initial point waited for it
            "model_pace": self._selector.pace.stats().as_dict() if self._selector is not None else None,
            "enrichment": self._enrichment_status(stores),
            "agent_keywords": self._agent_keywords,
        }

    def _enrichment_status(self, stores: list[dict[str, Any]]) -> dict[str, Any]:
        """Background enrichment across the root sets: on or off (and why), and its totals."""
        if not self._enrich:
            why = "no model (or an untrusted one)" if self._selector_config is None else "turned off (daemon_enrich)"
            return {"on": False, "why": why}
        lane = self._lane.counts()
        totals = {name: sum(s["enrichment"][name] for s in stores if "enrichment" in s)
                  for name in ("enriched", "pending", "in_flight", "failed", "preempted", "calls")}
        return {"on": True, "model": self._selector_config.model if self._selector_config else None, **totals,
                "prompt_calls": lane.foreground_calls, "concurrency": self._lane.concurrency,
                "calls_per_minute": round(60.0 / self._lane.interval_s, 3)}

    _handlers: dict[str, Callable[[RecallDaemon, dict[str, Any]], Any]] = {
        "begin": _op_begin,
        "consume": _op_consume,
        "finish": _op_finish,
        "close_session": _op_close_session,
        "writing_note": _op_writing_note,
        "status": _op_status,
        "stop": _op_stop,
    }

    async def _recaller(self, key: tuple[str, ...]) -> Recaller:
        """The store and Recaller for a root set, opened once; concurrent callers share the open.
        Opening one more than ``max_stores`` closes the least recently used first."""
        opening = self._recallers.pop(key, None)
        if opening is None:
            opening = asyncio.get_running_loop().create_task(self._open_checked(key))
        self._recallers[key] = opening  # the most recently used, last
        try:
            return await asyncio.shield(opening)
        except Exception:
            if self._recallers.get(key) is opening:
                del self._recallers[key]  # a root set refused or missing now gets another try later
            raise

    def _make_room(self, key: tuple[str, ...]) -> list[asyncio.Task[None]]:
        """Start closing the least recently used root sets (and their sessions) until ``key`` fits."""
        closing = []
        while len(self._recallers) - (key in self._recallers) >= self.max_stores:
            victim = next((key for key, opening in self._recallers.items() if opening.done()), None)
            if victim is None:
                raise _RequestError(f"{len(self._recallers)} root sets are opening at once; try again once they are open")
            closing.append(asyncio.get_running_loop().create_task(self._close_root_set(victim, self._recallers.pop(victim))))
        return closing

    async def _close_root_set(self, key: tuple[str, ...], opening: asyncio.Task[Recaller]) -> None:
        """Close a root set's sessions, then its store and heuristic (the shared selector stays)."""
        try:
            for sid in [sid for sid, conversation in self._conversations.items() if conversation.key == key]:
                if sid in self._conversations:
                    await self._drop_session(sid)
            if not opening.cancelled() and opening.exception() is None:
                self._stores_closed += 1
                await in_thread(opening.result().close)
        except Exception:  # the root set is gone from the daemon either way; what failed is logged
            _log.exception("closing the root set %s failed", list(key))

    async def _open_checked(self, key: tuple[str, ...]) -> Recaller:
        """Open ``key`` once it passed the root checks (off the loop: they count entries) and the stores
        it replaces are closed: a refused set closes nothing, and never more than ``max_stores`` are open."""
        await in_thread(lambda: check_root_set(key))  # before anything walks or watches them
        closing = self._make_room(key)
        if closing:
            await asyncio.gather(*closing)
        return await in_thread(lambda: self._open(key), abandon=close_quietly)

    def _open(self, key: tuple[str, ...]) -> Recaller:
        # the selector is the daemon's, shared by every root set; the Recaller closes the rest
        enricher = (
            Enricher.from_config(self._selector_config, lane=self._lane)
            if self._enrich and self._selector_config is not None else None
        )
        return open_recaller(
            key, watch=True, use_cache=self._use_cache, cache_dir=self._cache_dir, selector=self._selector,
            enrich=enricher, learn=self._learn, telemetry=self._trail.emit if self._trail is not None else None,
            **self._store_options,
        )


def _encode(answer: dict[str, Any]) -> bytes:
    return json_text(answer).encode("utf-8") + b"\n"  # a file name's undecodable byte as its \udcXX escape


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
