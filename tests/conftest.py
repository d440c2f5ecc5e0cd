"""Fixtures shared by every test folder."""

from __future__ import annotations

from typing import Iterator

import pytest

from recall_kit.testing import LlamaServer, RealModelUnavailable


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
