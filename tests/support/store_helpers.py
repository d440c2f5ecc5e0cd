"""Helpers shared by the store tests: memory text, writing files, waiting on versions."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from memory_store import MemoryStore, Snapshot

WAIT_S = 10.0  # generous: the machine is shared; a passing test returns as soon as the version lands


def memory(
    name: str = "A memory",
    description: str = "what it is about",
    type: str = "user",
    body: str = "Body text.\n",
    extra: str = "",
) -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {type}\n{extra}---\n{body}"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def next_millisecond() -> None:
    """Return once the clock has passed the current millisecond: the learned file keeps "last seen" to the
    millisecond, so two updates within one would tie and be ordered by their words instead."""
    now = round(time.time(), 3)
    while round(time.time(), 3) <= now:
        time.sleep(0.001)


def wait_until(store: MemoryStore, predicate: Callable[[Snapshot], bool], timeout: float = WAIT_S) -> Snapshot:
    """Wait, version by version, until ``predicate(snapshot)`` holds; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        snapshot = store.snapshot()
        if predicate(snapshot):
            return snapshot
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"condition not met by version {snapshot.version}: {sorted(snapshot.docs)}")
        try:
            store.wait_for_version(snapshot.version + 1, timeout=remaining)
        except TimeoutError:
            pass


def fingerprint(snapshot: Snapshot) -> tuple[dict[str, str], set[tuple[str, str, str]]]:
    """What must match between a watched store and a fresh scan: refs + content hashes, and errors."""
    return (
        {ref: doc.content_hash for ref, doc in snapshot.docs.items()},
        {(e.scope, e.path, e.reason) for e in snapshot.errors},
    )


def alias_bomb(where: str) -> str:
    """Nine levels of nine aliases each: about 390 bytes of YAML that expand to 9**9 strings."""
    levels = ["l0: &a0 [x,x,x,x,x,x,x,x,x]"]
    levels += [f"l{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    tail = "type: *a8\n" if where == "type" else "type: user\nbomb: *a8\n"
    return "---\nname: n\ndescription: d\n" + "\n".join(levels) + "\n" + tail + "---\n"
