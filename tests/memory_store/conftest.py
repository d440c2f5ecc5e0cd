"""Fixtures for the store tests; plain helpers live in store_helpers.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest


from memory_store import MemoryStore


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "mem"
    folder.mkdir()
    return folder


@pytest.fixture
def open_store() -> Iterator[Callable[..., MemoryStore]]:
    """MemoryStore.open, with every store closed at teardown."""
    stores: list[MemoryStore] = []

    def _open(*roots: object, **options: object) -> MemoryStore:
        options.setdefault("debounce_ms", 20)
        store = MemoryStore.open(*roots, **options)  # type: ignore[arg-type]
        stores.append(store)
        return store

    yield _open
    for store in stores:
        store.close()
