"""Work the daemon's event loop must not do itself: a call that may block (an open of a FIFO, a scan
of 10,000 memories) on a daemon thread of its own, awaited as a future of the loop."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable, TypeVar

from recall_kit import Recaller

_log = logging.getLogger("recall_kit.daemon")

_T = TypeVar("_T")


def in_thread(work: Callable[[], _T], *, abandon: Callable[[_T], object] | None = None) -> asyncio.Future[_T]:
    """``work()`` on a daemon thread of its own, as a future of the running loop: a call that
    blocks forever (an open of a FIFO) never holds up the exit, as the default executor's threads
    would. What ``work`` returns after its future was cancelled, or its loop closed, goes to ``abandon``."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def settle(result: _T) -> None:
        if not future.cancelled():
            future.set_result(result)
        elif abandon is not None:
            threading.Thread(target=abandon, args=(result,), name="recall-kit-close", daemon=True).start()

    def fail(exc: BaseException) -> None:
        if not future.cancelled():
            future.set_exception(exc)

    def run() -> None:
        try:
            result = work()
        except BaseException as exc:  # handed to the awaiting request, which answers with it
            _call_soon(loop, fail, exc)
            return
        if not _call_soon(loop, settle, result) and abandon is not None:
            abandon(result)

    threading.Thread(target=run, name="recall-kit-open", daemon=True).start()
    return future


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[Any], None], arg: Any) -> bool:
    """Run ``callback(arg)`` on ``loop``; False when the loop is closed already."""
    try:
        loop.call_soon_threadsafe(callback, arg)
    except RuntimeError:
        return False
    return True


def retrieved(task: asyncio.Future[Any]) -> None:
    """A done callback: what a future raised is taken, so nobody logs it as never retrieved."""
    if not task.cancelled():
        task.exception()


def close_quietly(recaller: Recaller) -> None:
    """Close a root set whose opening was abandoned (the daemon stopped waiting for it)."""
    try:
        recaller.close()
    except Exception:  # nobody is left to tell
        _log.exception("closing an abandoned root set failed")
