"""One process's model calls in two classes: a prompt's (the selector's, foreground) and background
enrichment's. A prompt waiting on the model always goes first.

A foreground call never waits for the lane. A background call starts only while no foreground call
is in flight, with at most ``concurrency`` background calls in flight and at most one started per
``60 / calls_per_minute`` seconds (measured from the previous start and from the end of the previous
call); a foreground call that begins cancels the background calls in flight, which are tried again
once it is done. A local server that answers one request at a time so never keeps a prompt queued
behind a memory's enrichment. The lane is thread-safe: the daemon's selector runs on its event loop,
each store's enrichment on a thread and loop of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from memory_store import RecallKitError
from recall_kit._errors import UsageError

T = TypeVar("T")


class Preempted(RecallKitError):
    """A background call was cancelled because a foreground call began; it is to be tried again."""


@dataclass(eq=False)
class _Call:
    loop: asyncio.AbstractEventLoop
    task: asyncio.Task[object] | None = None
    preempted: bool = False
    started: float = field(default_factory=time.monotonic)


@dataclass(frozen=True, slots=True)
class LaneCounts:
    """What the lane has done so far."""

    background_calls: int  # started, preempted ones included
    preempted: int  # background calls cancelled for a foreground one
    foreground_calls: int
    in_flight: int  # background calls now


class ModelLane:
    """Foreground calls first, background calls bounded and paced (see the module's docstring)."""

    def __init__(self, *, concurrency: int = 1, calls_per_minute: float) -> None:
        if concurrency < 1:
            raise UsageError(f"concurrency must be at least 1, got {concurrency!r}")
        if not calls_per_minute > 0:
            raise UsageError(f"calls_per_minute must be positive, got {calls_per_minute!r}")
        self.concurrency = concurrency
        self.interval_s = 60.0 / calls_per_minute
        self._lock = threading.Lock()
        self._foreground = 0
        self._running: set[_Call] = set()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._next_start = 0.0  # monotonic time before which no background call starts
        self._background_calls = self._preempted = self._foreground_calls = 0

    def counts(self) -> LaneCounts:
        """The lane's counters, read together."""
        with self._lock:
            return LaneCounts(self._background_calls, self._preempted, self._foreground_calls, len(self._running))

    @contextlib.contextmanager
    def foreground(self) -> Iterator[None]:
        """Around a prompt's model call: background calls in flight are cancelled, none starts until it ends."""
        with self._lock:
            self._foreground += 1
            self._foreground_calls += 1
            victims = [call for call in self._running if not call.preempted]
            for call in victims:
                call.preempted = True
        for call in victims:
            _call_soon(call.loop, call.task.cancel if call.task is not None else None)
        try:
            yield
        finally:
            with self._lock:
                self._foreground -= 1
            self._wake()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[Slot]:
        """A background call's turn, once the lane lets one start: no foreground call in flight, a
        free place among ``concurrency``, the pace kept. The caller then picks its work (what is
        wanted may have changed while it waited) and runs it with ``Slot.run``, or leaves it unused."""
        call = _Call(asyncio.get_running_loop())
        await self._take_slot(call)
        slot = Slot(self, call)
        try:
            yield slot
        finally:
            with self._lock:
                self._running.discard(call)
                if slot.used:  # paced from the end of a call too: a slow call is never followed at once
                    self._next_start = max(self._next_start, time.monotonic() + self.interval_s)
            self._wake()

    async def _take_slot(self, call: _Call) -> None:
        loop = call.loop
        while True:
            with self._lock:
                now = time.monotonic()
                free = self._foreground == 0 and len(self._running) < self.concurrency
                if free and now >= self._next_start:
                    self._running.add(call)
                    return
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
                delay = self._next_start - now if free else None  # only the pace is a matter of time
            try:
                async with asyncio.timeout(delay):
                    await waiter
            except TimeoutError:
                pass
            finally:
                with self._lock:
                    if (loop, waiter) in self._waiters:
                        self._waiters.remove((loop, waiter))

    def _wake(self) -> None:
        """Let every waiting background call look again (the few there are; each checks for itself)."""
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            _call_soon(loop, _settle(waiter))


class Slot:
    """One background call's place in the lane (from ``ModelLane.slot``)."""

    def __init__(self, lane: ModelLane, call: _Call) -> None:
        self._lane = lane
        self._call = call
        self.used = False

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """``work()``, the model call; its result. Preempted when a foreground call began first or
        cancelled it (nothing of it is to be kept); a cancellation of the caller cancels it too."""
        lane, call = self._lane, self._call
        with lane._lock:
            if call.preempted:
                raise Preempted("a prompt needed the model")
            self.used = True
            lane._background_calls += 1
            lane._next_start = max(lane._next_start, time.monotonic() + lane.interval_s)
            task: asyncio.Task[T] = call.loop.create_task(_awaited(work))
            call.task = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if call.preempted and task.cancelled() and (current is None or not current.cancelling()):
                with lane._lock:
                    lane._preempted += 1
                raise Preempted("a prompt needed the model") from None
            raise


def _settle(waiter: asyncio.Future[None]) -> Callable[[], None]:
    def settle() -> None:
        if not waiter.done():
            waiter.set_result(None)

    return settle


async def _awaited(work: Callable[[], Awaitable[T]]) -> T:
    return await work()


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], object] | None) -> None:
    if callback is None:
        return
    try:
        loop.call_soon_threadsafe(callback)
    except RuntimeError:
        pass  # that loop is closed: its call is gone with it
