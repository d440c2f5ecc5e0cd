"""Fixtures of the learning tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from recall_kit_bench import write_memory
from session_support import MEMORIES


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The session tests' memories, in a folder of their own (label "mem")."""
    folder = tmp_path / "mem"
    for path, (name, description, body) in MEMORIES.items():
        write_memory(folder, path, name, description, body)
    return folder
