"""Fixtures for the selector tests; puts selector_helpers on the path (pytest runs in importlib mode)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


from selector_helpers import make_docs

from memory_store import MemoryDoc


@pytest.fixture
def docs() -> list[MemoryDoc]:
    return make_docs(10)
