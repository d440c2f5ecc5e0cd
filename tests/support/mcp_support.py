"""The `mcp` extra, which the MCP tests need: without it they skip with this reason, never fail to collect."""

from __future__ import annotations

import importlib.util

import pytest

MISSING_REASON = "the mcp extra is not installed (pip install -e '.[mcp]')"
HAVE_MCP = importlib.util.find_spec("mcp") is not None
needs_mcp = pytest.mark.skipif(not HAVE_MCP, reason=MISSING_REASON)
