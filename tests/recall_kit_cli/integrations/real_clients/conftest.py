"""Fixtures of the real-client tests: the pinned CLIs (installed once per checkout), skipped with
the reason where node or npm is missing, and failing instead where CI requires them."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_clients import REQUIRED, agent_clis
from recall_kit.testing import AgentClisMissing


@pytest.fixture(scope="session")
def clis() -> dict[str, Path]:
    try:
        return agent_clis()
    except AgentClisMissing as exc:
        if REQUIRED:
            pytest.fail(f"the real agent CLIs are required here (RECALL_KIT_REQUIRE_AGENT_CLIS=1): {exc}", pytrace=False)
        pytest.skip(f"real agent CLIs: {exc}")
