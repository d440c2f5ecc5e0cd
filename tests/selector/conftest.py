"""Fixtures for the selector tests; puts selector_helpers on the path (pytest runs in importlib mode)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from selector_helpers import make_docs  # noqa: E402

from memory_store import MemoryDoc  # noqa: E402
from recall_kit._selector import _ENDPOINT_MODES  # noqa: E402
from recall_kit.testing import ScriptedChatServer  # noqa: E402


@pytest.fixture(autouse=True)
def forget_endpoint_modes() -> Iterator[None]:
    """Ports get reused between tests: start each test with no remembered response_format."""
    _ENDPOINT_MODES.clear()
    yield
    _ENDPOINT_MODES.clear()


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as srv:
        yield srv


@pytest.fixture
def docs() -> list[MemoryDoc]:
    return make_docs(10)
