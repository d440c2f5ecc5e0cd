"""Helpers shared by the session tests (imported by name: tests run in importlib mode)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

from memory_store import MemoryStore
from recall_kit._selector import ModelSelector
from recall_kit import Recaller
from recall_kit._telemetry import DeliveryEvent, RecallEvent, Telemetry
from recall_kit.testing import ScriptedChatServer

# path -> (name, description, body)
MEMORIES: dict[str, tuple[str, str, str]] = {
    "db.md": ("Postgres conventions", "Atlas stores its data in Postgres 16 behind pgbouncer",
              "Tables are snake_case. Migrations run with alembic."),
    "deploy.md": ("Deploy procedure", "How the atlas service is shipped to production with kubernetes",
                  "kubectl apply -k overlays/prod, then watch the rollout."),
    "tea.md": ("Tea preference", "Priya drinks green tea in the afternoon", "Sencha, no sugar."),
    "editor.md": ("Editor setup", "Priya uses neovim with a dark colour scheme", "lazy.nvim plugins."),
    "oncall.md": ("On-call rota", "Who carries the pager for the billing team this quarter", ""),
}
SCOPE = "mem"
DB, DEPLOY, TEA, EDITOR, ONCALL = (f"{SCOPE}/{p}" for p in MEMORIES)
# (id, query, relevant paths, kind) over MEMORIES: an eval dataset the harness tests write out
EVAL_QUERIES = [
    ("q1", "postgres pgbouncer settings for atlas", ["db.md"], "lexical"),
    ("q2", "deploy atlas to production kubernetes", ["deploy.md"], "lexical"),
    ("q3", "what should I keep in mind this afternoon before I leave", ["tea.md"], "semantic"),
    ("q4", "who is on call for billing", ["oncall.md"], "lexical"),
    ("q5", "which text editor plugins are installed", ["editor.md"], "paraphrase"),
    ("q6", "the weather in lisbon tomorrow", [], "negative"),
]
FAST_DB_QUERY = "postgres pgbouncer settings for atlas"  # the heuristic answers mem/db.md
NO_FAST_QUERY = "what should I keep in mind this afternoon before I leave"  # heuristic: nothing


class EventLog:
    """Telemetry callback recording events; async and thread waits on a condition over them."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self._cond = threading.Condition()
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def __call__(self, event: Any) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()
            waiters = list(self._async_waiters)
        for loop, flag in waiters:
            loop.call_soon_threadsafe(flag.set)

    @property
    def recalls(self) -> list[RecallEvent]:
        return [e for e in self.events if isinstance(e, RecallEvent)]

    @property
    def deliveries(self) -> list[DeliveryEvent]:
        return [e for e in self.events if isinstance(e, DeliveryEvent)]

    def terminal(self, handle_id: int) -> list[DeliveryEvent]:
        return [e for e in self.deliveries if e.handle_id == handle_id and e.terminal]

    def discard_reasons(self) -> list[str | None]:
        return [e.reason for e in self.deliveries if e.point == "discarded"]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        flag = asyncio.Event()
        entry = (asyncio.get_running_loop(), flag)
        self._async_waiters.append(entry)
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    await flag.wait()
                    flag.clear()
        finally:
            self._async_waiters.remove(entry)

    async def wait_settled(self, handle_id: int, timeout: float = 5.0) -> None:
        await self.wait_for(
            lambda: any(r.handle_id == handle_id and r.settled for r in self.recalls), timeout
        )

    def wait_for_blocking(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        with self._cond:
            if not self._cond.wait_for(predicate, timeout):
                raise TimeoutError("telemetry condition not met in time")


MADE: list[Recaller] = []  # closed after each test by the conftest


def make_recaller(store: MemoryStore, log: EventLog, server: ScriptedChatServer | None = None,
                  **options: Any) -> Recaller:
    selector = ModelSelector(server.base_url, "scripted") if server is not None else None
    MADE.append(Recaller(store, selector, telemetry=Telemetry(log), **options))
    return MADE[-1]


def run(coro: Any) -> Any:
    """Run a test coroutine and check that it left no task behind."""

    async def checked() -> Any:
        result = await coro
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert others == [], f"tasks left pending: {others}"
        return result

    return asyncio.run(checked())


async def warm_up(recaller: Recaller, server: ScriptedChatServer) -> None:
    """One real selector request on this loop, so the HTTP client and connection already exist
    (as in a running agent) and their one-off set-up cost is not charged to a measured wait."""
    from recall_kit.testing import Reply

    assert recaller.selector is not None
    server.script(Reply.empty())
    docs = list(recaller.snapshot_docs())
    await recaller.selector.select("warm up", docs, fallback=())
