"""Fixtures for the selector tests; puts selector_helpers on the path (pytest runs in importlib mode)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from selector_helpers import make_docs  # noqa: E402

from memory_store import MemoryDoc  # noqa: E402


@pytest.fixture
def docs() -> list[MemoryDoc]:
    return make_docs(10)
