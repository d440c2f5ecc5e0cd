"""Fixtures for the integration tests; the helpers live in integration_support."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # importlib mode: make integration_support importable

from integration_support import daemon, env, memories  # noqa: E402,F401
