"""Writing small memory stores and eval datasets (docs/metrics.md) for tests and benchmarks."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

# path relative to the memories folder -> (name, description, body)
MemorySpec = Mapping[str, tuple[str, str, str]]
# (id, query, relevant paths, kind)
QuerySpec = tuple[str, str, list[str], str]


def write_memory(root: Path, path: str, name: str, description: str, body: str, *, type: str = "project") -> Path:
    """Write one memory file under ``root`` (creating folders) and return its path."""
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(
        f"---\nname: {name}\ndescription: {description}\ntype: {type}\n---\n{body}\n", encoding="utf-8"
    )
    return file


def write_eval_dataset(root: Path, memories: MemorySpec, queries: Iterable[QuerySpec]) -> Path:
    """Write ``root/memories/**`` and ``root/queries.jsonl``; return ``root``."""
    for path, (name, description, body) in memories.items():
        write_memory(root / "memories", path, name, description, body)
    lines = [
        json.dumps({"id": qid, "query": query, "relevant": relevant, "kind": kind})
        for qid, query, relevant, kind in queries
    ]
    (root / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
