"""SyncRecallSession: the RecallSession API for threaded agents, over a background event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol, TypeVar

from recall_kit._errors import SessionClosedError, UsageError
from recall_kit._handle import AbortSignal
from recall_kit._session import Delivery, RecallSession

if TYPE_CHECKING:
    from recall_kit._kinds import CancelReason, ConsumePoint

T = TypeVar("T")


class SessionFactory(Protocol):
    """What a sync session needs of its Recaller: a way to make the session it runs."""

    def session(self) -> RecallSession: ...


class SyncRecallSession:
    """Same methods as RecallSession, callable from any thread; ``close()`` stops the loop thread.

    ``abort`` may be a ``threading.Event`` (polled by the loop every few milliseconds).
    """

    def __init__(self, recaller: SessionFactory):
        if not callable(getattr(recaller, "session", None)):
            raise UsageError(f"SyncRecallSession needs a Recaller (anything with session()), got {type(recaller).__name__}")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="recall-kit-session", daemon=True
        )
        self._thread.start()
        self._closed = False
        self._lock = threading.Lock()  # guards _closed and _waiting
        self._waiting: set[concurrent.futures.Future[object]] = set()  # calls in progress
        try:
            self._session: RecallSession = self._call(recaller.session)
        except BaseException:
            self._stop_loop()  # no session, so nobody would ever close this thread
            raise

    @property
    def surfaced_paths(self) -> frozenset[str]:
        """RecallSession.surfaced_paths, from any thread."""
        return self._call(lambda: self._session.surfaced_paths)

    @property
    def pending(self) -> bool:
        """RecallSession.pending, from any thread."""
        return self._call(lambda: self._session.pending)

    @property
    def learning(self) -> bool:
        """RecallSession.learning, from any thread."""
        return self._call(lambda: self._session.learning)

    def begin(self, query: str, *, abort: AbortSignal | None = None) -> None:
        """RecallSession.begin, from any thread."""
        self._call(lambda: self._session.begin(query, abort=abort))

    def consume(self, point: ConsumePoint = "initial") -> Delivery | None:
        """RecallSession.consume, from any thread; the caller blocks while it waits."""
        return self._await(self._session.consume(point))

    def finish(self) -> None:
        """RecallSession.finish, from any thread."""
        self._call(self._session.finish)

    def cancel(self, reason: CancelReason = "abort") -> None:
        """RecallSession.cancel, from any thread."""
        self._call(lambda: self._session.cancel(reason))

    def reset(self) -> None:
        """RecallSession.reset, from any thread."""
        self._call(self._session.reset)

    def close(self) -> None:
        """Cancel what is pending, wait for the session's tasks, stop and join the loop thread.

        A call another thread still waits in is woken with SessionClosedError."""
        if threading.current_thread() is self._thread:
            raise UsageError("SyncRecallSession.close() called from its own loop thread")
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result()
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        """Stop and join the loop thread, then wake every call still waiting with SessionClosedError."""
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        with self._lock:
            stranded, self._waiting = self._waiting, set()
        for waiter in stranded:
            _fail(waiter, SessionClosedError("SyncRecallSession was closed while this call waited"))
        self._loop.close()

    def __enter__(self) -> SyncRecallSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _shutdown(self) -> None:
        await self._session.close()
        selector = self._session.stages.selector
        if selector is not None:  # the connections it opened on our loop end with the loop
            await selector.aclose()

    def _await(self, awaitable: Awaitable[T]) -> T:
        with self._lock:
            if self._closed:
                getattr(awaitable, "close", lambda: None)()  # never started: no "never awaited" warning
                raise SessionClosedError("SyncRecallSession is closed")
            # our own waiter, not the loop's future: close() can fail it once the loop is gone
            waiter: concurrent.futures.Future[object] = concurrent.futures.Future()
            self._waiting.add(waiter)
            running = asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), self._loop)
        running.add_done_callback(lambda done: _copy_outcome(done, waiter))
        try:
            return waiter.result()  # type: ignore[return-value]  # the coroutine's own T
        finally:
            with self._lock:
                self._waiting.discard(waiter)

    def _call(self, fn: Callable[[], T]) -> T:
        async def invoke() -> T:
            return fn()

        return self._await(invoke())


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _copy_outcome(done: concurrent.futures.Future[T], waiter: concurrent.futures.Future[object]) -> None:
    if done.cancelled():
        _fail(waiter, SessionClosedError("SyncRecallSession was closed while this call waited"))
    elif (error := done.exception()) is not None:
        _fail(waiter, error)
    else:
        try:
            waiter.set_result(done.result())
        except concurrent.futures.InvalidStateError:
            pass  # close() already woke the caller


def _fail(waiter: concurrent.futures.Future[object], error: BaseException) -> None:
    try:
        waiter.set_exception(error)
    except concurrent.futures.InvalidStateError:
        pass  # already settled
