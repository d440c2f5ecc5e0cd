"""Fixtures shared by every test folder."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

# importlib mode: the plain helper modules in tests/support are imported by name
sys.path.insert(0, str(Path(__file__).parent / "support"))

# never the real user's own recall-kit.toml: an empty config folder for the run (subprocesses inherit it)
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="recall-kit-tests-config-")
atexit.register(shutil.rmtree, os.environ["XDG_CONFIG_HOME"], True)
os.environ.pop("RECALL_KIT_CONFIG", None)

from recall_kit._chat import _ENDPOINT_MODES
from recall_kit.testing import LlamaServer, RealModelUnavailable, ScriptedChatServer


@pytest.fixture(autouse=True)
def forget_endpoint_modes() -> Iterator[None]:
    """Loopback ports get reused between tests: start each test with no remembered response_format."""
    _ENDPOINT_MODES.clear()
    yield
    _ENDPOINT_MODES.clear()


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    """A scripted OpenAI-compatible chat server on loopback."""
    with ScriptedChatServer() as srv:
        yield srv


@pytest.fixture(scope="session")
def llama() -> Iterator[LlamaServer]:
    """One real llama.cpp server (SmolLM2-135M) for every real-model test; it fails, never skips,
    when the real-model extra is missing."""
    try:
        server = LlamaServer(n_ctx=8192).start()
    except RealModelUnavailable as exc:
        pytest.fail(f"real model unavailable: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()
