"""Fixtures for the session tests (and the example agent's): a real store on tmp_path, the real FastHeuristic, the real selector over loopback
HTTP to the scripted chat server (latency and never-answer modes control when the model answers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from memory_store import MemoryStore
from recall_kit.testing import ScriptedChatServer
from session_support import MADE, MEMORIES, SCOPE, EventLog
from recall_kit_bench import write_memory


@pytest.fixture
def memory_root(tmp_path: Path) -> Path:
    root = tmp_path / SCOPE
    for path, (name, description, body) in MEMORIES.items():
        write_memory(root, path, name, description, body)
    return root


@pytest.fixture
def store(memory_root: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(memory_root, watch=False) as opened:
        yield opened


@pytest.fixture
def chat_server() -> Iterator[Callable[..., ScriptedChatServer]]:
    """Start scripted chat servers (real loopback HTTP); all are stopped after the test."""
    started: list[ScriptedChatServer] = []

    def start(**options: Any) -> ScriptedChatServer:
        server = ScriptedChatServer(**options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(autouse=True)
def close_recallers() -> Iterator[None]:
    yield
    while MADE:
        MADE.pop().close()


@pytest.fixture
def log() -> EventLog:
    return EventLog()
