"""Helpers for the enrichment tests: memory folders on disk, scripted answers, byte-for-byte checks."""

from __future__ import annotations

import json
import queue
import time
from pathlib import Path
from typing import Any

from memory_store import MemoryDoc, MemoryStore, Snapshot, parse_memory
from recall_kit import EnrichEvent, Event, RecallEvent
from recall_kit.testing import Reply

WAIT_S = 10.0

MEMORIES = {
    "db/postgres.md": ("Postgres setup", "atlas stores trips in PostgreSQL behind pgbouncer",
                       "Run migrations behind a feature flag."),
    "deploy.md": ("Deploying atlas", "atlas deploys to kubernetes with helm", "helm upgrade atlas ./chart"),
    "tea.md": ("Afternoon routine", "green tea at four, never coffee after noon", "Sencha, 80 degrees."),
}
GOOD_ANSWER = {
    "keywords": ["database", "connection pooling", "schema change", "rollout toggle"],
    "usage_scenarios": ["how do I change the database schema safely?"],
}


def memory_text(name: str, description: str, body: str, keywords: str = "") -> str:
    extra = f"keywords: [{keywords}]\n" if keywords else ""
    return f"---\nname: {name}\ndescription: {description}\ntype: project\n{extra}---\n{body}\n"


def write_memories(root: Path, memories: dict[str, tuple[str, str, str]] = MEMORIES) -> Path:
    for rel, (name, description, body) in memories.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(memory_text(name, description, body), encoding="utf-8")
    return root


def file_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` except the sidecar folder: what enrichment must never change."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*")) if p.is_file() and ".recall-kit" not in p.parts
    }


def answer(obj: Any = GOOD_ANSWER) -> Reply:
    return Reply.content(json.dumps(obj))


def doc_for(text: str, path: str = "db/postgres.md", scope: str = "mem") -> MemoryDoc:
    return parse_memory(text, scope=scope, path=path)


def wait_for_snapshot(store: MemoryStore, predicate, timeout: float = WAIT_S) -> Snapshot:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate(snapshot := store.snapshot()):
        store.wait_for_version(snapshot.version + 1, timeout=max(0.0, deadline - time.monotonic()))
    return snapshot


class Events:
    def __init__(self) -> None:
        self.queue: queue.Queue[Event] = queue.Queue()

    def __call__(self, event: Event) -> None:
        self.queue.put(event)

    def next_settled_recall(self, timeout: float = WAIT_S) -> RecallEvent:
        deadline = time.monotonic() + timeout
        while True:
            event = self.queue.get(timeout=max(0.01, deadline - time.monotonic()))
            if isinstance(event, RecallEvent) and event.settled:
                return event

    def next_enrich(self, timeout: float = WAIT_S) -> EnrichEvent:
        deadline = time.monotonic() + timeout
        while True:
            event = self.queue.get(timeout=max(0.01, deadline - time.monotonic()))
            if isinstance(event, EnrichEvent):
                return event
