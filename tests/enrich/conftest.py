"""Fixtures for the enrichment tests; puts enrich_support on the path (pytest runs in importlib mode)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from recall_kit._chat import _ENDPOINT_MODES  # noqa: E402
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
