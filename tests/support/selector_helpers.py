"""Helpers for the selector tests: real MemoryDocs and a task-leak check (imported via conftest's path)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from memory_store import MemoryDoc
from recall_kit import ModelSelector, Selection
from recall_kit.testing import RecordedRequest, Reply, ScriptedChatServer

T = TypeVar("T")
NOW = time.time()


def make_doc(
    path: str,
    description: str = "",
    *,
    scope: str = "mem",
    type: str = "project",
    keywords: tuple[str, ...] = (),
    age_s: float = 3600.0,
) -> MemoryDoc:
    name = Path(path).stem
    raw = repr((scope, path, description, type, keywords)).encode()  # what the file's bytes would decide
    return MemoryDoc(
        scope=scope, path=path, abspath=Path("/tmp/memories") / path, name=name,
        description=description or f"notes about {name}", type=type, keywords=keywords, extra={},
        body=f"# {name}\n", mtime=NOW - age_s, size=len(raw), content_hash=hashlib.sha256(raw).hexdigest(),
    )


def make_docs(n: int) -> list[MemoryDoc]:
    return [make_doc(f"notes/topic-{i:03d}.md", f"topic {i} details", age_s=60.0 * (i + 1)) for i in range(n)]


def run_checked(main: Callable[[], Awaitable[T]]) -> T:
    """Run ``main`` in a fresh loop and fail if it leaves any task behind."""

    async def wrapper() -> T:
        result = await main()
        await asyncio.sleep(0)
        leftover = asyncio.all_tasks() - {asyncio.current_task()}
        assert not leftover, f"tasks left behind: {leftover}"
        return result

    return asyncio.run(wrapper())


def kwargs_for(srv: ScriptedChatServer, **extra: Any) -> dict[str, Any]:
    return {"base_url": srv.base_url, "model": "scripted-model", **extra}


def select_with(
    srv: ScriptedChatServer,
    *replies: Reply,
    candidates: Sequence[MemoryDoc] | None = None,
    fallback: Sequence[MemoryDoc] = (),
    query: str = "where are the deploy notes?",
    **selector_kwargs: Any,
) -> tuple[Selection, list[RecordedRequest]]:
    """Script ``replies``, run one selection with a fresh selector, return it and the new requests."""
    before = len(srv.requests)
    srv.script(*replies)
    candidates = make_docs(10) if candidates is None else candidates

    async def main() -> Selection:
        async with ModelSelector(**kwargs_for(srv, **selector_kwargs)) as selector:
            return await selector.select(query, candidates, fallback=fallback)

    selection = run_checked(main)
    return selection, srv.requests[before:]
