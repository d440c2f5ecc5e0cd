"""SyncRecallSession: the RecallSession API for threaded agents, over a background event loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import TYPE_CHECKING, Awaitable, Callable, TypeVar

from memory_store import RecallKitError
from recall_kit._handle import AbortSignal

if TYPE_CHECKING:
    from recall_kit._kinds import ConsumePoint
    from recall_kit._session import Delivery, Recaller, RecallSession

T = TypeVar("T")


class SyncRecallSession:
    """Same methods as RecallSession, callable from any thread; ``close()`` stops the loop thread.

    ``abort`` may be a ``threading.Event`` (polled by the loop every few milliseconds).
    """

    def __init__(self, recaller: Recaller):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="recall-kit-session", daemon=True
        )
        self._thread.start()
        self._closed = False
        self._session: RecallSession = self._call(recaller.session)

    @property
    def surfaced_paths(self) -> frozenset[str]:
        return self._call(lambda: self._session.surfaced_paths)

    @property
    def pending(self) -> bool:
        return self._call(lambda: self._session.pending)

    def begin(self, query: str, *, abort: AbortSignal | None = None) -> None:
        self._call(lambda: self._session.begin(query, abort=abort))

    def consume(self, point: ConsumePoint = "initial") -> Delivery | None:
        return self._await(self._session.consume(point))

    def finish(self) -> None:
        self._call(self._session.finish)

    def cancel(self, reason: str = "abort") -> None:
        self._call(lambda: self._session.cancel(reason))

    def reset(self) -> None:
        self._call(self._session.reset)

    def close(self) -> None:
        """Cancel what is pending, wait for the session's tasks, stop and join the loop thread."""
        if self._closed:
            return
        self._await(self._shutdown())
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> SyncRecallSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _shutdown(self) -> None:
        await self._session.close()
        selector = self._session.recaller.selector
        # the selector's HTTP connections belong to the loop that opened them: ours is ending
        if selector is not None and getattr(selector, "_http_loop", None) is self._loop:
            await selector.aclose()

    def _await(self, awaitable: Awaitable[T]) -> T:
        if self._closed:
            getattr(awaitable, "close", lambda: None)()  # never started: no "never awaited" warning
            raise RecallKitError("SyncRecallSession is closed")
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(
            _as_coroutine(awaitable), self._loop
        )
        return future.result()

    def _call(self, fn: Callable[[], T]) -> T:
        async def invoke() -> T:
            return fn()

        return self._await(invoke())


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable
