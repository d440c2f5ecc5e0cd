"""Micro benchmarks of the store (pytest-benchmark).

    .venv/bin/pytest bench/bench_store.py --benchmark-only

Full scan + parse of 100 and 1,000 files, and parse_memory of one file.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

from memory_store import MemoryStore, parse_memory

_spec = importlib.util.spec_from_file_location("store_scaling", Path(__file__).with_name("store_scaling.py"))
assert _spec is not None and _spec.loader is not None
store_scaling = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(store_scaling)


@pytest.fixture(scope="module", params=[100, 1000], ids=lambda n: f"{n}-files")
def memory_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(f"store-{request.param}") / "memories"
    store_scaling.make_memory_files(root, request.param)
    return root


def test_full_scan_and_parse(benchmark, memory_root: Path) -> None:
    def scan() -> int:
        with MemoryStore.open(memory_root, watch=False) as store:
            return len(store.snapshot().docs)

    count = benchmark(scan)
    assert count in (100, 1000)


def test_parse_one_memory(benchmark) -> None:
    raw = store_scaling.memory_text(1, random.Random(3)).encode("utf-8")
    doc = benchmark(parse_memory, raw, scope="bench", path="one.md")
    assert doc.type == "feedback" and doc.keywords
