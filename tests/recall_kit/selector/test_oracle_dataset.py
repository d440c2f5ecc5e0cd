"""The oracle profile over a real dataset and a real store: what benchmarks and the session rely on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selector_helpers import run_checked
from memory_store import MemoryStore
from recall_kit import ModelSelector
from recall_kit.testing import ScriptedChatServer

DATASET = Path(__file__).parents[3] / "bench" / "datasets" / "agent-memories"


@pytest.mark.parametrize("dataset", [DATASET, DATASET.parent / "multilingual"], ids=lambda p: p.name)
def test_oracle_selects_exactly_the_relevant_docs(dataset: Path) -> None:
    rows = [json.loads(line) for line in (dataset / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line]
    with MemoryStore.open(dataset / "memories", watch=False) as store, \
            ScriptedChatServer(oracle=dataset / "queries.jsonl", latency_ms=[5, 1]) as server:
        docs = list(store.snapshot().docs.values())

        async def main():
            async with ModelSelector(server.base_url, "oracle") as selector:
                return [await selector.select(row["query"], docs) for row in rows[:40]]

        for row, selection in zip(rows, run_checked(main)):
            assert selection.strategy == "model", selection.fallback_reason
            assert sorted(d.path for d in selection.docs) == sorted(row["relevant"]), row["id"]
